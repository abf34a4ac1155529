"""Record keys follow what a program computes (course/normalise.py): comments, blank lines,
indentation and line wrapping do not change a GPU item's key; a token of arithmetic does, and only
for the items whose programs include the edited file."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tokenize
from contextlib import contextmanager
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


@pytest.fixture(scope="module")
def course_copy(tmp_path_factory):
    """A copy of kernels/ and docs/ (less vendored assets) in a temporary root, to edit freely, and
    the key of every item in it before any edit."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__", ".mistakes"))
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("vendor", "*.svg", "*.png"))
    with pytest.MonkeyPatch.context() as patch:
        for mod in (programs, record, items):
            patch.setattr(mod, "ROOT", root)
        patch.setattr(programs, "KERNELS", root / "kernels")
        patch.setattr(programs, "BUILD", root / "build")
        yield root, _every_key(root)


@contextmanager
def _edited(path: Path, edit):
    """The file with edit(text) as its text, restored afterwards."""
    text = path.read_text()
    changed = edit(text)
    assert changed != text, f"the edit does not apply to {path.name}"
    path.write_text(changed)
    try:
        yield
    finally:
        path.write_text(text)


def _every_key(root: Path) -> dict[str, str]:
    """{item id: key} of every program run and sanitizer run, and every page's GPU items."""
    keys = {}
    for prog in programs.all_programs():
        keys.update({r.id: r.content_hash() for r in [*prog.runs(), *prog.sanitizer_runs()]})
    for page in sorted((root / "docs").rglob("*.md")):
        keys.update({f"page {page.relative_to(root)} {i.id}": i.hash for i in items.page_gpu_items(page)})
    return keys


def _includers(header: Path) -> set[str]:
    return {r.id for p in programs.all_programs() if header in p.sources() for r in [*p.runs(), *p.sanitizer_runs()]}


def _stale(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {i for i in before if after.get(i) != before[i]}


def _programs_only(ids) -> set[str]:
    return {i for i in ids if not i.startswith("page ")}


def test_a_comment_and_reflowed_layout_in_the_most_shared_header_stale_nothing(course_copy):
    root, before = course_copy
    headers = sorted((root / "kernels" / "common").glob("*.cuh"))
    counts = {h: sum(h in p.sources() for p in programs.all_programs()) for h in headers}
    header = max(headers, key=counts.get)
    assert counts[header] > 20

    def reflow(text):  # a new comment line, blank lines, and every indentation doubled
        return "// A reworded comment line.\n" + re.sub(r"^( +)", r"\1\1", text.replace(";\n", ";\n\n", 40), flags=re.M)

    with _edited(header, reflow):
        assert len(before) > 500 and not _stale(before, _every_key(root))


def test_one_character_of_arithmetic_stales_exactly_its_programs_items(course_copy):
    root, before = course_copy
    kernel = root / "kernels" / "first-kernels" / "vector_add.cu"
    with _edited(kernel, lambda text: text.replace("a[i] + b[i]", "a[i] - b[i]", 1)):
        stale = _stale(before, _every_key(root))
        mine = _includers(kernel)
    assert mine and _programs_only(stale) == mine
    # On pages: the program's runs, and blocks of pages that name it.
    for item in stale - _programs_only(stale):
        _, page, item_id = item.split(" ", 2)
        assert item_id in mine or "vector_add" in (root / page).read_text(), item


def test_an_edit_to_one_helper_header_stales_only_its_includers(course_copy):
    root, before = course_copy
    header = root / "kernels" / "common" / "check_cufft.cuh"
    includers = _includers(header)
    assert includers and len(includers) < len(_programs_only(before)) // 4
    with _edited(header, lambda text: text + "\nconstexpr int kEdited = 1;\n"):
        assert _programs_only(_stale(before, _every_key(root))) == includers
