"""GPU items: the things that must pass on a GPU, and the content hash that keys each in the record.

A GPU item is a page's block marked `<!--pytest.mark.gpu-->`, or a run (or compute-sanitizer run) of a
GPU program a page embeds (course/programs.py: Run, SanitizerRun). Its content hash covers exactly
what it runs: a block's text and every course file it names, with what those are made of; a run's
program, headers, arguments and the harness facts Run.content_hash names. Change one character of
any of those and the hash changes, so the record's old entry no longer applies (course/record.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import programs
from .normalise import block_text, computed_bytes

ROOT = programs.ROOT

_SNIPPET = re.compile(r"""--8<--\s+["']([^"':]+)(?::[\w-]+)?["']""")


@dataclass(frozen=True)
class GpuItem:
    """A thing that must pass on a GPU: a page block or a program run."""

    id: str
    hash: str
    source: str  # the page or program file it comes from


def files_used_by(code: str) -> list[Path]:
    """Course files a block's code names, with everything they are made of."""
    found: list[Path] = []
    for path in programs.paths_named_in(code):
        prog = programs.program_for(path.relative_to(ROOT).as_posix())
        for p in prog.sources() if prog else [path]:
            if p not in found:
                found.append(p)
    return found


_SHELL_OPERATORS = re.compile(r"[|&;<>`$()]")


def program_run_of_block(syntax: str, code: str, marks: list[str]) -> programs.Run | None:
    """The declared run a page block repeats, or None. A GPU block that is one command, `python
    kernels/x.py ARGS` with exactly the arguments of one of the program's `course: run` or `course:
    bench` lines, runs what that run runs (the run checks more: its verdicts, and a benchmark's second
    process), so the block takes the run's key and one GPU run verifies both. Compiled programs are
    not matched: a page's nvcc line builds with other flags than the harness."""
    if syntax not in ("bash", "sh") or not marks or not all(is_gpu_mark(m) for m in marks):
        return None
    lines = [line.strip() for line in code.splitlines() if line.strip() and not line.strip().startswith("#")]
    if len(lines) != 1 or _SHELL_OPERATORS.search(lines[0]):
        return None
    words = lines[0].split()
    if len(words) < 2 or words[0] != "python" or not words[1].startswith("kernels/"):
        return None
    prog = programs.program_for(words[1])
    if prog is None or not prog.gpu:
        return None
    return next((r for r in prog.runs() if list(r.args) == words[2:]), None)


def block_hash(syntax: str, code: str, marks: list[str]) -> str:
    """A block's key: its code as course/normalise.py reads it (layout and, in Python, comments are
    not part of it) and every course file it names, by what those compute; a block that repeats a
    program's declared run has that run's key (program_run_of_block)."""
    run = program_run_of_block(syntax, code, marks)
    if run is not None:
        return run.content_hash()
    h = hashlib.sha256()
    h.update(json.dumps([syntax, block_text(syntax, code), sorted(marks)]).encode())
    for path in files_used_by(code):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + computed_bytes(path) + b"\0")
    return h.hexdigest()[:16]


def is_gpu_mark(mark: str) -> bool:
    return mark.replace(" ", "").startswith("pytest.mark.gpu")


_EMBED_LINE = re.compile(r"""^\s*(-{1,3}8<-{1,3}\s+["'][^"']+["']\s*)?$""")


def is_embed_only(code: str) -> bool:
    """A fence whose body only embeds files (--8<-- "kernels/x.py:part") shows code that the harness
    runs as a program; the test plugin deselects it rather than run snippet lines as code."""
    return code.strip() != "" and all(_EMBED_LINE.match(line) for line in code.splitlines())


def page_blocks(page: Path):
    """The blocks the test suite runs from a page: what pytest-codeblocks collects (same parser, so
    the same blocks), less embed-only fences."""
    from pytest_codeblocks.main import extract_from_file

    return [b for b in extract_from_file(page) if b.syntax in ("python", "sh", "bash") and not is_embed_only(b.code)]


def embedded_files(markdown: str) -> list[str]:
    """Files a page embeds with pymdownx.snippets (--8<-- "path" or "path:section")."""
    out: list[str] = []
    for rel in _SNIPPET.findall(markdown):
        if rel not in out:
            out.append(rel)
    return out


def page_gpu_items(page: Path) -> list[GpuItem]:
    """Every GPU item that belongs to a page: its GPU blocks and the runs of the programs it embeds."""
    rel = page.resolve().relative_to(ROOT).as_posix()
    items = [
        GpuItem(f"{rel}::line {b.lineno}", block_hash(b.syntax, b.code, b.marks), rel)
        for b in page_blocks(page)
        if any(is_gpu_mark(m) for m in b.marks)
    ]
    for path in embedded_files(page.read_text()):
        prog = programs.program_for(path)
        if prog and prog.gpu:
            items += [GpuItem(r.id, r.content_hash(), prog.rel) for r in prog.runs()]
            items += [GpuItem(s.id, s.content_hash(), prog.rel) for s in prog.sanitizer_runs()]
    return items
