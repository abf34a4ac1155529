"""Comparisons read rows of one sitting on one GPU, and no figure rests on a row whose timing did not
reproduce: claims (course/claims.py) and results headlines (course/headline.py) refuse both, and the
strict build of the real site fails on a record doctored either way."""

import copy
import os
import subprocess
import sys

import pytest

from course import claims, headline, programs, record

OURS, PEER = "kernels/matmul/sgemm.cu", "kernels/libraries/cublas_gemm.cu"
RUNS = {"gpu0": {"gpu": "Test GPU", "sitting": "s1", "gpu_uuid": "GPU-0", "gpu_index": "0", "date": "2026-11-26"},
        "gpu1": {"gpu": "Test GPU", "sitting": "s1", "gpu_uuid": "GPU-1", "gpu_index": "1", "date": "2026-11-26"},
        "later": {"gpu": "Test GPU", "sitting": "s2", "gpu_uuid": "GPU-0", "gpu_index": "0", "date": "2026-11-27"}}


def _record(ours_run="gpu0", peer_run="gpu0", unstable=False):
    rec = {"schema": record.SCHEMA, "runs": copy.deepcopy(RUNS), "items": {}}
    mine = {"case": "4096^3", "impl": "v10", "time_ms": 2.2, "medians": [2.2, 2.21]}
    if unstable:
        mine["unstable"] = "no two of its medians agree within 5% (2.2, 2.9 ms)"
    for path, run, rows in ((OURS, ours_run, [mine]),
                            (PEER, peer_run, [{"case": "4096^3", "impl": "cuBLAS", "time_ms": 2.0, "peer": True}])):
        for r in programs.program_for(path).runs():
            if r.bench:
                rec["items"][r.content_hash()] = {"id": r.id, "outcome": "passed", "run": run, "benchmarks": rows}
    return rec


CLAIM = 'case="4096^3" impl="v10" show=pct vs="cuBLAS" vs_program="kernels/libraries/cublas_gemm.cu"'


def test_a_comparison_within_one_sitting_and_gpu_renders():
    assert ">90.9%<" in claims.render(OURS, CLAIM, _record()) or ">91%<" in claims.render(OURS, CLAIM, _record())


@pytest.mark.parametrize("peer_run", ["gpu1", "later"])
def test_a_comparison_across_gpus_or_sittings_fails(peer_run):
    with pytest.raises(claims.ClaimError, match="compares rows of two runs"):
        claims.render(OURS, CLAIM, _record(peer_run=peer_run))


def test_no_figure_rests_on_an_unstable_row():
    with pytest.raises(claims.ClaimError, match="unstable"):
        claims.render(OURS, 'case="4096^3" impl="v10" show=time', _record(unstable=True))
    with pytest.raises(claims.ClaimError, match="unstable"):
        claims.render(OURS, CLAIM, _record(unstable=True))


def test_a_headline_across_runs_or_on_an_unstable_row_is_a_problem():
    def rows(rec):
        mine, _ = claims.program_rows(OURS, rec)
        theirs, _ = claims.program_rows(PEER, rec)
        return mine + theirs, {id(b) for b in mine}
    assert headline.comparison_problems(*rows(_record()), {}) == []
    assert "2 runs" in headline.comparison_problems(*rows(_record(peer_run="later")), {})[0]
    # an unstable row is never the best: the headline states no ratio that could rest on it
    table, _ = headline.headline(*rows(_record(unstable=True)), "Test GPU", {})
    assert "v10 was faster but unstable" in table and "**" not in table


def _first_compared_claim():
    """A claim on a real page comparing two programs, whose rows are in the committed record."""
    rec = record.load()
    for path in sorted((programs.ROOT / "docs").rglob("*.md")):
        for m in claims.find(path.read_text()):
            opts = claims.parse_options(m.args["opts"])
            if "vs_program" in opts and opts["show"] in ("pct", "speedup"):
                try:
                    claims.render(m.args["path"], m.args["opts"], rec)
                except (claims.ClaimError, claims.AwaitingGpuRun):
                    continue
                return m.args["path"], opts
    return None


def test_strict_build_fails_on_a_cross_run_comparison_and_on_an_unstable_row(tmp_path):
    """The real site, built strictly against a copy of the record in which one compared program's
    runs are moved to another sitting, and one claimed row is marked unstable."""
    found = _first_compared_claim()
    if found is None:
        pytest.skip("no page compares two programs' recorded rows yet")
    path, opts = found
    rec = record.load()
    peer = programs.program_for(opts["vs_program"])
    for r in peer.runs():
        e = record.entry(rec, r.content_hash())
        if r.bench and e:
            moved = dict(record.run_info(rec, e), sitting="another sitting", gpu_uuid="GPU-elsewhere")
            rec["runs"]["moved"] = moved
            e["run"] = "moved"
    # and one row of another program, claimed with a plain time, made unstable
    unstable = None
    for page in sorted((programs.ROOT / "docs").rglob("*.md")):
        for m in claims.find(page.read_text()):
            o = claims.parse_options(m.args["opts"])
            if o["show"] == "time" and "*" not in o["impl"] + o["case"] and m.args["path"] not in (path, opts["vs_program"]):
                for r in programs.program_for(m.args["path"]).runs():
                    e = record.entry(rec, r.content_hash())
                    for b in (e or {}).get("benchmarks", []) if r.bench else []:
                        if b["case"] == o["case"] and b["impl"] == o["impl"]:
                            b["unstable"] = "doctored for the test"
                            unstable = m.args["path"]
            if unstable:
                break
        if unstable:
            break
    bad = tmp_path / "record.json"
    record.save(rec, bad)
    env = dict(os.environ, COURSE_GPU_RECORD=str(bad))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=programs.ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, "the strict build passed on a record with a comparison across runs"
    assert "compares rows of two runs" in out
    if unstable:
        assert "unstable" in out
