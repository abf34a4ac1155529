"""The memory-model chapter's exercise checker must tell answers apart: the program
kernels/memory-model/exercise_row_max.cu fails as shipped (a stub), fails with a plausible wrong
answer (-DCOURSE_WRONG), and passes with the course's solution (-DCOURSE_SOLUTION)."""

import subprocess

import pytest

from course import programs

pytestmark = pytest.mark.gpu

SOURCE = "kernels/memory-model/exercise_row_max.cu"


def _build_and_run(define: str | None, tmp_path, *args: str) -> subprocess.CompletedProcess:
    prog = programs.program_for(SOURCE)
    exe = tmp_path / "exercise_row_max"
    cmd = ["nvcc", *programs.NVCC_FLAGS, f"-arch={programs.default_arch()}", *([define] if define else []),
           "-o", str(exe), str(prog.path)]
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("define", [None, "-DCOURSE_WRONG"], ids=["stub", "wrong-answer"])
def test_checker_rejects(define, tmp_path):
    proc = _build_and_run(define, tmp_path, "--rows", "1009", "--cols", "997")
    outcome = programs.judge(proc.returncode, proc.stdout, proc.stderr)
    assert not outcome.passed and "CHECK FAIL row_max" in proc.stdout, proc.stdout


def test_checker_accepts_the_solution(tmp_path):
    for rows, cols in (("1", "1"), ("1009", "997"), ("3", "31")):
        proc = _build_and_run("-DCOURSE_SOLUTION", tmp_path, "--rows", rows, "--cols", cols)
        assert programs.judge(proc.returncode, proc.stdout, proc.stderr).passed, proc.stdout + proc.stderr
