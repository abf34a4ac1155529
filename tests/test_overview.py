"""What a new reader meets first holds together: the commands that install and test the course, the
repository's address, the home page's chapters and map, the lists and counts of exercises, the search
index's weight and the whole-course page's contents (course/chapters.py, course/site/overview.py,
course/site/search_index.py, course/site/print_contents.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course import chapters, directives  # noqa: E402
from course.exercise import EXERCISES  # noqa: E402
from course.figures import chapters as chapter_figure  # noqa: E402
from course.site import overview, print_contents, search_index  # noqa: E402

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "assets" not in p.parts)
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


# ----------------------------------------------------------------------------- install commands

def _included(extra: str) -> set[str]:
    """The extras an extra pulls in through the project itself ("cuda-course[docs,browser]")."""
    found = set()
    for dep in EXTRAS[extra]:
        m = re.fullmatch(r"cuda-course\[([\w,-]+)\]", dep.replace(" ", ""))
        if m:
            for inner in m[1].split(","):
                found |= {inner} | _included(inner)
    return found


# The GPU tests need every extra that no other extra includes, except `notebook`, which only re-executes
# the training notebook (docs/contributing.md); without a GPU, all of those but `gpu`, what the GPU
# examples import (CuPy needs a GPU at run time).
PULLED_IN = set().union(*(_included(e) for e in EXTRAS))
GPU_TEST_EXTRAS = set(EXTRAS) - PULLED_IN - {"notebook"}
CPU_TEST_EXTRAS = GPU_TEST_EXTRAS - {"gpu"}
_TEST_COMMAND = re.compile(r"""pip install (?:-q )?-e ['"]\.\[(?P<extras>[\w,-]+)\]['"].*?&&\s*(?:python -m )?pytest(?P<rest>.*)""")


def _test_commands() -> list[tuple[str, str, str]]:
    """(file, extras, the rest of the line) for every line that installs the course and runs the tests."""
    found = []
    for path in [ROOT / "README.md", *PAGES]:
        for line in path.read_text().splitlines():
            m = _TEST_COMMAND.search(line)
            if m:
                found.append((path.relative_to(ROOT).as_posix(), m["extras"], m["rest"]))
    return found


def test_the_extras_are_read_from_pyproject():
    assert {"test", "libs", "gpu"} <= GPU_TEST_EXTRAS and "docs" in PULLED_IN and "notebook" not in GPU_TEST_EXTRAS
    assert len(_test_commands()) >= 6, "the test commands of README.md, the home page and Start here are not found"


@pytest.mark.parametrize("where,extras,rest", _test_commands())
def test_a_test_command_installs_what_its_machine_needs(where, extras, rest):
    """A command without a GPU says so and installs what CI installs; any other runs the GPU tests and must
    install every extra they need (the GPU route once left out `gpu`, so CuPy programs exited)."""
    named = set(extras.split(","))
    if "without a GPU" in rest:
        assert named == CPU_TEST_EXTRAS, f"{where}: the command without a GPU installs {sorted(named)}, " \
                                         f"not {sorted(CPU_TEST_EXTRAS)}"
    else:
        assert GPU_TEST_EXTRAS <= named, f"{where}: `{extras}` leaves out {sorted(GPU_TEST_EXTRAS - named)}, " \
                                         f"which the GPU tests need (mark a CPU-only command '# without a GPU')"


def test_ci_installs_the_extras_of_the_command_without_a_gpu():
    m = _TEST_COMMAND.search((ROOT / ".ci" / "run").read_text())
    assert m and set(m["extras"].split(",")) == CPU_TEST_EXTRAS


# ----------------------------------------------------------------------------- the repository's address

