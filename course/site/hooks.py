"""The course's MkDocs hooks (mkdocs.yml: hooks), one module for the whole site.

- A badge under each page's title: where its GPU examples last passed, or that some have not passed on
  a GPU for their current code (badge.py).
- Every directive a page writes as an HTML comment (course/directives.py parses them) is rendered
  through one table below, in four stages: claims (course/claims.py: a record that does not support one
  is a warning naming the page's line, so `mkdocs build --strict` fails); the prereqs line; the sections
  generated from the record (results, plots, recorded output, the record summary, the kernel index);
  the visible run notes.
- Tabs inside fenced code blocks survive (tabs.py).
- A first build is long: it says how far it has got, a line per chapter and per tenth of the pages written.
- After the build, the search index is trimmed (search_index.py) and the whole-course page gets a contents
  list (print_contents.py).
"""

from __future__ import annotations

import html
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from course import chapters, claims, directives, items, prereqs, record  # noqa: E402
from course.site import (badge, kernel_index, overview, plots, print_contents, profile_card, results,  # noqa: E402
                         search_index, sittings, tabs)

log = logging.getLogger("mkdocs.plugins.course")

_record: dict = {}
_awaiting: dict = {}
_nav_order: list[str] = []  # docs-relative paths of the pages, in the order the nav lists them
_nav: list = []
_repo_url: str | None = None
_TITLE = directives.re.compile(r"^# .+$", directives.re.MULTILINE)


def on_config(config, **kwargs):
    global _record, _awaiting, _nav_order, _nav, _repo_url
    _record = record.load()
    _awaiting = record.load_awaiting()
    _nav = config.get("nav") or []
    _nav_order = [p for p in kernel_index.flatten_nav(_nav) if p.endswith((".md", ".ipynb"))]
    _repo_url = overview.repo_url(config.extra.get("repository"))
    if config.extra.get("repository"):
        # The published site (REPO_URL set): the theme links the repository in the header. Not from the
        # `origin` fallback: the theme's script then asks the host's API for the repository's stars, a
        # request to another host that a local or test build must not make.
        config.repo_url = _repo_url
        config.repo_name = _repo_url.rstrip("/").rsplit("/", 2)[-2] + "/" + _repo_url.rstrip("/").rsplit("/", 1)[-1]
    config.markdown_extensions.append(tabs.KeepTabsExtension())
    return config


