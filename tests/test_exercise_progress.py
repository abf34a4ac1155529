"""`python -m course.exercise progress` (course/exercise_progress.py): on a fresh clone it works and
says nothing is passed; a pass of the reader's own file is kept (in a file git ignores), a file changed
since it passed is shown as changed, and the course's solution or a registered mistake is never kept."""

import os
import subprocess
import sys

from course import exercise, exercise_progress, programs

CLAMP = exercise.BY_NAME["clamp_numba"]  # its checker runs on the CPU, in Numba's simulator


def test_progress_works_on_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(programs.ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXERCISE_PROGRESS"}
    env["PYTHONPATH"] = str(clone)  # the clone's course/, not this tree's
    proc = subprocess.run([sys.executable, "-m", "course.exercise", "progress"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"0 of {len(exercise.EXERCISES)} passed." in proc.stdout, proc.stdout
    assert "Next: python -m course.exercise " in proc.stdout and "[x]" not in proc.stdout, proc.stdout
    ignored = subprocess.run(["git", "check-ignore", "-q", "build/exercise-progress.json"], cwd=clone)
    assert ignored.returncode == 0, "the progress file must be ignored by git"


def test_a_pass_of_your_file_is_kept_and_a_change_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_EXERCISE_PROGRESS", str(tmp_path / "progress.json"))
    mine = tmp_path / "clamp_numba.py"
    mine.write_text((programs.ROOT / CLAMP.solution).read_text())
    assert exercise.check(CLAMP, solution=True, sim=True, seed=3, echo=False).returncode == 0
    assert exercise_progress.load() == {}, "a pass of the course's solution is not the reader's"
    assert exercise.check(CLAMP, file=str(mine), sim=True, seed=3, echo=False).returncode == 0
    assert exercise_progress.state(exercise_progress.load()["clamp_numba"]) == "passed"
    report = exercise_progress.report(exercise.EXERCISES, has_gpu=False)
    assert "[x] clamp_numba" in report and f"1 of {len(exercise.EXERCISES)} passed." in report, report
    assert "Next: python -m course.exercise saxpy " in report, report  # the first left that runs without a GPU
    mine.write_text(mine.read_text() + "\n# edited\n")
    report = exercise_progress.report(exercise.EXERCISES, has_gpu=False)
    assert "[~] clamp_numba" in report and "has changed since" in report, report


def test_a_damaged_progress_file_starts_again(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    path.write_text("{not json")
    monkeypatch.setenv("COURSE_EXERCISE_PROGRESS", str(path))
    assert exercise_progress.load() == {}
    assert exercise.main(["progress"]) == 0
