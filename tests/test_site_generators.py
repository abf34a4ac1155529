"""The site's generated parts: badges, results tables, plots and recorded output, from a record."""

import pytest

from course import mkdocs_hooks as hooks
from course import programs, record

PROGRAM = "kernels/setup/bandwidth.cu"


def _record_with(outcome="passed"):
    prog = programs.program_for(PROGRAM)
    run_info = {"gpu": "Test GPU", "cuda_runtime": "13.0", "driver": "1.0", "date": "2026-01-01"}
    rec = {"schema": record.SCHEMA, "runs": {"r1": run_info}, "items": {}}
    for i, run in enumerate(prog.runs()):
        rows = [
            {"case": "copy", "impl": "cudaMemcpy", "time_ms": 2.0, "bytes": 4e9, "flops": 0, "peer": True, "size": 1 << 20},
            {"case": "copy", "impl": "copy_kernel", "time_ms": 2.5, "bytes": 4e9, "flops": 0, "peer": False, "size": 1 << 20},
            {"case": "copy", "impl": "copy_kernel", "time_ms": 5.0, "bytes": 8e9, "flops": 0, "peer": False, "size": 1 << 21},
        ] if run.bench else []
        rec["items"][run.content_hash()] = {"id": run.id, "outcome": outcome, "run": "r1", "benchmarks": rows,
                                            "checks": [], "stdout": f"CHECK PASS run{i} n=1\n"}
    return rec


def test_results_table_computes_bandwidth_and_percent_of_peer():
    table = hooks.results_table(PROGRAM, _record_with())
    assert "| copy | copy_kernel | 2.5 | 4,000 | 1,600 | 80% |" in table
    assert "| copy | cudaMemcpy | 2 | 4,000 | 2,000 | peer |" in table
    assert "Test GPU · CUDA 13.0 · driver 1.0 · 2026-01-01" in table


def test_missing_or_failed_figures_say_so_instead_of_a_table():
    assert "No GPU figures" in hooks.results_table(PROGRAM, _record_with("failed"))
    assert "No GPU figures" in hooks.results_table(PROGRAM, {"schema": 1, "runs": {}, "items": {}})


def test_plot_draws_one_line_per_series_with_a_title():
    svg = hooks.plot_svg(PROGRAM, " x=size y=gbps logx", _record_with())
    assert svg.count("<polyline") == 2 and "<title" in svg and 'role="img"' in svg
    with pytest.raises(ValueError):
        hooks.plot_svg(PROGRAM, " y=gbps", _record_with())


def test_recorded_output_shows_the_checked_run():
    text = hooks.recorded_output(PROGRAM, None, _record_with())
    assert text.startswith("```text\nCHECK PASS run0") and "Test GPU" in text


def test_badge_names_the_run_or_warns():
    prog = programs.program_for(PROGRAM)
    items = [record.GpuItem(r.id, r.content_hash(), PROGRAM) for r in prog.runs()]
    assert "course-verified" in hooks.badge_html(items, _record_with())
    assert "course-unverified" in hooks.badge_html(items, _record_with("flagged"))
