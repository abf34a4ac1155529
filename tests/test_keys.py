"""Record keys follow what a program computes (course/normalise.py): comments, blank lines,
indentation and line wrapping do not change a GPU item's key; a token of arithmetic does, and only
for the items whose programs include the edited file."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest

from course import items, normalise, programs, record

ROOT = programs.ROOT
C_SOURCE = """\
#include "a.cuh"
#define SCALE 2
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] - -1;  // the kernel
  const char* s = "a // not a comment";
}
"""
C_RELAID = """\
// A header comment.
#include "a.cuh"   /* what it needs */
#define SCALE \\
  2
/* one
   block comment */
__global__ void saxpy(int n,
                      float a, const float* x, float* y)
{
    int i = blockIdx.x*blockDim.x + threadIdx.x;

    if (i < n)
        y[i] = a*x[i] + y[i] - - 1;
    const char* s = "a // not a comment";
}
"""
PY_SOURCE = """\
def f(x, y):
    if x:
        return [x, y]  # a list
    return None
"""
PY_RELAID = """\
# A module comment.

def f(x,
      y):
  if x:
      return [
          x,
          y
      ]
  return None
"""


def test_comments_and_layout_do_not_change_c_tokens():
    assert normalise.c_tokens(C_SOURCE) == normalise.c_tokens(C_RELAID)


@pytest.mark.parametrize("edit", [("a * x[i]", "a + x[i]"), ("- -1", "--1"), ("not a comment", "not a  comment"),
                                  ("#define SCALE 2\n", "#define SCALE\n2\n"), ('"a.cuh"', '"b.cuh"')])
def test_every_token_of_c_counts(edit):
    old, new = edit
    assert old in C_SOURCE
    assert normalise.c_tokens(C_SOURCE.replace(old, new)) != normalise.c_tokens(C_SOURCE)


def test_comments_and_layout_do_not_change_python_tokens():
    assert normalise.python_tokens(PY_SOURCE) == normalise.python_tokens(PY_RELAID)


@pytest.mark.parametrize("edit", [("[x, y]", "[y, x]"), ("    return None", "        return None"),
                                  ("return None", "return 'None'")])
def test_every_token_and_the_nesting_of_python_count(edit):
    old, new = edit
    assert old in PY_SOURCE
    assert normalise.python_tokens(PY_SOURCE.replace(old, new)) != normalise.python_tokens(PY_SOURCE)


def _tokenize_reference(source: str) -> str:
    """The same normal form built from Python's own tokenizer (which differs between Python versions
    for f-strings, so the keys cannot use it; the course's files have none that it splits here)."""
    lines, line = [], []
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
            continue
        if t.type == tokenize.NEWLINE:
            lines.append(" ".join(line))
            line = []
        else:
            line.append({tokenize.INDENT: "INDENT", tokenize.DEDENT: "DEDENT"}.get(t.type, t.string))
    return "\n".join(lines + ([" ".join(line)] if line else []))


PYTHON_FILES = sorted(p for d in ("course", "kernels", "tests") for p in (ROOT / d).rglob("*.py")
                      if "__pycache__" not in p.parts and ".mistakes" not in p.parts)


def test_the_python_lexer_agrees_with_pythons_tokenizer_on_every_course_file():
    differ = [p.relative_to(ROOT).as_posix() for p in PYTHON_FILES
              if normalise.python_tokens(p.read_text()) != _tokenize_reference(p.read_text())]
    assert len(PYTHON_FILES) > 100 and not differ, differ


