"""The site's generated parts: badges, results tables, plots and recorded output, from a record."""

import pytest

from course import headline, items, programs, record
from course.site import badge, plots, results

PROGRAM = "kernels/setup/bandwidth.cu"


def _record_with(outcome="passed"):
    prog = programs.program_for(PROGRAM)
    run_info = {"gpu": "Test GPU", "cuda_runtime": "13.0", "driver": "1.0", "date": "2026-01-01"}
    rec = {"schema": record.SCHEMA, "runs": {"r1": run_info}, "items": {}}
    for i, run in enumerate(prog.runs()):
        rows = [
            {"case": "copy", "impl": "cudaMemcpy", "time_ms": 2.0, "bytes": 4e9, "flops": 0, "peer": True, "size": 1 << 20,
             "medians": [2.0, 2.01]},
            {"case": "copy", "impl": "copy_kernel", "time_ms": 2.5, "bytes": 4e9, "flops": 0, "peer": False, "size": 1 << 20,
             "medians": [2.5, 2.52]},
            {"case": "copy", "impl": "copy_kernel", "time_ms": 5.0, "bytes": 8e9, "flops": 0, "peer": False, "size": 1 << 21},
        ] if run.bench else []
        rec["items"][run.content_hash()] = {"id": run.id, "outcome": outcome, "run": "r1", "benchmarks": rows,
                                            "checks": [], "stdout": f"CHECK PASS run{i} n=1\n"}
    return rec


def test_results_table_computes_bandwidth_and_percent_of_peer():
    table = results.results_table(PROGRAM, _record_with())
    assert "| copy | copy_kernel | 2.5 | 2.5, 2.52 | 4,000 | 1,600 | 80% |" in table
    assert "| copy | cudaMemcpy | 2 | 2, 2.01 | 4,000 | 2,000 | peer |" in table
    assert "Test GPU · CUDA 13.0 · driver 1.0 · 2026-01-01" in table


def test_results_headline_takes_the_programs_own_rows_as_versions():
    # bandwidth.cu's copy_kernel is the version; cudaMemcpy, a copy of the same bytes, is the reference
    table = results.results_table(PROGRAM, _record_with())
    assert "| copy | copy_kernel, 2.5 ms | no peer timed | 80% of the copy's bandwidth |" in table
    assert "peers only" not in table


def test_missing_or_failed_figures_say_so_instead_of_a_table():
    assert "No GPU figures" in results.results_table(PROGRAM, _record_with("failed"))
    assert "No GPU figures" in results.results_table(PROGRAM, {"schema": 1, "runs": {}, "items": {}})


def test_plot_draws_one_line_per_series_with_a_title():
    svg = plots.plot_svg(PROGRAM, " x=size y=gbps logx", _record_with())
    assert svg.count("<polyline") == 2 and "<title" in svg and 'role="img"' in svg
    with pytest.raises(ValueError):
        plots.plot_svg(PROGRAM, " y=gbps", _record_with())


def test_recorded_output_shows_the_checked_run():
    text = results.recorded_output(PROGRAM, None, _record_with())
    assert text.startswith("```text\nCHECK PASS run0") and "Test GPU" in text


def test_badge_names_the_run_or_warns():
    prog = programs.program_for(PROGRAM)
    gpu_items = [items.GpuItem(r.id, r.content_hash(), PROGRAM) for r in prog.runs()]
    assert "course-verified" in badge.badge_html(gpu_items, _record_with())
    assert "course-unverified" in badge.badge_html(gpu_items, _record_with("flagged"))


def _rows():
    return [
        {"case": "n=1M", "impl": "cudaMemcpy (copy, same bytes)", "time_ms": 1.0, "bytes": 2e9, "peer": True},
        {"case": "n=1M", "impl": "v1 naive", "time_ms": 4.0, "bytes": 2e9},
        {"case": "n=1M", "impl": "v2 tiled", "time_ms": 1.25, "bytes": 2e9},
        {"case": "n=1M", "impl": "torch.sum", "time_ms": 1.5, "bytes": 2e9},
        {"case": "gemm bf16 4096", "impl": "v3 wgmma (bf16, fp32 acc)", "time_ms": 0.2, "flops": 1.374e11, "bytes": 1e8},
        {"case": "gemm bf16 4096", "impl": "cuBLAS", "time_ms": 0.18, "flops": 1.374e11, "bytes": 1e8, "peer": True},
    ]


def test_headline_names_best_version_best_peer_ratio_and_reference():
    rows = _rows()
    own = {id(b) for b in rows if b["impl"] != "torch.sum"}  # torch.sum comes from a second program
    text, metric = headline.headline(rows, own, "NVIDIA H100 80GB HBM3", {})
    lines = text.splitlines()
    # the copy is the reference, not the peer; the second program's row is the peer
    assert ("| n=1M | v2 tiled, 1.25 ms | torch.sum, 1.5 ms | **1.20×** the peer's speed; 80% of the copy's "
            "bandwidth |") in lines
    # no copy timed: the datasheet roofline for the row's precision (bf16 tensor peak), labelled as such
    gemm = next(ln for ln in lines if ln.startswith("| gemm"))
    assert "| v3 wgmma (bf16, fp32 acc), 0.2 ms | cuBLAS, 0.18 ms | **0.90×** the peer's speed;" in gemm
    assert "69% of the BF16/FP16 tensor peak (H100 SXM5 datasheet)" in gemm
    assert metric in ("gbps", "tflops")
    # four columns, so that the table fits a phone
    assert all(ln.count("|") == 5 for ln in lines if ln.startswith("|"))