class _Progress:
    """A line per chapter while pages are rendered and a line per tenth while they are written: a first
    build takes minutes, and MkDocs itself is silent between its first lines and the end."""

    def __init__(self):
        self.total, self.rendered, self.written, self.folder = 0, 0, 0, None

    def start(self, total: int) -> None:
        self.total, self.rendered, self.written, self.folder = total, 0, 0, None

    def rendering(self, src_uri: str) -> None:
        folder = src_uri.split("/")[0] if "/" in src_uri else ""
        if folder != self.folder:
            self.folder = folder
            where = f"docs/{folder}/" if folder else "the pages at the top of docs/"
            log.info(f"course: {self.rendered} of {self.total} pages rendered; now {where}")
        self.rendered += 1

    def wrote(self) -> None:
        self.written += 1
        step = max(1, self.total // 10)
        if self.written % step == 0 or self.written == self.total:
            log.info(f"course: {self.written} of {self.total} pages written")


_progress = _Progress()


def on_files(files, config, **kwargs):
    _progress.start(len(files.documentation_pages()))
    return files


def on_page_content(html, page, config, files, **kwargs):
    return search_index.exclude(tabs.restore_tabs(html))


def on_post_page(output, page, config, **kwargs):
    _progress.wrote()
    return output


def on_post_build(config, **kwargs):
    # Both files are written by plugins' on_post_build, which runs before the hooks'.
    whole_course = Path(config["site_dir"]) / "print_page" / "index.html"
    if whole_course.is_file():
        whole_course.write_text(print_contents.add_contents(whole_course.read_text(encoding="utf-8")), encoding="utf-8")
    index = Path(config["site_dir"]) / "search" / "search_index.json"
    if index.is_file():
        before, after = search_index.trim(index)
        log.info(f"course: search index trimmed from {before // 1024} KiB to {after // 1024} KiB")


def _indent(text: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in text.splitlines()) + "\n"


def renderers(src: Path, src_uri: str, plotted: frozenset = frozenset(), goals: tuple = ()) -> dict:
    """Directive name -> its renderer (a Directive -> the text that replaces it). `plotted`: the programs
    the page plots itself; `goals`: its claims that state a goal, which lead its results sections."""
    unlisted = list(goals)  # a goal leads the page's first results section of its program only

    def results_section(d):
        paths = d.args["path"].split()
        mine = tuple(g for g in unlisted if g[0] in paths)
        unlisted[:] = [g for g in unlisted if g not in mine]
        return _indent(results.results_table(d.args["path"], _record, plotted, mine, _awaiting), d.indent)

    return {
        "prereqs:": lambda d: prereqs.paragraph(d.args["list"], src_uri),
        "course:results": results_section,
        "course:plot": lambda d: _indent(plots.plot_svg(d.args["path"], d.args["opts"], _record), d.indent),
        "course:output": lambda d: _indent(results.recorded_output(d.args["path"], d.args["args"], _record), d.indent),
        "course:record-summary": lambda d: results.record_summary(_record, _awaiting),
        "course:sitting-time": lambda d: sittings.sitting_time(_record),
        "course:kernel-index": lambda d: kernel_index.kernel_index(src, _record, _nav_order),
        "course:chapters": lambda d: chapters.table(_nav, log.warning),
        "course:clone": lambda d: overview.clone(_repo_url),
        "course:cpu-exercises": lambda d: overview.cpu_exercises(),
        "course:exercises": lambda d: overview.exercise_count(d.args["chapter"], log.warning),
        "course:profile-card": lambda d: _indent(profile_card.profile_card(d.args["label"], d.args["vs"], _record), d.indent),
        "claim:": lambda d: claims.render_one(d, _record, src_uri, log.warning, _awaiting),
        # Why the tests skip a block is for maintainers: kept in the built page's source, not shown.
        "pytest.mark.skip": lambda d: (f'{d.indent}<!-- not run by the tests: '
                                       f'{html.escape(d.args["reason"]).replace("--", "- -")} -->\n'),
        "pytest.mark.gpu": lambda d: (f'{d.indent}<p class="course-run-note course-needs-gpu">Runs on a GPU; '
                                      f'checked in the GPU record</p>\n'),
    }


def _stage(markdown: str, name: str, table: dict) -> str:
    return directives.render(markdown, {k: v for k, v in table.items() if k in directives.stage(name)})


def on_page_markdown(markdown, page, config, files, **kwargs):
    _progress.rendering(page.file.src_uri)
    src = Path(page.file.abs_src_path)
    goals = tuple((d.args["path"], d.args["opts"]) for d in claims.find(markdown) if "goal_" in d.args["opts"])
    # Claims first, in the page's own text: a claim's warning names its line in the page's source.
    markdown = _stage(markdown, "claims", renderers(src, page.file.src_uri))
    markdown = _stage(markdown, "page", renderers(src, page.file.src_uri))  # the page's "Prerequisites:" line
    text = badge.badge_html(items.page_gpu_items(src), _record, badge.cpu_example_count(src), _awaiting,
                            badge.sanitizer_summary(src, _record))
    if text:
        m = _TITLE.search(markdown)
        at = m.end() if m else 0
        markdown = markdown[:at] + "\n\n" + text + "\n\n" + markdown[at:]
    plotted = frozenset(d.args["path"].split()[0] for d in directives.find(markdown, {"course:plot"}))
    table = renderers(src, page.file.src_uri, plotted, goals)
    for stage in ("generated", "notes"):
        markdown = _stage(markdown, stage, table)
    return markdown
