"""Guards: no example can fall through the cracks silently."""

import ast
import re
from pathlib import Path

import pytest
from pytest_codeblocks.main import extract_from_file

from course import programs, record

ROOT = programs.ROOT
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "vendor" not in p.parts)
COLLECTED = {"python", "sh", "bash"}  # what pytest-codeblocks runs: the info string exactly
# Info strings whose first word says "this is code a reader runs".
EXECUTABLE_LOOKING = {"python", "python3", "py", "pycon", "ipython", "sh", "bash", "zsh", "shell", "console",
                      "shell-session", "shellsession", "sh-session", "powershell", "ps1", "cmd", "bat"}
_SKIP_REASON = re.compile(r"""pytest\.mark\.skip\(reason=(["'])(.+?)\1\)""")


def _first_word(syntax: str) -> str:
    return re.split(r"[\s{]", syntax.strip().lstrip(".").lower() + " ", maxsplit=1)[0]


def _skip_reason(marks):
    for m in marks:
        found = _SKIP_REASON.search(m)
        if found and found.group(2).strip():
            return found.group(2).strip()
    return None


def _rel(page):
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_executable_looking_block_is_run_or_says_why_not(page):
    problems = []
    for block in extract_from_file(page):
        syntax = (block.syntax or "").strip()
        if _first_word(syntax) not in EXECUTABLE_LOOKING or record.is_embed_only(block.code):
            continue  # embed-only fences show files that the harness builds and runs itself
        has_skip = any(m.replace(" ", "").startswith("pytest.mark.skip") for m in block.marks)
        if has_skip and not _skip_reason(block.marks):
            problems.append(f"line {block.lineno}: skipped without a reason the reader can see")
        if syntax not in COLLECTED and not has_skip:
            problems.append(
                f"line {block.lineno}: fence ```{syntax} is not collected by pytest-codeblocks (only exactly "
                f"'python', 'sh' or 'bash' are); use one of those, or mark it "
                f'<!--pytest.mark.skip(reason="...")--> with the reason')
    assert not problems, f"{_rel(page)}:\n" + "\n".join(problems)


def _embedded_everywhere():
    embedded = set()
    for md in list((ROOT / "docs").rglob("*.md")) + list((ROOT / "snippets").rglob("*.md")):
        embedded.update(record.embedded_files(md.read_text()))
    return embedded


@pytest.mark.parametrize("program", programs.all_programs(), ids=lambda p: p.rel)
def test_every_kernel_file_is_embedded_by_a_page(program):
    assert program.rel in _embedded_everywhere(), f"{program.rel} is not embedded (--8<--) by any page"


@pytest.mark.parametrize("program", [p for p in programs.all_programs() if p.built_by], ids=lambda p: p.rel)
def test_every_built_by_file_is_built_where_it_says(program):
    where = ROOT / program.built_by
    assert where.is_file(), f"{program.rel}: 'course: built-by {program.built_by}' names no such file"
    text = where.read_text()
    folder = program.path.parent.relative_to(ROOT).as_posix()
    assert program.rel in text or folder in text, f"{program.built_by} does not name {program.rel} or {folder}/"


@pytest.mark.parametrize("program", [p for p in programs.all_programs() if not p.runnable and not p.built_by],
                         ids=lambda p: p.rel)
def test_every_header_or_module_is_used(program):
    """Runnable programs are built and run by test_programs; headers and modules must be used by one."""
    users = [p for p in programs.all_programs() if p.runnable and program.path in p.sources()]
    mentioned = any(program.rel in f.read_text() for f in (ROOT / "tests").glob("*.py")) or any(
        program.rel in b.code for page in PAGES for b in extract_from_file(page))
    assert users or mentioned, f"{program.rel} is neither included by a program nor used by a test or a page block"


_DOCS_PATH = re.compile(r"docs/[\w./-]+?\.md\b")
_TAUGHT_IN = re.compile(r"Taught in (docs/[\w./-]+?\.md(?:(?:,? and |, )docs/[\w./-]+?\.md)*)")