def test_headline_opens_with_one_sentence_naming_result_gpu_and_date():
    rows = _rows()
    own = {id(b) for b in rows if b["impl"] != "torch.sum"}
    text, _ = headline.headline(rows, own, "NVIDIA H100 80GB HBM3", {}, "2026-11-26")
    first = text.split("\n")[0]
    assert first.startswith('<p class="course-headline" markdown>At gemm bf16 4096, the fastest version')
    assert "runs at **0.90×** the speed of the fastest peer (cuBLAS)" in first
    assert "measured on NVIDIA H100 80GB HBM3 (2026-11-26)." in first
    assert "Over the 2 cases the ratio runs from 0.90× to 1.20×." in first


def test_headline_options_pick_roles_and_cases():
    rows = _rows()
    own = {id(b) for b in rows}
    text, _ = headline.headline(rows, own, "Unknown GPU", {"ours": "v1*", "peer": "torch*", "cases": "n=*"})
    assert "| n=1M | v1 naive, 4 ms | torch.sum, 1.5 ms | **0.38×** the peer's speed;" in text
    assert "gemm" not in text
    # an unknown GPU has no datasheet: no reference where no copy was timed
    text, _ = headline.headline(rows, own, "Unknown GPU", {"cases": "gemm*"})
    assert text.splitlines()[-1].endswith("| **0.90×** the peer's speed |")


def test_headline_refuses_a_share_above_the_datasheet_ceiling():
    rows = [{"case": "c", "impl": "fft conv", "time_ms": 0.01, "flops": 1e12, "bytes": 1e6}]
    text, _ = headline.headline(rows, {id(rows[0])}, "NVIDIA H100 80GB HBM3", {})
    assert "above the datasheet ceiling" in text and "%" not in text and "reaching" not in text


def test_headline_states_a_share_of_the_copy_above_100_percent():
    # a copy is a reference, not a ceiling: a kernel that only reads can move its bytes faster
    rows = [{"case": "c", "impl": "sum", "time_ms": 0.5, "bytes": 1e9},
            {"case": "c", "impl": "cudaMemcpy (copy, same bytes)", "time_ms": 1.0, "bytes": 1e9}]
    text, metric = headline.headline(rows, {id(b) for b in rows}, "NVIDIA H100 80GB HBM3", {})
    assert "reaching 200% of the copy's bandwidth" in text and "ceiling" not in text
    assert metric == "gbps"


def test_precision_is_read_from_the_implementation_then_the_case():
    assert headline.precision("flash v1 FP32 (bf16 in, fp32 math)") == "fp32"
    assert headline.precision("cuDNN default math (TF32 allowed)") == "tf32"
    assert headline.precision("v1 wgmma + TMA", "bf16 gemm A*B^T 4096") == "16-bit"
    assert headline.precision("matmul_naive") == "fp32"


def test_results_open_with_headline_then_plot_then_folded_table():
    text = results.results_table(PROGRAM, _record_with())
    assert text.index('class="course-headline"') < text.index("<svg") < text.index('??? note "Every row measured"')
    assert "\n    | copy | copy_kernel | 2.5 |" in text  # the full table, folded (indented under the note)
    # a page that plots the program itself gets no second plot
    assert "<svg" not in results.results_table(PROGRAM, _record_with(), frozenset({PROGRAM}))
    assert "<svg" not in results.results_table(PROGRAM + " plot=off", _record_with())
    with pytest.raises(ValueError, match="unknown option"):
        results.results_table(PROGRAM + " colour=red", _record_with())


def test_headline_keeps_one_decimal_near_100_percent_and_parity():
    # 99.6% of the copy's bandwidth must not read as 100%, nor a speed of 0.996× as 1.00×
    rows = [{"case": "c", "impl": "cudaMemcpy (copy, same bytes)", "time_ms": 1.0, "bytes": 2e9, "peer": True},
            {"case": "c", "impl": "v1", "time_ms": 1.004, "bytes": 2e9},
            {"case": "c", "impl": "torch.sum", "time_ms": 1.0, "bytes": 2e9}]
    own = {id(b) for b in rows if b["impl"] != "torch.sum"}
    text, _ = headline.headline(rows, own, "NVIDIA H100 80GB HBM3", {})
    assert "| v1, 1 ms | torch.sum, 1 ms | **0.996×** the peer's speed; 99.6% of the copy's bandwidth |" in text
    rows[1]["time_ms"] = 1.1  # 90.9%, 0.91×: far from 100%, whole percent and two decimals
    text, _ = headline.headline(rows, own, "NVIDIA H100 80GB HBM3", {})
    assert "| **0.91×** the peer's speed; 91% of the copy's bandwidth |" in text
