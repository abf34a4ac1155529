"""The site's generated parts: badges, results tables, plots and recorded output, from a record."""

import re

import pytest

from course import claims, headline, items, metrics, programs, record
from course import svg as svg_module
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
    assert "| copy | copy_kernel | 2.5 (2.5, 2.52) | 4,000 | 1,600 | 80% |" in table
    assert "| copy | cudaMemcpy | 2 (2, 2.01) | 4,000 | 2,000 | peer |" in table
    # seven columns at most: Material's 5rem header cells make an eighth scroll sideways at 1280 px
    assert all(ln.count("|") <= 8 for ln in table.splitlines() if ln.startswith("| copy"))
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
    wide = svg.split('class="course-plot-narrow"')[0]  # each chart is drawn twice: a desktop's and a phone's
    assert wide.count("<polyline") == 2 and "<title" in svg and 'role="img"' in svg
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
    # "double-buffered" is an FP32 SGEMM's technique, not FP64 arithmetic
    assert headline.precision("v8 double-buffered", "sgemm 256x256x256") == "fp32"
    assert headline.precision("sum_parts<double>") == "fp64"


def test_fp64_on_cuda_cores_and_on_tensor_cores_have_their_own_peaks():
    """The H200's datasheet: 34 TFLOP/s of FP64 on the CUDA cores, 67 on the tensor cores (DGEMM)."""
    sheet = headline.datasheet_for("NVIDIA H200")
    assert headline.precision("cuBLAS dgemm") == "fp64-tensor"
    assert sheet["peak"]["fp64"] == 34e12 and sheet["peak"]["fp64-tensor"] == 67e12
    assert set(headline.PRECISION_NAMES) == set(sheet["peak"])


def test_results_open_with_headline_then_plot_then_folded_table():
    text = results.results_table(PROGRAM, _record_with())
    assert text.index('class="course-headline"') < text.index("<svg") < text.index('??? note "Every row measured"')
    assert "\n    | copy | copy_kernel | 2.5 (" in text  # the full table, folded (indented under the note)
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


# ----------------------------------------------------------------------------- true captions and headlines

def _timed(case, impl, ms, **fields):
    return {"case": case, "impl": impl, "time_ms": ms, **fields}


def _plot(series_rows, y, roles=None):
    """A line chart of rows (each with `batch` and the y field) as the site draws it, with no record."""
    runs = ["Test GPU · CUDA 13.0 · 2026-01-01"]
    return plots.plot_svg("kernels/setup/bandwidth.cu", f" x=batch y={y} logx", {}, rows=(series_rows, runs),
                          roles=roles or {id(b): "ours" for b in series_rows})


def _step_rows():
    """Ten versions timed per step: v4 the smallest time (the best), naive the largest."""
    names = ["naive", "v1", "v2", "v3", "v4", "v5 slow", "v6 slower", "v7", "v8", "v9"]
    ms = [22.5, 9.0, 5.0, 2.0, 0.6, 11.0, 15.0, 7.0, 8.0, 6.0]
    return [_timed(f"step, batch {b}", n, t * b / 1024, batch=b, step_ms=t * b / 1024)
            for b in (64, 1024) for n, t in zip(names, ms)]


def test_a_caption_calls_the_smallest_time_best_and_draws_it_in_colour():
    svg = _plot(_step_rows(), "step_ms")
    caption = svg.split("<figcaption>")[1]
    # the old caption called the largest value best: "the best version, naive, gives 22.5 step_ms"
    assert caption.startswith("At batch size 1,024, the fastest version is v4, at 0.6 ms.")
    assert "naive" not in caption and "step_ms" not in svg and "Time per training step (ms)" in caption
    assert "lower is better" in caption
    # the winner is one of the coloured lines, the slowest is grey (at most svg.HIGHLIGHTED in colour)
    colour_of = {name.strip(): c for c, name in
                 re.findall(r'<line x1="0" y1="6" x2="28" y2="6" stroke="(#\w+)"[^>]*/></svg> ([^<]+)</li>', svg)}
    assert colour_of["v4"] != svg_module.GREYED and colour_of["naive"] == svg_module.GREYED