def test_every_page_a_kernel_file_names_exists_and_teaches_it():
    """A header's "Taught in docs/x.md" must name a page that shows the file (embeds it, or names it in
    a directive or its prose), and every docs/ path a kernel file names must exist: pages move (a
    chapter split in two), comments do not follow."""
    page_texts = {_rel(md): md.read_text() for md in PAGES}
    problems = []
    for path in sorted((ROOT / "kernels").rglob("*")):
        if path.suffix not in programs.SOURCE_SUFFIXES or ".mistakes" in path.parts:
            continue
        rel, text = path.relative_to(ROOT).as_posix(), path.read_text()
        problems += [f"{rel}: names {page}, which does not exist" for page in sorted(set(_DOCS_PATH.findall(text)))
                     if not (ROOT / page).is_file()]
        for taught in _TAUGHT_IN.finditer(text):
            problems += [f"{rel}: says it is taught in {page}, which does not name it"
                         for page in _DOCS_PATH.findall(taught.group(1))
                         if page in page_texts and rel not in page_texts[page]]
    assert not problems, "\n".join(problems)


KERNEL_COLUMNS = 118  # at 1280 px the code column holds about 125 characters (reader.css)


def test_every_kernel_line_fits_the_code_column():
    """Pages embed kernel files whole or by markers: a longer line scrolls sideways on a desktop
    (tests/test_browser_pages.py sees it in a browser; this sees it without one)."""
    long = [f"{path.relative_to(ROOT)}:{n}: {len(line)} columns"
            for path in sorted((ROOT / "kernels").rglob("*")) if path.suffix in programs.SOURCE_SUFFIXES
            and ".mistakes" not in path.parts  # materialised diff mistakes (course/mistakes.py), not embedded
            for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > KERNEL_COLUMNS]
    assert not long, f"lines over {KERNEL_COLUMNS} columns (wrap them):\n" + "\n".join(long)


def test_every_page_is_in_the_nav():
    nav_text = (ROOT / "mkdocs.yml").read_text()
    missing = [_rel(p)[len("docs/"):] for p in PAGES if _rel(p)[len("docs/"):] not in nav_text]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


SOURCE_LINE_LIMIT = 800  # a file a reader can hold in mind; past it, split it by what its parts do
LIMITED_SOURCES = {".py", ".cu", ".cuh", ".h", ".c", ".cpp"}


def test_no_source_file_is_longer_than_the_limit():
    long = [f"{path.relative_to(ROOT)}: {n} lines"
            for folder in ("kernels", "course", "tests") for path in sorted((ROOT / folder).rglob("*"))
            if path.suffix in LIMITED_SOURCES and path.is_file() and ".mistakes" not in path.parts
            and (n := len(path.read_text(errors="replace").splitlines())) > SOURCE_LINE_LIMIT]
    assert not long, (f"source files over {SOURCE_LINE_LIMIT} lines (split each by what its parts do: a header "
                      "for a program's plumbing, a test module per subject):\n" + "\n".join(long))


def _harness_modules() -> dict[str, Path]:
    """course/'s modules by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((ROOT / "course").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The harness modules that a module imports anywhere in it (in a function, or for type checking
    only, too: each is still a dependency of its design)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {m for m in found if m in modules and m != name}


def test_harness_modules_import_one_another_without_a_circle():
    """A circle (a imports b, b imports a, if only inside a function) means neither can be understood,
    tested or changed alone: move what both need into a lower module, or pass plain data."""
    modules = _harness_modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    circles = []
    for start in graph:
        path, todo = {start: [start]}, [start]
        while todo:  # breadth-first from start: a way back to it is a circle
            here = todo.pop(0)
            for nxt in sorted(graph[here]):
                if nxt == start:
                    circles.append(" -> ".join(path[here] + [start]))
                elif nxt not in path:
                    path[nxt] = path[here] + [nxt]
                    todo.append(nxt)
    assert not circles, "harness modules that import each other:\n" + "\n".join(sorted(set(circles)))


def test_the_harness_does_not_import_the_site():
    """course/site/ renders pages; the harness (the GPU run, the claims' checks) sits below it and must
    run without it: what both need (the page-directive parser, course/directives.py) lives in course/."""
    modules = _harness_modules()
    site = [f"{path.relative_to(ROOT)} imports {m}" for name, path in modules.items()
            if name != "course.site" and not name.startswith("course.site.")
            for m in sorted(_imports(name, path, modules)) if m == "course.site" or m.startswith("course.site.")]
    assert not site, "\n".join(site)
