"""Claims (course/claims.py): a figure in prose is read from the record, and a record that no longer
supports the sentence's bound fails the strict build."""

import copy
import os
import subprocess
import sys

import pytest

from course import claims, programs, record

PROGRAM = "kernels/matmul/sgemm.cu"


def _record_with(rows):
    """A record in which every bench run of PROGRAM passed, printing `rows`."""
    prog = programs.program_for(PROGRAM)
    rec = {"schema": record.SCHEMA, "runs": {"r": {"gpu": "Test GPU", "cuda_runtime": "13.0", "date": "2026-11-24"}},
           "items": {}}
    for run in prog.runs():
        if run.bench:
            rec["items"][run.content_hash()] = {"id": run.id, "outcome": "passed", "run": "r", "benchmarks": rows}
    return rec


ROWS = [
    {"case": "4096^3", "impl": "cuBLAS", "time_ms": 2.0, "bytes": 2e8, "flops": 1.4e11, "peer": True},
    {"case": "4096^3", "impl": "v9", "time_ms": 2.5, "bytes": 2e8, "flops": 1.4e11, "peer": False, "registers": 128},
    {"case": "4096^3", "impl": "v10", "time_ms": 2.2, "bytes": 2e8, "flops": 1.4e11, "peer": False},
]


def claim(opts, rows=ROWS):
    return claims.render(PROGRAM, opts, _record_with(rows))


def test_renders_each_kind():
    assert ">2.2 ms<" in claim('case="4096^3" impl="v10" show=time')
    assert ">91%<" in claim('case="4096^3" impl="v10" show=pct min=90')          # cuBLAS is the peer
    assert ">1.14×<" in claim('case="4096^3" impl="v10" show=speedup vs="v9" min=1')
    assert ">63.6 TFLOP/s<" in claim('case="4096^3" impl="v10" show=tflops')
    assert ">128<" in claim('case="4096^3" impl="v9" show=field:registers')
    assert ">2.2 ms<" in claim('case="4096^3" impl="v*" show=time')              # a glob takes the fastest
    assert "Test GPU" in claim('case="4096^3" impl="v10" show=time')             # the tooltip names the run


def test_a_record_that_breaks_the_bound_fails():
    doctored = copy.deepcopy(ROWS)
    doctored[2]["time_ms"] = 2.5  # v10 now at 80% of cuBLAS
    with pytest.raises(claims.ClaimError, match="below the stated minimum"):
        claim('case="4096^3" impl="v10" show=pct min=90', doctored)
    with pytest.raises(claims.ClaimError, match="above the stated maximum"):
        claim('case="4096^3" impl="v10" show=time max=2.4', doctored)


def test_missing_rows_and_stale_records_fail():
    with pytest.raises(claims.ClaimError, match="no BENCH row"):
        claim('case="8192^3" impl="v10" show=time')
    with pytest.raises(claims.ClaimError, match="no passing run"):
        claims.render(PROGRAM, 'case="4096^3" impl="v10" show=time', {"schema": 1, "runs": {}, "items": {}})
    with pytest.raises(claims.ClaimError, match="unknown option"):
        claim('case="4096^3" impl="v10" show=time minimum=3')


def test_vs_another_program():
    rec = _record_with(ROWS)
    other = programs.program_for("kernels/libraries/cublas_gemm.cu")
    for run in other.runs():
        if run.bench:
            rec["items"][run.content_hash()] = {"id": run.id, "outcome": "passed", "run": "r",
                                                "benchmarks": [{"case": "4096^3", "impl": "torch", "time_ms": 4.4}]}
    html = claims.render(PROGRAM, 'case="4096^3" impl="v10" show=speedup vs="torch*" '
                                  'vs_program="kernels/libraries/cublas_gemm.cu" min=1.5', rec)
    assert ">2.00×<" in html


def test_a_program_awaiting_a_gpu_run_is_said_not_failed():
    prog = programs.program_for(PROGRAM)
    awaiting = {r.content_hash(): {"id": r.id, "reason": "no device time left"} for r in prog.runs() if r.bench}
    warnings = []
    page = 'v10 at <!-- claim: kernels/matmul/sgemm.cu case="4096^3" impl="v10" show=pct min=95 -->.\n'
    out = claims.render_all(page, {"schema": 1, "runs": {}, "items": {}}, "x.md", warnings.append, awaiting)
    assert "awaiting a GPU run" in out and not warnings


