"""The course's MkDocs hooks (mkdocs.yml: hooks), one module for the whole site.

- A badge under each page's title: where its GPU examples last passed, or that some have not passed on
  a GPU for their current code (badge.py).
- Every directive a page writes as an HTML comment (course/directives.py parses them) is rendered
  through one table below, in four stages: claims (course/claims.py: a record that does not support one
  is a warning naming the page's line, so `mkdocs build --strict` fails); the prereqs line; the sections
  generated from the record (results, plots, recorded output, the record summary, the kernel index);
  the visible run notes.
- Tabs inside fenced code blocks survive (tabs.py).
"""

from __future__ import annotations

import html
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from course import claims, directives, items, prereqs, record  # noqa: E402
from course.site import badge, kernel_index, plots, results, tabs  # noqa: E402

log = logging.getLogger("mkdocs.plugins.course")

_record: dict = {}
_awaiting: dict = {}
_nav_order: list[str] = []  # docs-relative paths of the pages, in the order the nav lists them
_TITLE = directives.re.compile(r"^# .+$", directives.re.MULTILINE)


def on_config(config, **kwargs):
    global _record, _awaiting, _nav_order
    _record = record.load()
    _awaiting = record.load_awaiting()
    _nav_order = [p for p in kernel_index.flatten_nav(config.get("nav") or []) if p.endswith((".md", ".ipynb"))]
    config.markdown_extensions.append(tabs.KeepTabsExtension())
    return config


def on_page_content(html, page, config, files, **kwargs):
    return tabs.restore_tabs(html)


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
        "course:kernel-index": lambda d: kernel_index.kernel_index(src, _record, _nav_order),
        "claim:": lambda d: claims.render_one(d, _record, src_uri, log.warning, _awaiting),
        "pytest.mark.skip": lambda d: (f'{d.indent}<p class="course-run-note course-not-run">Not run by the tests: '
                                       f'{html.escape(d.args["reason"])}</p>\n'),
        "pytest.mark.gpu": lambda d: (f'{d.indent}<p class="course-run-note course-needs-gpu">Runs on a GPU; '
                                      f'checked in the GPU record</p>\n'),
    }


def _stage(markdown: str, name: str, table: dict) -> str:
    return directives.render(markdown, {k: v for k, v in table.items() if k in directives.stage(name)})


def on_page_markdown(markdown, page, config, files, **kwargs):
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
