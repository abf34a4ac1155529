"""The course's exercises (course/exercise.py): every stub, as shipped, fails its checker; every
solution passes it; every plausible mistake listed for an exercise fails it (on the CPU for the
exercises that run there, on a GPU for all). Each check runs through
the one command readers use, `python -m course.exercise NAME`, on fresh random inputs.

Exercises whose kernel runs on the CPU (Numba's CUDA simulator, Triton's interpreter, PyTorch's CPU
operators) are checked here without a GPU, in CI. CUDA C++ exercises, and the Numba and Triton ones
on a real GPU, are `gpu` items, checked in the GPU run; their stubs are compiled everywhere by
tests/test_programs.py. A GPU item's content hash covers this file and its own exercise's files
(gpu_item_hash_inputs), so that a fix to one checker re-stales only that exercise's items.
"""

from dataclasses import replace

import pytest

from course import exercise, mistakes, programs

CPU = [e for e in exercise.EXERCISES if e.simulator or e.lang == "torch"]
ON_GPU = [e for e in exercise.EXERCISES if e.lang != "torch"]  # the real GPU path of every kernel exercise
MISTAKES = [(e, m) for e in exercise.EXERCISES for m in e.mistakes]
CPU_MISTAKES = [(e, m) for e, m in MISTAKES if e in CPU]
DIFF_MISTAKES = [(e, m) for e, m in MISTAKES if e.mistake_source(m).endswith(".diff")]
CHAPTERS = ["first-kernels", "memory-model", "libraries", "fast-matmul-fft", "triton", "pytorch-extensions", "mnist",
            "attention"]


def gpu_item_hash_inputs(item) -> list[tuple[str, bytes]]:
    """What a GPU item of this file reads besides this file (course/pytest_plugin.py hashes it): its
    exercise's stub, checker, solution, mistakes, the shared headers and tools they use, and the runner."""
    return item.callspec.params["ex"].hash_inputs()


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
def test_solution_passes_on_the_gpu(ex, request):
    r = exercise.check(ex, solution=True, echo=False)
    # The record keeps a speed check's rows: a reader's pass prints the solution's share of the GPU's
    # limit beside their own (course/exercise_limits.py).
    from course.pytest_plugin import ITEM_OUTCOME

    request.node.stash[ITEM_OUTCOME] = {"benchmarks": r.benchmarks, "printed": bool(r.output), "stdout": r.output}
    assert r.returncode == 0 and f"PASS {ex.name}" in r.output, r.output


@pytest.mark.parametrize("ex,mistake", CPU_MISTAKES, ids=[f"{e.name}-{m}" for e, m in CPU_MISTAKES])
def test_plausible_mistake_fails_on_the_cpu(ex, mistake):
    r = exercise.check(ex, mistake=mistake, sim=_sim(ex), echo=False)
    assert r.returncode == programs.EXIT_FAIL and "CHECK FAIL" in r.log, r.log


@pytest.mark.gpu
@pytest.mark.parametrize("ex,mistake", MISTAKES, ids=[f"{e.name}-{m}" for e, m in MISTAKES])
def test_plausible_mistake_fails(ex, mistake):
    r = exercise.check(ex, mistake=mistake, echo=False)
    assert r.returncode == programs.EXIT_FAIL and "CHECK FAIL" in r.log, r.log


@pytest.mark.parametrize("ex,mistake", DIFF_MISTAKES, ids=[f"{e.name}-{m}" for e, m in DIFF_MISTAKES])
def test_mistake_diff_applies_to_its_solution(ex, mistake):
    # On the CPU, for every exercise (CUDA C++ too): a solution edit that the diff no longer fits fails
    # here, naming the diff and the hunk, rather than in the GPU run.
    diff = programs.ROOT / ex.mistake_source(mistake)
    assert mistakes.solution_of(diff) == programs.ROOT / ex.solution, f"{diff.name} is not made against {ex.solution}"
    written = programs.ROOT / ex.mistake_file(mistake)
    assert written.name == mistake and written.read_text() != (programs.ROOT / ex.solution).read_text()


@pytest.mark.parametrize("ex,mistake", [(e, m) for e, m in DIFF_MISTAKES if e.lang == "cuda"],
                         ids=[f"{e.name}-{m}" for e, m in DIFF_MISTAKES if e.lang == "cuda"])
