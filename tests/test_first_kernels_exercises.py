"""The exercises of docs/first-kernels/exercises.md: the course's solutions pass their checkers, and
the unsolved stubs, as shipped, fail them (so the checker really checks something).

Readers check their own answer by building and running the stub file they edited, as the page says.
"""

import subprocess

import pytest

from course import programs

EXERCISES = ["clamp", "count_above"]
STUB = "kernels/first-kernels/exercises/{}.cu"
SOLUTION = "kernels/first-kernels/exercises/solutions/{}.cu"


def _build_and_run(rel: str, tag: str) -> subprocess.CompletedProcess:
    exe = programs.BUILD / "first-kernels" / "exercise_test" / tag
    exe.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nvcc", *programs.NVCC_FLAGS, f"-arch={programs.default_arch()}", "-o", str(exe), str(programs.ROOT / rel)]
    build = subprocess.run(cmd, capture_output=True, text=True, cwd=programs.ROOT, timeout=600)
    assert build.returncode == 0, f"{rel} does not build:\n{build.stderr}"
    return subprocess.run([str(exe), "--n", "1000003"], capture_output=True, text=True, cwd=programs.ROOT, timeout=600)


@pytest.mark.parametrize("name", EXERCISES)
def test_stub_compiles_with_warnings_as_errors(name):
    """The stub a reader starts from builds cleanly (as an object file: no GPU needed)."""
    out = programs.BUILD / "first-kernels" / "exercise_test" / f"{name}_stub.o"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nvcc", *programs.NVCC_FLAGS, f"-arch={programs.default_arch()}", "-c", "-o", str(out),
           str(programs.ROOT / STUB.format(name))]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=programs.ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXERCISES)
def test_solution_passes_the_checker(name):
    proc = _build_and_run(SOLUTION.format(name), f"{name}_solution")
    verdict = programs.judge(proc.returncode, proc.stdout, proc.stderr)
    assert verdict.passed, "; ".join(verdict.problems) + "\n" + proc.stdout + proc.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXERCISES)
def test_unsolved_stub_fails_the_checker(name):
    """The expected failure: the stub as shipped must be caught by its checker."""
    proc = _build_and_run(STUB.format(name), f"{name}_stub")
    assert proc.returncode == 1, f"the stub should fail with exit code 1:\n{proc.stdout}{proc.stderr}"
    assert "CHECK FAIL exercise_" in proc.stdout, proc.stdout