def test_a_caption_calls_the_largest_bandwidth_best():
    rows = [_timed("n", "slow", 2.0, batch=b, busbw_gbps=100.0 * b) for b in (1, 8)]
    rows += [_timed("n", "fast", 1.0, batch=b, busbw_gbps=300.0 * b) for b in (1, 8)]
    caption = _plot(rows, "busbw_gbps").split("<figcaption>")[1]
    assert caption.startswith("At batch size 8, the fastest version is fast, at 2,400 GB/s.")
    assert "higher is better" in caption


def test_a_caption_states_bytes_in_binary_units_and_calls_the_least_memory_best():
    rows = [_timed("s", impl, 1.0, seq=s, alloc_bytes=a * s) for s in (1024, 8192)
            for impl, a in (("naive", 4 << 20), ("flash", 1 << 10))]
    svg = plots.plot_svg("kernels/setup/bandwidth.cu", " x=seq y=alloc_bytes logx", {},
                         rows=(rows, ["Test GPU"]), roles={id(b): "ours" for b in rows})
    caption = svg.split("<figcaption>")[1]
    assert caption.startswith("At sequence length (tokens) 8,192, the version that allocates the least is flash, at 8 MiB.")
    assert "alloc_bytes" not in svg and "Memory allocated (bytes)" in caption


def test_an_unknown_metric_is_an_error_not_silently_best():
    rows = [_timed("n", "a", 1.0, batch=b, mystery=b) for b in (1, 2)]
    with pytest.raises(metrics.UnknownMetric, match="mystery"):
        _plot(rows, "mystery")
    with pytest.raises(ValueError, match="size"):  # a size has no direction: no line can be called best
        _plot([_timed("n", "a", 1.0, batch=b, seq=b) for b in (1, 2)], "seq")


def test_a_chart_is_drawn_for_a_desktop_and_for_a_phone_with_a_legend_that_wraps():
    svg = _plot(_step_rows(), "step_ms")
    assert 'class="course-plot-wide"' in svg and 'class="course-plot-narrow"' in svg
    assert f'font-size="{svg_module.CHART_FONT}"' in svg
    assert '<ul class="course-plot-legend">' in svg and svg.count("<li>") == 10


def test_bar_captions_name_only_the_roles_drawn_and_bar_names_are_whole():
    long = "flash v5 persistent ping-pong, TMA-store epilogue (bf16, fp32 acc)"
    by_case = {"c": {"ours": [_timed("c", long, 0.5, flops=1e12), _timed("c", "v1", 1.0, flops=1e12)],
                     "peer": [_timed("c", "cuDNN", 0.45, flops=1e12)], "reference": []}}
    svg = plots.bars_svg("kernels/setup/bandwidth.cu", by_case, "tflops", ["Test GPU"])
    caption = svg.split("<figcaption>")[1]
    assert "references" not in caption and "grey" not in caption  # none drawn: none promised
    assert "peers in orange" in caption and "higher is better" in caption
    wide = svg.split('class="course-plot-narrow"')[0]
    assert f"{long} (best)" in wide  # whole, not cut at 44 characters; the best version (highest) marked
    # time: lower is better, so the shortest bar is the best version
    svg = plots.bars_svg("kernels/setup/bandwidth.cu", by_case, "time_ms", ["Test GPU"])
    assert f"{long} (best)" in svg and "v1 (best)" not in svg and "lower is better" in svg


def test_headline_leads_with_the_pages_goals_met_or_missed():
    rows = _rows()
    own = {id(b) for b in rows if b["impl"] != "torch.sum"}
    goals = [{"text": "v2 tiled at n=1M: 1.2× the speed of torch.sum (goal ≥ 1.75×)", "met": False,
              "status": "missed"}]
    text, _ = headline.headline(rows, own, "NVIDIA H100 80GB HBM3", {}, "", goals)
    assert text.startswith("**The goals this page states, as the record stands: 0 of 1 met.**")
    assert 'course-goal-missed">missed</span>: v2 tiled at n=1M' in text
    assert text.index("goals this page") < text.index('class="course-headline"')


