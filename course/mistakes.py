"""An exercise's plausible mistakes, stored as unified diffs against its solution.

Most mistakes registered for an exercise (course/exercise.py) are the solution with one deliberate
error. Such a mistake is kept as `mistakes/NAME.diff`, a unified diff against `solutions/`, and
written out (materialised) when it is checked: the diff shows exactly what is wrong, and a change to
the solution that the diff no longer fits fails loudly, on the CPU (tests/test_exercises.py applies
every diff), instead of leaving a stale copy that tests something else. A mistake that is a different
program (a host computation, another algorithm) stays a whole file in mistakes/.

A diff file: free text first (what the mistake is; the page's `--8<-- [start:mistake]` marker), then
`--- solutions/X` and `+++ mistakes/Y`, then hunks; text after the last hunk is ignored too. The
applier is exact: every context and removed line must match the solution at the hunk's line number.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .paths import ROOT

MATERIALISED = ".mistakes"  # <exercise folder>/.mistakes/: written at check time, ignored by git
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    """A mistake's diff is malformed or no longer fits its solution."""


def apply(diff: str, original: str, where: str = "diff") -> str:
    """The text `original` with the unified diff `diff` applied. Raises DiffError naming `where`, the
    hunk and the line when the diff is malformed or a context or removed line does not match."""
    lines = diff.splitlines()
    old = original.splitlines(keepends=True)
    out: list[str] = []
    pos = 0  # next line of `old` not yet copied
    i = next((k for k, ln in enumerate(lines) if ln.startswith("--- ")
              and k + 1 < len(lines) and lines[k + 1].startswith("+++ ")), None)
    if i is None:
        raise DiffError(f"{where}: no '--- ' and '+++ ' header lines: not a unified diff")
    i += 2
    hunks = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            if hunks == 0:
                raise DiffError(f"{where}: expected a hunk ('@@ -a,b +c,d @@') after the header, got {lines[i]!r}")
            break  # text after the last hunk
        hunks += 1
        start, n_old = int(m[1]), int(m[2] if m[2] is not None else 1)
        n_new = int(m[4] if m[4] is not None else 1)
        begin = start - 1 if n_old else start  # an empty old range names the line it follows
        if begin < pos or begin > len(old):
            raise DiffError(f"{where}: hunk {hunks} ({lines[i]}) starts at line {start}, outside the solution "
                            f"or before the previous hunk ends")
        out += old[pos:begin]
        pos = begin
        i += 1
        seen_old = seen_new = 0
        while seen_old < n_old or seen_new < n_new:
            if i >= len(lines):
                raise DiffError(f"{where}: hunk {hunks} ends early: {n_old - seen_old} old and "
                                f"{n_new - seen_new} new lines missing")
            line = lines[i]
            tag, text = (line[:1], line[1:]) if line else (" ", "")
            if tag in " -":
                got = old[pos].rstrip("\r\n") if pos < len(old) else None
                if got != text:
                    raise DiffError(f"{where}: hunk {hunks} does not apply: line {pos + 1} of the solution is "
                                    f"{got!r}, the diff expects {text!r} (the solution changed: update the diff)")
                if tag == " ":
                    out.append(old[pos])
                    seen_new += 1
                pos += 1
                seen_old += 1
            elif tag == "+":
                out.append(text + "\n")
                seen_new += 1
            elif tag == "\\":
                pass  # "\ No newline at end of file"
            else:
                raise DiffError(f"{where}: hunk {hunks}: a line that is neither context, removal nor "
                                f"addition: {line!r}")
            i += 1
            if seen_old > n_old or seen_new > n_new:
                raise DiffError(f"{where}: hunk {hunks} is longer than its header says")
    return "".join(out + old[pos:])


def diff_of(mistakes_dir: Path, name: str) -> Path | None:
    """mistakes/STEM.diff for the registered mistake `name` (STEM.cu or STEM.py), or None."""
    path = mistakes_dir / (Path(name).stem + ".diff")
    return path if path.is_file() else None


def solution_of(diff_path: Path) -> Path:
    """The solution a mistake's diff is made against: its '--- ' line, relative to the exercise folder."""
    for line in diff_path.read_text().splitlines():
        if line.startswith("--- "):
            return diff_path.parent.parent / line[4:].split("\t")[0].strip()
    raise DiffError(f"{diff_path.relative_to(ROOT)}: no '--- ' line naming the solution")


def materialise(mistakes_dir: Path, name: str) -> Path:
    """The file of the registered mistake `name`: mistakes/NAME itself, or mistakes/STEM.diff applied to
    its solution and written to <exercise folder>/.mistakes/NAME (the same depth as mistakes/, so a
    CUDA mistake's `#include "../X_check.cuh"` still finds its checker; the same stem, so messages and
    test ids are as for a stored file)."""
    diff_path = diff_of(mistakes_dir, name)
    if diff_path is None:
        return mistakes_dir / name
    solution = solution_of(diff_path)
    rel = diff_path.relative_to(ROOT).as_posix()
    text = apply(diff_path.read_text(), solution.read_text(), rel)
    comment = "//" if name.endswith((".cu", ".cuh")) else "#"
    text = (f"{comment} A plausible mistake, not the solution the comments below describe: {rel} applied to "
            f"{solution.relative_to(ROOT).as_posix()} by course/mistakes.py. Edit the diff, not this file.\n") + text
    out = mistakes_dir.parent / MATERIALISED / name
    out.parent.mkdir(exist_ok=True)
    if not out.is_file() or out.read_text() != text:
        tmp = out.with_name(f".{out.name}.{os.getpid()}")  # written whole, then renamed: parallel runs agree
        tmp.write_text(text)
        tmp.replace(out)
    return out