def test_one_awaiting_run_hides_only_the_claims_it_may_hold():
    """MNIST's time-to-99 run awaits a GPU; the step rows of the grid's other runs are recorded. A claim on
    a step row shows its figure; a claim on the awaiting run's case, which it gave when it last passed,
    says it awaits; and a run that never passed may hold any row, so it hides every claim."""
    prog = programs.program_for("kernels/mnist/mnist_torch.py")
    benches = [r for r in prog.runs() if r.bench]
    waiting = next(r for r in benches if "--time-to-99" in r.id)
    rec = {"schema": record.SCHEMA, "runs": {"r": {"gpu": "Test GPU", "date": "2026-11-26", "started": "2"},
                                             "old": {"gpu": "Test GPU", "date": "2026-11-25", "started": "1"}},
           "items": {}}
    for run in benches:
        if run is not waiting:
            rec["items"][run.content_hash()] = {"id": run.id, "outcome": "passed", "run": "r", "benchmarks": [
                {"case": "step, batch 64", "impl": "PyTorch eager", "time_ms": 0.3}]}
    awaiting = {waiting.content_hash(): {"id": waiting.id, "reason": "no device time left"}}
    step = 'case="step, batch 64" impl="PyTorch*" show=time'
    ttt = 'case="time to 99%" impl="PyTorch*" show=time'
    with pytest.raises(claims.AwaitingGpuRun):  # never passed: it may hold any row
        claims.render("kernels/mnist/mnist_torch.py", step, rec, awaiting)
    declared = {waiting.content_hash(): {"id": waiting.id, "reason": "no device time left", "cases": ["time to 99%*"]}}
    assert ">0.3 ms<" in claims.render("kernels/mnist/mnist_torch.py", step, rec, declared)  # it declares its cases
    with pytest.raises(claims.AwaitingGpuRun):
        claims.render("kernels/mnist/mnist_torch.py", ttt, rec, declared)
    rec["items"]["earlier"] = {"id": waiting.id, "outcome": "passed", "run": "old", "benchmarks": [
        {"case": "time to 99%", "impl": "PyTorch eager", "time_ms": 9000.0}]}
    assert ">0.3 ms<" in claims.render("kernels/mnist/mnist_torch.py", step, rec, awaiting)
    with pytest.raises(claims.AwaitingGpuRun):
        claims.render("kernels/mnist/mnist_torch.py", ttt, rec, awaiting)
    with pytest.raises(claims.ClaimError, match="no passing run"):  # not declared: still a failure
        claims.render("kernels/mnist/mnist_torch.py", step, rec, {})


def test_a_claim_in_a_code_fence_is_an_example():
    page = 'Write:\n\n```text\nv10 <!-- claim: kernels/matmul/sgemm.cu case="x" impl="y" show=time -->\n```\n'
    warnings = []
    assert claims.render_all(page, _record_with(ROWS), "x.md", warnings.append) == page and not warnings


def test_a_missed_goal_is_shown_not_hidden():
    html = claim('case="4096^3" impl="v9" show=pct goal_min=90')
    assert ">80%<" in html and "missed" in html
    assert "met" in claim('case="4096^3" impl="v10" show=pct goal_min=90')


def test_render_all_warns_with_page_and_line():
    warnings = []
    page = 'Intro.\n\nv10 at <!-- claim: kernels/matmul/sgemm.cu case="4096^3" impl="v10" show=pct min=95 -->.\n'
    out = claims.render_all(page, _record_with(ROWS), "x.md", warnings.append)
    assert "claim not supported" in out and warnings and warnings[0].startswith("x.md:3:")


def test_strict_build_fails_on_a_doctored_record(tmp_path):
    """The real site, built strictly against a copy of the record in which one claimed figure got worse."""
    rec = record.load()
    doctored = None
    for path in (programs.ROOT / "docs").rglob("*.md"):
        for m in claims.find(path.read_text()):
            opts = claims.parse_options(m.args["opts"])
            if "min" not in opts or opts["show"] not in ("pct", "speedup"):
                continue
            prog = programs.program_for(m.args["path"])
            for run in prog.runs():
                e = record.entry(rec, run.content_hash())
                if run.bench and e:
                    for b in e["benchmarks"]:
                        if b["case"] == opts["case"] and b["impl"] == opts["impl"]:
                            b["time_ms"] *= 1000  # a thousand times slower: below any stated minimum
                            doctored = (path, m.args["path"], opts)
            if doctored:
                break
        if doctored:
            break
    if doctored is None:
        pytest.skip("no page states a pct or speedup claim with a minimum yet")
    bad = tmp_path / "record.json"
    record.save(rec, bad)
    env = dict(os.environ, COURSE_GPU_RECORD=str(bad))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=programs.ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode != 0, "the strict build passed on a record that contradicts a claim"
    assert "claim not supported" in proc.stdout + proc.stderr


def test_a_field_keeps_the_digits_that_matter():
    # an accuracy of 98.97% must not render as 99%, the goal it missed
    assert claims.fmt(98.97, "field:test_accuracy") == "98.97"
    assert claims.fmt(64.0, "field:registers") == "64"
    assert claims.fmt(0.1234, "time") == "0.123"


def test_a_share_near_100_percent_keeps_one_decimal():
    # 99.6% must not render as 100% (nor 100.4% as 100%), nor a speed of 0.996× as parity
    assert claims.fmt(99.6, "pct") == "99.6"
    assert claims.fmt(100.4, "pct") == "100.4"
    assert claims.fmt(95.0, "pct") == "95.0" and claims.fmt(105.0, "pct") == "105.0"
    assert claims.fmt(94.6, "pct") == "95" and claims.fmt(105.6, "pct") == "106" and claims.fmt(91.2, "pct") == "91"
    assert claims.fmt(7.3, "pct") == "7.3"
    assert claims.fmt(0.996, "speedup") == "0.996" and claims.fmt(1.004, "speedup") == "1.004"
    assert claims.fmt(1.14, "speedup") == "1.14" and claims.fmt(0.9, "speedup") == "0.90"


def test_a_field_takes_its_unit_and_the_goal_shows_it():
    rows = [{"case": "c", "impl": "a", "time_ms": 1.0, "hidden_pct": 70.1}]
    text = claim('case="c" impl="a" show=field:hidden_pct unit=% goal_min=80', rows)
    assert ">70.1%</span>" in text and "(goal ≥ 80%: missed)" in text


def test_unit_is_only_for_fields():
    with pytest.raises(claims.ClaimError, match="unit= is for show=field"):
        claims.parse_options('case="c" impl="a" show=pct unit=%')