C_FILES = sorted(p for p in (ROOT / "kernels").rglob("*") if p.suffix in normalise.C_SUFFIXES)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_the_c_lexer_drops_exactly_the_comments_gcc_drops():
    """g++ -fpreprocessed removes comments and nothing else; the tokens must be the same either way
    (#pragma once aside: g++ drops it from a file it reads as the main file)."""
    differ = []
    for path in C_FILES:
        proc = subprocess.run(["g++", "-fpreprocessed", "-dD", "-E", "-P", "-x", "c++", str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:  # a header g++ cannot read alone (a directive-shaped macro argument)
            continue
        ours, gcc = (normalise.c_tokens(t).replace("# pragma once\n", "") for t in (path.read_text(), proc.stdout))
        if ours != gcc:
            differ.append(path.relative_to(ROOT).as_posix())
    assert len(C_FILES) > 100 and not differ, differ


def test_what_a_file_includes_is_read_without_its_comments():
    text = '#include "a.cuh"\n// #include "b.cuh"\n/*\n#include "c.cuh"\n*/\nconst char* s = "// kept";\n'
    stripped = normalise.without_comments(text, ".cu")
    assert '"a.cuh"' in stripped and "b.cuh" not in stripped and "c.cuh" not in stripped
    assert '"// kept"' in stripped and stripped.count("\n") == text.count("\n")


# ----------------------------------------------------------------------------- the whole course


@pytest.fixture
def course_copy(tmp_path, monkeypatch):
    """A copy of kernels/ and docs/ (less vendored assets) in a temporary root, to edit freely."""
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__", ".mistakes"))
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("vendor", "*.svg", "*.png"))
    for mod in (programs, record, items):
        monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(programs, "KERNELS", tmp_path / "kernels")
    monkeypatch.setattr(programs, "BUILD", tmp_path / "build")
    return tmp_path


def _every_key(root: Path) -> dict[str, str]:
    """{item id: key} of every program run and sanitizer run, and every page's GPU items."""
    keys = {}
    for prog in programs.all_programs():
        keys.update({r.id: r.content_hash() for r in [*prog.runs(), *prog.sanitizer_runs()]})
    for page in sorted((root / "docs").rglob("*.md")):
        keys.update({f"page {page.relative_to(root)} {i.id}": i.hash for i in items.page_gpu_items(page)})
    return keys


def _includers(root: Path, header: Path) -> set[str]:
    return {r.id for p in programs.all_programs() if header in p.sources() for r in [*p.runs(), *p.sanitizer_runs()]}


def _stale(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {i for i in before if after.get(i) != before[i]}


def test_a_comment_and_reflowed_layout_in_the_shared_header_stale_nothing(course_copy):
    header = course_copy / "kernels" / "common" / "course.cuh"
    before = _every_key(course_copy)
    text = header.read_text()
    # A new comment line, blank lines, and every indentation doubled.
    reflowed = "// A reworded comment line.\n" + re.sub(r"^( +)", r"\1\1", text.replace(";\n", ";\n\n", 40), flags=re.M)
    assert reflowed != text
    header.write_text(reflowed)
    assert len(before) > 500 and not _stale(before, _every_key(course_copy))


def test_one_character_of_arithmetic_stales_exactly_its_programs_items(course_copy):
    kernel = course_copy / "kernels" / "first-kernels" / "vector_add.cu"
    before = _every_key(course_copy)
    text = kernel.read_text()
    assert "a[i] + b[i]" in text
    kernel.write_text(text.replace("a[i] + b[i]", "a[i] - b[i]", 1))
    stale = _stale(before, _every_key(course_copy))
    mine = _includers(course_copy, kernel)
    assert mine and {i for i in stale if not i.startswith("page ")} == mine
    # On pages: the program's runs, and blocks of pages that name it.
    for item in {i for i in stale if i.startswith("page ")}:
        _, page, item_id = item.split(" ", 2)
        assert item_id in mine or "vector_add" in (course_copy / page).read_text(), item


def test_an_edit_to_one_helper_header_stales_only_its_includers(course_copy):
    header = course_copy / "kernels" / "common" / "check_cufft.cuh"
    includers = _includers(course_copy, header)
    before = _every_key(course_copy)
    assert includers and len(includers) < len([i for i in before if not i.startswith("page ")]) // 4
    header.write_text(header.read_text() + "\nconstexpr int kEdited = 1;\n")
    stale = {i for i in _stale(before, _every_key(course_copy)) if not i.startswith("page ")}
    assert stale == includers