def test_the_repository_address_is_one_setting():
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^  repository: !ENV REPO_URL$", config, re.MULTILINE)
    assert not re.search(r"^repo_url:", config, re.MULTILINE), \
        "with repo_url the theme asks GitHub's API for the repository's stars, a request to another host"
    assert "REPO_URL: ${{ github.server_url }}/${{ github.repository }}" in \
        (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    typed = [p.relative_to(ROOT).as_posix() for p in [ROOT / "README.md", *PAGES]
             if re.search(r"git clone (?:https?://|git@)", p.read_text())]
    assert not typed, f"a clone command typed by hand (use <!-- course:clone -->): {typed}"
    assert "<!-- course:clone -->" in (DOCS / "start-here.md").read_text()


def test_the_header_links_the_repository_only_when_the_address_is_given(monkeypatch):
    from mkdocs.config import load_config

    from course.site import hooks

    monkeypatch.delenv("REPO_URL", raising=False)
    local = hooks.on_config(load_config(str(ROOT / "mkdocs.yml")))
    assert not local.repo_url, "a local build must not give the theme a repo_url (it would call GitHub's API)"
    monkeypatch.setenv("REPO_URL", "https://github.com/o/r")
    published = hooks.on_config(load_config(str(ROOT / "mkdocs.yml")))
    assert (published.repo_url, published.repo_name) == ("https://github.com/o/r", "o/r")


def test_the_clone_command_is_made_from_the_address():
    shown = overview.clone("https://github.com/o/r")
    assert "git clone https://github.com/o/r.git cuda-course" in shown and "<https://github.com/o/r>" in shown
    assert "git clone" not in overview.clone(None).split("`git clone ADDRESS")[0]
    assert overview.web_address("git@github.com:o/r.git") == "https://github.com/o/r"
    assert overview.web_address("https://github.com/o/r.git") == "https://github.com/o/r"


# ----------------------------------------------------------------------------- chapters

def test_the_home_page_table_is_made_from_the_nav():
    home = (DOCS / "index.md").read_text()
    assert "<!-- course:chapters -->" in home and "| Chapter |" not in home, "the chapter table is typed by hand"


def test_the_home_page_lists_every_chapter_of_the_nav():
    nav = chapters.nav()
    table = chapters.table(nav)
    sections = [c for c in chapters.sections(nav) if len(c.pages) > 1]
    assert {"serving/index.md", "many-gpus/index.md"} <= {c.index for c in sections}
    missing = [c.title for c in sections if f"]({c.index})" not in table]
    assert not missing, f"the home page's chapter table leaves out {missing}"


def test_a_chapter_without_a_description_is_named():
    warnings = []
    chapters.table(chapters.nav() + [{"New chapter": ["new/index.md", "new/page.md"]}], warnings.append)
    assert warnings and "new/index.md" in warnings[0]


def test_every_page_of_a_chapter_sits_in_its_folder():
    """A page in another chapter's nav section (many-gpus/data-parallel.md once sat under the MNIST one)."""
    strays = [(c.title, p) for c in chapters.chapters() if len(c.pages) > 1
              for p in c.pages if p.rsplit("/", 1)[0] != c.folder]
    assert not strays, f"pages in another chapter's nav section: {strays}"


def test_the_chapter_map_has_a_box_for_every_chapter():
    found, arrows = chapter_figure.chapter_graph()
    assert {c.folder for c in found} <= set(chapter_figure.PLACES)
    assert ("attention", "serving") in arrows and ("mnist", "many-gpus") in arrows


# ----------------------------------------------------------------------------- exercises

def test_start_here_lists_every_exercise_that_runs_without_a_gpu():
    start = (DOCS / "start-here.md").read_text()
    assert "<!-- course:cpu-exercises -->" in start and "| `saxpy`" not in start
    table = overview.cpu_exercises()
    cpu = [e.name for e in EXERCISES if not e.needs_gpu]
    assert cpu and all(f"`{name}`" in table for name in cpu)
    assert not [e.name for e in EXERCISES if e.needs_gpu and f"`{e.name}`" in table]


def test_a_chapter_counts_its_exercises_from_the_registry():
    n = sum(e.chapter == "first-kernels" for e in EXERCISES)
    assert overview.exercise_count("first-kernels").split()[0] == overview._NUMBERS[n]
    assert "<!-- course:exercises first-kernels -->" in (DOCS / "first-kernels" / "index.md").read_text()


_TYPED_COUNT = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve) (?:\w+ )?exercises\b")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_no_page_types_a_count_of_exercises(page):
    text = directives.FENCE.sub("", page.read_text())
    assert not _TYPED_COUNT.search(text), f"{page.relative_to(ROOT)}: a count of exercises typed by hand " \
                                          f"(<!-- course:exercises CHAPTER --> counts them)"


def test_a_chapter_index_links_every_lesson_of_its_chapter():
    """A chapter's index says what each of its lessons teaches (first-kernels once left out cuda-graphs.md)."""
    missing = []
    for c in chapters.chapters():
        text = (DOCS / c.index).read_text()
        for page in c.pages[1:]:
            name = page.rsplit("/", 1)[1]
            if page.endswith(".md") and name != "exercises.md" and f"]({name}" not in text:
                missing.append(page)
    assert not missing, f"chapter index pages that do not link these lessons: {missing}"


# ----------------------------------------------------------------------------- weight

def test_the_search_index_keeps_every_word_and_the_opening():
    text = ("<p>Opening sentence about warps.</p> <p>The kernel calls <code>__syncthreads()</code> twice.</p>"
            " <pre><code>__global__ void scale(float* x) { x[0] = 1; }\nscale&lt;&lt;&lt;1, 1&gt;&gt;&gt;(x);</code></pre>")
    trimmed = search_index.trim_text(text)
    assert trimmed.startswith("<p>Opening sentence about warps.</p>")
    for word in ("__syncthreads", "__global__", "scale", "twice"):
        assert word in trimmed
    assert trimmed.count("scale") == 1 and len(trimmed) < len(text)


def test_the_search_skips_notes_badges_and_diagram_source():
    page = ('<div class="course-badge course-verified" role="note">x</div><p class="course-run-note x">y</p>'
            '<pre class="mermaid">graph LR</pre><p class="other">z</p>')
    marked = search_index.exclude(page)
    assert marked.count('data-search-exclude="yes"') == 3 and '<p class="other">' in marked


def test_trimming_an_index_rewrites_the_file(tmp_path):
    index = tmp_path / "search_index.json"
    long = "<p>Start.</p> " + " ".join(["<p>repeated words in many sections</p>"] * 50)
    index.write_text(json.dumps({"config": {}, "docs": [{"location": "a/", "title": "A", "text": long}]}))
    before, after = search_index.trim(index)
    assert after < before / 2 and json.loads(index.read_text())["docs"][0]["text"].startswith("<p>Start.</p>")


def test_the_whole_course_page_gets_a_contents_list():
    page = ('<div id="print-site-page" class="x"><section class="print-page" id="index" heading-number="1">'
            '<h1 id="index-t">Home<a class="headerlink" href="#">¶</a></h1></section>'
            "<section class='print-page md-section' id='section-2' heading-number='2'>\n<h1>Setup<a class='h'></a>"
            '<section class="print-page" id="setup" heading-number="2.1"><h1 id="s">Setup <abbr>GPU</abbr>'
            '<a class="headerlink"></a></h1></section></section></div>')
    out = print_contents.add_contents(page)
    assert '<a href="#index">1 Home</a>' in out and '<a href="#setup">2.1 Setup GPU</a>' in out
    assert out.index("course-print-contents") < out.index('<section class="print-page"')
    assert print_contents.add_contents(out) == out
    assert not re.search(r"<h\d", out[:out.index("<section")]), "the page's first heading must stay its first <h1>"
