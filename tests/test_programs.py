"""Build every program under kernels/ with warnings as errors; on a GPU, run each and check it."""

import py_compile
import time

import pytest

from course import bench, programs

PROGRAMS = programs.all_programs()
BUILDABLE = [p for p in PROGRAMS if p.generic_build]


def builds_for(item):
    """What a test here builds (tests/build_ahead.py builds it ahead, several at a time): the program,
    for this machine's GPU or, in test_builds_for_every_architecture, for every architecture."""
    params = item.callspec.params
    program = params["run"].program if "run" in params else params["program"]
    return [] if program.lang == "python" else [(program, item.originalname == "test_builds_for_every_architecture")]


def _run_params():
    params = []
    for prog in PROGRAMS:
        for run in prog.runs():
            marks = ([pytest.mark.gpu] if prog.gpu else []) + ([pytest.mark.bench] if run.bench else [])
            params.append(pytest.param(run, marks=marks, id=run.id))
    return params


@pytest.mark.parametrize("program", BUILDABLE, ids=lambda p: p.rel)
def test_builds_without_warnings(program):
    if program.lang == "python":
        py_compile.compile(str(program.path), doraise=True, cfile=str(programs.BUILD / "pycache" / (program.rel + "c")))
        return
    proc = programs.build(program)
    assert proc.returncode == 0, f"{' '.join(program.build_command(programs.default_arch()))}\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("program", [p for p in BUILDABLE if p.lang == "cuda"], ids=lambda p: p.rel)
def test_builds_for_every_architecture(program):
    """Compile only, for sm_75, sm_80, sm_90 and sm_100: the course promises Turing and newer."""
    proc = programs.build(program, portable=True)
    assert proc.returncode == 0, f"{' '.join(program.portable_build_command())}\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("run", _run_params())
def test_runs_and_checks(run, request):
    prog = run.program
    began = time.perf_counter()
    if prog.lang != "python":
        proc = programs.build(prog)
        assert proc.returncode == 0, proc.stderr
    build_s = time.perf_counter() - began
    # A benchmark is timed in two processes (a third where they disagree): see course/bench.py.
    outcome = bench.measure(run) if run.bench else programs.execute(run)
    request.node.stash[_outcome_key()] = {
        "checks": outcome.checks,
        "benchmarks": outcome.benchmarks,
        "printed": bool(outcome.stdout.strip()),
        "stdout": outcome.stdout,
        # Where the item's time went, for the GPU run's planning: the build (0 when already built) and
        # each timing process of a benchmark.
        "build_s": round(build_s, 2),
        "process_s": outcome.process_s,
    }
    if outcome.waived:
        pytest.skip(f"waived: {outcome.stdout.strip().splitlines()[-1] if outcome.stdout.strip() else 'no reason printed'}")
    assert outcome.passed, "; ".join(outcome.problems) + f"\n--- stdout\n{outcome.stdout}--- stderr\n{outcome.stderr}"


def _outcome_key():
    from course.pytest_plugin import ITEM_OUTCOME

    return ITEM_OUTCOME
