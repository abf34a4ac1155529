"""Tables kept by hand that list the course's files agree with the files on disk.

- A chapter's program table, the first table under the heading (or bold line) "The programs" of
  docs/CHAPTER/index.md, lists every program, header and module directly in kernels/CHAPTER/
  (the exercises, in their own folder, have their own page): a file added to the folder and not to
  the table fails here, as does a row for a file that is gone. The kernel index page
  (docs/kernel-index.md) lists every file too, but is generated; these tables say what each file is
  for, which only a person can write.
- Every table on every page names only files that exist: a cell's `kernels/...` paths, and the bare
  file names after one in the same cell (`kernels/serving/rotary.cuh`, `silu_mul.cuh`: both in
  kernels/serving/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course import programs
from course.paths import DOCS, KERNELS, ROOT

PAGES = sorted(p for p in DOCS.rglob("*.md") if "vendor" not in p.parts)
_HEADING = re.compile(r"^(?:#{1,6}\s+(?P<h>.+?)\s*#*|\*\*(?P<b>[^*]+)\*\*)\s*$")
_SPAN = re.compile(r"`([^`\s]+)`")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", re.S | re.M)


def _tables(text: str) -> list[tuple[int, str | None, list[str]]]:
    """(line, the heading above it, its rows) for every table of a page, outside code blocks."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    tables, heading, rows, start = [], None, [], 0
    for lineno, line in enumerate(text.splitlines() + [""], 1):
        if line.lstrip().startswith("|"):
            if not rows:
                start = lineno
            rows.append(line.strip())
            continue
        if rows:
            tables.append((start, heading, rows))
            rows = []
        m = _HEADING.match(line.strip())
        if m:
            heading = (m["h"] or m["b"]).strip()
    return tables


def _files_named(cell: str) -> list[str]:
    """The course files a table cell names: its kernels/ paths, and bare file names after one."""
    named, folder = [], None
    for span in _SPAN.findall(cell):
        if span.startswith("kernels/"):
            named.append(span)
            folder = str(Path(span).parent)
        elif folder and "/" not in span and Path(span).suffix in programs.SOURCE_SUFFIXES:
            named.append(f"{folder}/{span}")
    return named


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip("|").split("|")]


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def program_table(index: Path) -> list[str] | None:
    """The files a chapter's program table lists (first column), or None if the page has none."""
    for _, heading, rows in _tables(index.read_text()):
        if heading == "The programs":
            return [f for row in rows[2:] for f in _files_named(_cells(row)[0])]
    return None


def chapter_files(chapter: str) -> list[str]:
    """What a chapter's program table must list: the course files directly in kernels/CHAPTER/."""
    folder = KERNELS / chapter
    return sorted(p.relative_to(ROOT).as_posix() for p in folder.iterdir()
                  if p.is_file() and p.suffix in programs.SOURCE_SUFFIXES)


CHAPTERS_WITH_TABLES = [p.parent.name for p in sorted(DOCS.glob("*/index.md")) if program_table(p) is not None]


def test_chapters_with_program_tables_are_found():
    # The chapters whose index pages keep a program table today; a rename of the heading would
    # otherwise leave a table unchecked.
    assert {"serving", "attention", "many-gpus", "mnist"} <= set(CHAPTERS_WITH_TABLES), CHAPTERS_WITH_TABLES


@pytest.mark.parametrize("chapter", CHAPTERS_WITH_TABLES)
def test_program_table_lists_the_chapters_files(chapter):
    index = DOCS / chapter / "index.md"
    listed = program_table(index)
    assert (KERNELS / chapter).is_dir(), f"{_rel(index)} keeps a program table, but kernels/{chapter}/ does not exist"
    on_disk = chapter_files(chapter)
    unlisted = [f for f in on_disk if f not in listed]
    gone = [f for f in listed if f not in on_disk]
    assert not unlisted and not gone, (
        f"{_rel(index)}, 'The programs': " + "; ".join(
            ([f"not listed (add a row saying what it is for): {', '.join(unlisted)}"] if unlisted else []) +
            ([f"listed but not in kernels/{chapter}/: {', '.join(gone)}"] if gone else [])))


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_tables_name_only_files_that_exist(page):
    missing = []
    for line, _, rows in _tables(page.read_text()):
        for row in rows:
            for cell in _cells(row):
                missing += [f"table at line {line}: {f}" for f in _files_named(cell) if not (ROOT / f).exists()]
    assert not missing, f"{_rel(page)} names files that do not exist:\n" + "\n".join(missing)


def test_cells_are_read_as_meant():
    assert _files_named("`kernels/serving/fused_add_rmsnorm.cuh`, `rotary.cuh`, `silu_mul.cuh`") == [
        "kernels/serving/fused_add_rmsnorm.cuh", "kernels/serving/rotary.cuh", "kernels/serving/silu_mul.cuh"]
    assert _files_named("`llmc/encoder.cuh`") == []  # another project's file, not the course's
    page = "**The programs**\n\n| Program | What |\n|---|---|\n| `kernels/x/a.cu`, `b.py` | a |\n\n## Next\n"
    assert [h for _, h, _ in _tables(page)] == ["The programs"]