def test_headline_leaves_cases_with_nothing_to_compare_to_the_full_table():
    # many cases of one implementation, no peer, no reference: the old headline led with the last case and
    # listed every case as "no peer timed"
    rows = [_timed(f"all-reduce, {n} KiB", "NCCL", 0.01 * n) for n in range(1, 40)]
    text, metric = headline.headline(rows, {id(b) for b in rows}, "Unknown GPU", {"reference": "none"})
    assert text == "" and metric == "time_ms"
    rows.append(_timed("all-reduce, 1 KiB", "ring by hand", 0.02, peer=True))
    text, _ = headline.headline(rows, {id(b) for b in rows}, "Unknown GPU", {"reference": "none"})
    assert "no peer timed" not in text and text.count("| all-reduce") == 1


def test_goal_outcome_reads_a_goal_claim_from_the_record():
    rec = _record_with()
    met = claims.goal_outcome(PROGRAM, 'case="copy" impl="copy_kernel*" show=pct goal_min=75', rec)
    assert met == {"text": "copy_kernel at copy: 80% of the speed of cudaMemcpy (goal ≥ 75%)", "met": True,
                   "status": "met"}
    assert claims.goal_outcome(PROGRAM, 'case="copy" impl="copy_kernel*" show=pct goal_min=90', rec)["status"] == "missed"
    assert claims.goal_outcome(PROGRAM, 'case="copy" impl="copy_kernel*" show=pct min=75', rec) is None


def test_sanitizer_runs_left_out_for_one_reason_are_one_sentence_with_a_count(tmp_path, monkeypatch):
    class Prog:
        def __init__(self, rel):
            self.rel, self.sanitizer_skip = rel, {t: "trains whole epochs" for t in programs.SANITIZER_TOOLS}

        def sanitizer_runs(self):
            return []

    page = tmp_path / "p.md"
    page.write_text('--8<-- "kernels/a.cu"\n--8<-- "kernels/b.cu"\n')
    monkeypatch.setattr(programs, "program_for", lambda p: Prog(p))
    monkeypatch.setattr(items, "embedded_files", lambda text: ["kernels/a.cu", "kernels/b.cu"])
    text = badge.sanitizer_summary(page, {"items": {}, "runs": {}})
    assert text.count("trains whole epochs") == 1
    assert "memcheck, racecheck, initcheck and synccheck not run on a.cu and b.cu (8 runs: trains whole epochs)" in text


def test_the_verification_box_is_one_line_with_its_details_folded():
    prog = programs.program_for(PROGRAM)
    gpu_items = [items.GpuItem(r.id, r.content_hash(), PROGRAM) for r in prog.runs()]
    box = badge.badge_html(gpu_items, _record_with(), 0, {}, "compute-sanitizer found nothing")
    assert box.startswith('<details class="course-badge course-verified"') and "<details open" not in box
    summary = box.split("<summary>")[1].split("</summary>")[0]
    assert "Test GPU" in summary and "CUDA" not in summary and "Memory safety" not in summary
    assert "Memory safety: compute-sanitizer found nothing" in box


def test_a_goal_within_the_rows_measured_spread_reads_parity_not_met():
    # 80% of the copy; the two rows' processes disagree by 0.5% and 0.8%, so a goal of 79.5% (0.6% away) is
    # neither met nor missed, while 75% (6.7% away) is met and 80.6% (0.7% away) is parity again
    rec = _record_with()
    status = {g: claims.goal_outcome(PROGRAM, f'case="copy" impl="copy_kernel*" show=pct goal_min={g}', rec)["status"]
              for g in (75, 79.5, 80.6, 82)}
    assert status == {75: "met", 79.5: "parity", 80.6: "parity", 82: "missed"}
    html = claims.render(PROGRAM, 'case="copy" impl="copy_kernel*" show=pct goal_min=79.5', rec)
    assert "course-goal-parity" in html and "(goal ≥ 79.5%: parity)" in html and ": met)" not in html
    text, _ = headline.headline(_rows(), set(), "Test GPU", {}, "",
                                [claims.goal_outcome(PROGRAM, 'case="copy" impl="copy_kernel*" show=pct goal_min=79.5',
                                                     rec)])
    assert "0 of 1 met, 1 within the measured spread (parity)" in text
