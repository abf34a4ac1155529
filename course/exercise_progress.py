"""The exercises a reader has passed, and what is next: `python -m course.exercise progress`.

`python -m course.exercise NAME` keeps each pass of the reader's own file (not `--solution`, not
`--mistake`) in build/exercise-progress.json: in the clone, beside the files the reader edits, and
ignored by git (/build/ in .gitignore), so that it is never committed and `rm -rf build` forgets it.
COURSE_EXERCISE_PROGRESS names another file (the tests use it). A pass remembers a hash of the file
that passed: a file changed since it passed is shown as such, not as passed.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path

from course.paths import BUILD, ROOT

DEFAULT_PATH = BUILD / "exercise-progress.json"


def progress_path() -> Path:
    return Path(os.environ.get("COURSE_EXERCISE_PROGRESS") or DEFAULT_PATH)


def load() -> dict:
    """{exercise name: {"file", "sha256", "seed", "date"}} of the passes kept; {} on a fresh clone."""
    path = progress_path()
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text()).get("passed", {})
    except (json.JSONDecodeError, AttributeError):
        return {}  # a damaged file: start again rather than stop the reader's check


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_pass(name: str, file: Path, seed: int) -> None:
    """Keep a pass of `file` for exercise `name`."""
    passed = load()
    rel = file.resolve().relative_to(ROOT).as_posix() if ROOT in file.resolve().parents else str(file)
    passed[name] = {"file": rel, "sha256": _sha256(file), "seed": seed,
                    "date": datetime.date.today().isoformat()}
    path = progress_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"about": "exercises passed in this clone (python -m course.exercise progress)",
                               "passed": passed}, indent=1) + "\n")
    tmp.replace(path)


def state(entry: dict | None) -> str:
    """"passed", "changed" (the file that passed has changed or is gone since) or "" (not passed)."""
    if entry is None:
        return ""
    file = ROOT / entry["file"]
    return "passed" if file.is_file() and _sha256(file) == entry["sha256"] else "changed"


def report(exercises, has_gpu: bool) -> str:
    """Per chapter, in the course's order, each exercise with its state; then the next exercise to do:
    the first not passed that can be checked here (a CUDA C++ exercise needs a GPU)."""
    passed = load()
    width = max(len(e.name) for e in exercises) + 2
    path = progress_path()
    ignored = ", which git ignores" if path == DEFAULT_PATH else ""
    lines = [f"Your exercises (passes are kept in {_shown(path)}{ignored})"]
    chapters = list(dict.fromkeys(e.chapter for e in exercises))
    todo = []
    for chapter in chapters:
        mine = [e for e in exercises if e.chapter == chapter]
        states = {e.name: state(passed.get(e.name)) for e in mine}
        done = sum(s == "passed" for s in states.values())
        lines.append(f"\n{chapter}: {done} of {len(mine)} passed (docs/{chapter}/exercises.md)")
        for e in mine:
            mark = {"passed": "[x]", "changed": "[~]", "": "[ ]"}[states[e.name]]
            note = f"  (passed on {passed[e.name]['date']}; {passed[e.name]['file']} has changed since)" \
                if states[e.name] == "changed" else ""
            lines.append(f"  {mark} {e.name:{width}}{e.title}{note}")
            if states[e.name] != "passed":
                todo.append(e)
    total = sum(state(passed.get(e.name)) == "passed" for e in exercises)
    lines.append(f"\n{total} of {len(exercises)} passed.")
    runs_here = [e for e in todo if has_gpu or not e.needs_gpu]
    if runs_here:
        lines.append(f"Next: python -m course.exercise {runs_here[0].name}    "
                     f"({runs_here[0].title}, docs/{runs_here[0].chapter}/exercises.md)")
    if not has_gpu and any(e.needs_gpu for e in todo):
        lines.append(f"No GPU here: {sum(e.needs_gpu for e in todo)} of the exercises left are CUDA C++ and "
                     f"need one to be checked.")
    if not todo:
        lines.append("Every exercise passed.")
    return "\n".join(lines)


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if ROOT in path.resolve().parents else str(path)
