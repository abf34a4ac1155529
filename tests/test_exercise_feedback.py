"""What `python -m course.exercise NAME` shows a reader (course/exercise_report.py): a one-token mistake
reads in a dozen lines, each failed check once, NaN named only when a wrong value is NaN; a CUDA C++
exercise without a GPU is "cannot check here" with its own exit code, not a failure; `list` is aligned.
tests/test_exercises.py proves the verdicts themselves (stubs fail, solutions pass, mistakes fail)."""

import re
from pathlib import Path

import pytest

from course import exercise, exercise_report, programs

CLAMP = exercise.BY_NAME["clamp_numba"]  # a Numba exercise: its checker runs on the CPU, in the simulator
SOLUTION_LINE = "        y[j] = min(max(x[j], lo), hi)\n"
LOOP_LINE = "    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):"


def _one_token_mistake(tmp_path: Path, old: str, new: str) -> Path:
    text = (programs.ROOT / CLAMP.solution).read_text()
    assert old in text, f"{CLAMP.solution} no longer has {old!r}: pick another token to change"
    copy = tmp_path / "clamp_numba.py"
    copy.write_text(text.replace(old, new, 1))
    return copy


def _failed_checks(log: str) -> list[str]:
    return re.findall(r"^CHECK FAIL (\S+)", log, re.MULTILINE)


@pytest.mark.parametrize("old,new,has_nan", [
    (SOLUTION_LINE, SOLUTION_LINE.replace("), hi)", "), lo)"), False),   # clamps to lo twice: wrong values
    (LOOP_LINE, LOOP_LINE.replace("x.size", "x.ndim"), True),            # loops to 1: the rest stays NaN
], ids=["hi-as-lo", "size-as-ndim"])
def test_one_token_mistake_reads_in_twelve_lines(tmp_path, monkeypatch, old, new, has_nan):
    monkeypatch.setenv("COURSE_EXERCISE_PROGRESS", str(tmp_path / "progress.json"))
    r = exercise.check(CLAMP, file=str(_one_token_mistake(tmp_path, old, new)), sim=True, seed=11, echo=False)
    shown = r.output.splitlines()
    assert r.returncode == programs.EXIT_FAIL, r.output
    assert len(shown) <= 12, f"{len(shown)} lines:\n{r.output}"
    failed = _failed_checks(r.log)
    assert failed, r.log
    for name in failed:  # each failure once: its name on one line of what the reader sees
        assert sum(bool(re.search(rf"\b{name}\b", ln)) for ln in shown) == 1, f"{name}:\n{r.output}"
    assert ("NaN" in r.output) == has_nan == ("got nan" in r.output), r.output  # named only when shown
    assert "CHECK " not in r.output and "FakeCUDAKernel" not in r.output, r.output
    assert "--verbose" in r.output and f"--seed 11" in r.output


def test_verbose_shows_the_checkers_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_EXERCISE_PROGRESS", str(tmp_path / "progress.json"))
    r = exercise.check(CLAMP, solution=True, sim=True, seed=11, echo=False, verbose=True)
    assert r.returncode == 0 and "PASS clamp_numba: all" in r.output, r.output
    # A pass names what it checked truly: the kernel's kind, and the guard elements of an empty case.
    assert "CHECK PASS is_a_kernel n=1 a @cuda.jit kernel" in r.output, r.output
    assert re.search(r"CHECK PASS clamp_n0_past_the_end n=\d+ guard elements past the end of 0: 0 written",
                     r.output), r.output


def test_report_groups_alike_failures_and_caps_the_rest():
    stdout = "\n".join(["CHECK PASS is_a_kernel n=1 a @cuda.jit kernel",
                        "  k_n9: your kernel raised IndexError: index 9 is out of bounds",
                        "CHECK FAIL k_n9 n=9 raised IndexError"] +
                       [f"  k_n{i}: your kernel raised the same IndexError as above\nCHECK FAIL k_n{i} n={i} raised "
                        f"IndexError" for i in range(1, 8)])
    checks, _ = exercise_report.parse(stdout)
    lines = exercise_report.failure_lines(checks)
    assert lines[0] == "  k_n9: your kernel raised IndexError: index 9 is out of bounds"
    assert lines[1].startswith("  k_n1, k_n2, k_n3") and len(lines) == 2, lines
    distinct = "\n".join(f"  k{i}: {i} of 9 elements wrong\nCHECK FAIL k{i} n=9" for i in range(9))
    lines = exercise_report.failure_lines(exercise_report.parse(distinct)[0])
    assert len(lines) == exercise_report.FAILED_CHECKS_SHOWN + 1 and lines[-1].startswith("  and 5 more failed")


def test_cuda_exercise_without_a_gpu_cannot_be_checked_here(monkeypatch, tmp_path):
    # Not a failure: the file compiled and nothing was checked, so the exit code is its own.
    monkeypatch.setattr(exercise, "_build_cuda", lambda ex, rel, out: tmp_path / "built")
    monkeypatch.setattr(programs, "has_gpu", lambda: False)
    r = exercise.check(exercise.BY_NAME["clamp"], echo=False)
    assert r.returncode == exercise.EXIT_CANNOT_CHECK not in (0, programs.EXIT_FAIL, programs.EXIT_WAIVED)
    assert "CANNOT CHECK clamp here" in r.output and "FAIL" not in r.output, r.output
    assert "3 cannot check here" in exercise.__doc__


def test_list_is_aligned(capsys):
    assert exercise.main(["list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    header = rows[0]
    starts = [header.index(word) for word in ("chapter", "language", "runs on")]
    assert len(rows) == len(exercise.EXERCISES) + 1
    for row, e in zip(rows[1:], exercise.EXERCISES):
        for start, value in zip(starts, (e.chapter, e.lang, e.where_it_runs())):
            assert row[start - 1] == " " and row[start:].startswith(value), f"misaligned:\n{header}\n{row}"


def test_skip_reasons_stay_out_of_the_readers_way():
    # Why the tests skip a block is for maintainers: the built page keeps it as a comment, not a note.
    from course.site import hooks

    page = 'Text\n\n<!--pytest.mark.skip(reason="checks your answer --seed")-->\n```bash\nls\n```\n'
    built = hooks._stage(page, "notes", hooks.renderers(programs.ROOT / "docs" / "index.md", "index.md"))
    assert "<!-- not run by the tests: checks your answer - -seed -->" in built, built
    assert "<p" not in built and "pytest.mark" not in built, built


def test_every_exercise_has_two_folded_hints():
    # Level 1 gives the idea, level 2 comes nearer the code; both folded, so that neither is read by accident.
    for ch in dict.fromkeys(e.chapter for e in exercise.EXERCISES):
        page = (programs.ROOT / "docs" / ch / "exercises.md").read_text()
        for section in re.split(r"\n(?=## )", page):
            named = re.search(r"python -m course\.exercise (\w+)    #", section)
            if named:
                hints = re.findall(r'^\?\?\? tip "(Hint \d)"', section, re.MULTILINE)
                assert hints == ["Hint 1", "Hint 2"], f"docs/{ch}/exercises.md, {named[1]}: hints {hints}"
