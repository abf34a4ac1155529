"""The course's exercises (course/exercise.py): every stub, as shipped, fails its checker; every
solution passes it; every plausible mistake listed for an exercise fails it (on the CPU for the
exercises that run there, on a GPU for all). Each check runs through
the one command readers use, `python -m course.exercise NAME`, on fresh random inputs.

Exercises whose kernel runs on the CPU (Numba's CUDA simulator, Triton's interpreter, PyTorch's CPU
operators) are checked here without a GPU, in CI. CUDA C++ exercises, and the Numba and Triton ones
on a real GPU, are `gpu` items, checked in the GPU run; their stubs are compiled everywhere by
tests/test_programs.py. The files these tests exercise (named so that the GPU record's hash of these
tests covers them): kernels/first-kernels/exercises kernels/memory-model/exercises
kernels/libraries/exercises kernels/matmul/exercises kernels/triton/exercises
kernels/pytorch-extensions/exercises kernels/mnist/exercises kernels/common/exercise.cuh
kernels/common/exercise_tools.py course/exercise.py
"""

import pytest

from course import exercise, programs

CPU = [e for e in exercise.EXERCISES if e.simulator or e.lang == "torch"]
ON_GPU = [e for e in exercise.EXERCISES if e.lang != "torch"]  # the real GPU path of every kernel exercise
MISTAKES = [(e, m) for e in exercise.EXERCISES for m in e.mistakes]
CPU_MISTAKES = [(e, m) for e, m in MISTAKES if e in CPU]
CHAPTERS = ["first-kernels", "memory-model", "libraries", "fast-matmul-fft", "triton", "pytorch-extensions", "mnist"]


def _id(e) -> str:
    # A speed bar is only true with the GPU to itself: "--bench" in the id makes the GPU run schedule the
    # item alone (course.pytest_plugin.needs_gpu_alone).
    return f"{e.name} --bench" if e.speed else e.name


def _sim(e) -> bool:
    return e.simulator is not None


@pytest.mark.parametrize("ex", CPU, ids=_id)
def test_stub_fails_on_the_cpu(ex):
    r = exercise.check(ex, sim=_sim(ex), echo=False)
    assert r.returncode == programs.EXIT_FAIL and f"FAIL {ex.name}" in r.output, r.output


@pytest.mark.parametrize("ex", CPU, ids=_id)
def test_solution_passes_on_the_cpu(ex):
    r = exercise.check(ex, solution=True, sim=_sim(ex), echo=False)
    assert r.returncode == 0 and f"PASS {ex.name}" in r.output, r.output


@pytest.mark.gpu
@pytest.mark.parametrize("ex", ON_GPU, ids=_id)
def test_stub_fails_on_the_gpu(ex):
    r = exercise.check(ex, echo=False)
    assert r.returncode == programs.EXIT_FAIL and f"FAIL {ex.name}" in r.output, r.output
    assert "does not compile" not in r.output, r.output  # it must fail the checker, not the compiler


@pytest.mark.gpu
@pytest.mark.parametrize("ex", ON_GPU, ids=_id)
def test_solution_passes_on_the_gpu(ex):
    r = exercise.check(ex, solution=True, echo=False)
    assert r.returncode == 0 and f"PASS {ex.name}" in r.output, r.output


@pytest.mark.parametrize("ex,mistake", CPU_MISTAKES, ids=[f"{e.name}-{m}" for e, m in CPU_MISTAKES])
def test_plausible_mistake_fails_on_the_cpu(ex, mistake):
    r = exercise.check(ex, file=f"{ex.folder}/mistakes/{mistake}", sim=_sim(ex), echo=False)
    assert r.returncode == programs.EXIT_FAIL and "CHECK FAIL" in r.output, r.output


@pytest.mark.gpu
@pytest.mark.parametrize("ex,mistake", MISTAKES, ids=[f"{e.name}-{m}" for e, m in MISTAKES])
def test_plausible_mistake_fails(ex, mistake):
    r = exercise.check(ex, file=f"{ex.folder}/mistakes/{mistake}", echo=False)
    assert r.returncode == programs.EXIT_FAIL and "CHECK FAIL" in r.output, r.output


@pytest.mark.parametrize("ex", exercise.EXERCISES, ids=_id)
def test_exercise_files_exist_and_its_page_shows_them(ex):
    for rel in (ex.stub, ex.solution, ex.checker, *(f"{ex.folder}/mistakes/{m}" for m in ex.mistakes)):
        assert (programs.ROOT / rel).is_file(), f"{ex.name}: {rel} is missing"
    page = (programs.ROOT / "docs" / ex.chapter / "exercises.md").read_text()
    for rel in (ex.stub, ex.solution):
        assert f'--8<-- "{rel}' in page, f"docs/{ex.chapter}/exercises.md does not embed {rel}"
    assert f"python -m course.exercise {ex.name}" in page, f"docs/{ex.chapter}/exercises.md lacks the command"


def test_every_kernel_chapter_has_exercises():
    have = {e.chapter for e in exercise.EXERCISES}
    assert set(CHAPTERS) <= have, f"chapters without an exercise: {sorted(set(CHAPTERS) - have)}"
    assert len(exercise.EXERCISES) >= 15


def test_runner_rejects_what_it_does_not_know(capsys):
    for argv in (["no_such_exercise"], ["clamp", "--no-such-option"], ["clamp", "--seed", "x"]):
        with pytest.raises(SystemExit) as e:
            exercise.main(argv)
        assert e.value.code not in (0, None, programs.EXIT_WAIVED), argv
    assert exercise.main(["list"]) == 0
    assert "clamp" in capsys.readouterr().out


def test_cuda_exercise_refuses_the_simulator():
    r = exercise.check(exercise.BY_NAME["clamp"], sim=True, echo=False)
    assert r.returncode == programs.EXIT_FAIL and "needs a GPU" in r.output


def test_memcheck_report_becomes_a_failing_check(tmp_path, monkeypatch):
    # The runner's memcheck step, with a stand-in for compute-sanitizer: a report fails, a clean run passes.
    fake = tmp_path / "compute-sanitizer"
    fake.write_text("#!/bin/sh\necho '========= Invalid __global__ write of size 4 bytes'\n"
                    "echo '========= ERROR SUMMARY: 1 error'\nexit 99\n")
    fake.chmod(0o755)
    monkeypatch.setattr(exercise, "_sanitizer", lambda: str(fake))
    lines: list[str] = []
    assert exercise._memcheck(tmp_path / "program", 1, lines, echo=False) == "CHECK FAIL memcheck n=1 errors=1"
    assert any("Invalid __global__ write" in ln for ln in lines)
    fake.write_text("#!/bin/sh\necho '========= ERROR SUMMARY: 0 errors'\nexit 1\n")  # a failing check, no error
    assert exercise._memcheck(tmp_path / "program", 1, [], echo=False) == "CHECK PASS memcheck n=1 errors=0"
    monkeypatch.setattr(exercise, "_sanitizer", lambda: None)
    assert exercise._memcheck(tmp_path / "program", 1, [], echo=False) == ""