def test_cuda_mistake_compiles(ex, mistake):
    # A mistake must fail the checker, not the compiler: built with warnings as errors, and for every
    # architecture the course promises (as tests/test_programs.py builds a stored mistakes/*.cu).
    prog = replace(programs.parse(programs.ROOT / ex.mistake_file(mistake)), compile_only=True)
    for portable in (False, True):
        proc = programs.build(prog, portable=portable)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_diff_that_no_longer_fits_fails_loudly():
    solution = "a\nb\nc\nd\n"
    diff = "what it is\n--- solutions/x.py\n+++ mistakes/y.py\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n"
    assert mistakes.apply(diff, solution) == "a\nb\nC\nd\n"
    with pytest.raises(mistakes.DiffError, match=r"y.diff: hunk 1 does not apply: line 3 of the solution is 'k'"):
        mistakes.apply(diff, "a\nb\nk\nd\n", "y.diff")
    with pytest.raises(mistakes.DiffError, match="ends early"):
        mistakes.apply(diff.replace("+C\n", ""), solution)
    with pytest.raises(mistakes.DiffError, match="not a unified diff"):
        mistakes.apply("-c\n+C\n", solution)


@pytest.mark.parametrize("ex", exercise.EXERCISES, ids=_id)
def test_exercise_files_exist_and_its_page_shows_them(ex):
    for rel in (ex.stub, ex.solution, ex.checker, *(ex.mistake_source(m) for m in ex.mistakes)):
        assert (programs.ROOT / rel).is_file(), f"{ex.name}: {rel} is missing"
    page = (programs.ROOT / "docs" / ex.chapter / "exercises.md").read_text()
    for rel in (ex.stub, ex.solution):
        assert f'--8<-- "{rel}' in page, f"docs/{ex.chapter}/exercises.md does not embed {rel}"
    assert f"python -m course.exercise {ex.name}" in page, f"docs/{ex.chapter}/exercises.md lacks the command"


def test_a_new_registry_entry_leaves_other_exercises_hashes_alone():
    # Adding or editing one exercise's entry must not re-stale every other exercise's GPU items.
    runner = (programs.ROOT / "course" / "exercise.py").read_text()
    first = exercise.EXERCISES[0]
    marker = "\n# --8<-- [end:registry]"
    grown = runner.replace(marker, '\n    Exercise("another", "serving", "Another", "cuda", "kernels/serving/exercises"),' + marker, 1)
    assert grown != runner
    assert exercise.registry_reduced_to(grown, first) == exercise.registry_reduced_to(runner, first)
    assert repr(first) in exercise.registry_reduced_to(runner, first)
    assert "Exercise(\"another\"" not in exercise.registry_reduced_to(grown, first)


@pytest.mark.parametrize("ex", exercise.EXERCISES, ids=_id)
def test_gpu_items_hash_their_own_exercise_only(ex):
    # Of the exercise folders, an item's hash reads only its own exercise's files: a fix to another
    # exercise's checker leaves its record entry valid.
    own = {ex.stub, ex.checker, ex.solution, *(ex.mistake_source(m) for m in ex.mistakes)}
    names = [name for name, _ in ex.hash_inputs()]
    assert own <= set(names), f"{ex.name}: the hash misses {sorted(own - set(names))}"
    others = [n for n in names if "/exercises/" in n and n not in own]
    assert not others, f"{ex.name}: the hash reads other exercises' files {others}"
    assert "course/exercise.py" in names and "kernels/common/course.cuh" in names


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
    out = exercise._Report(echo=False, verbose=False)
    said = exercise._memcheck(tmp_path / "program", 1, out)
    assert said.splitlines()[-1] == "CHECK FAIL memcheck n=1 errors=1"
    assert "Invalid __global__ write" in said
    fake.write_text("#!/bin/sh\necho '========= ERROR SUMMARY: 0 errors'\nexit 1\n")  # a failing check, no error
    assert exercise._memcheck(tmp_path / "program", 1, out) == "CHECK PASS memcheck n=1 errors=0"
    monkeypatch.setattr(exercise, "_sanitizer", lambda: None)
    assert exercise._memcheck(tmp_path / "program", 1, out) == ""
