"""Prerequisites at the top of every page.

A page states what it builds on with one line right after its title:

    <!-- prereqs: setup/first-kernel.md memory-model/coalescing.md -->
    <!-- prereqs: none -->

Paths are relative to docs/. `paragraph` (called from course/site/hooks.py's on_page_markdown) turns
the line into a visible "Prerequisites:" paragraph linking each page by its title, the one statement of
a page's prerequisites (a page writes what is not a page, such as hardware, under "You will need:").
A page of an optional chapter (course/chapters.py OPTIONAL: the C/C++ refresher, the ecosystem map)
listed by a page outside it is offered as a refresher, not required;
tests/test_prereqs.py checks that every page has the line and that each listed page exists and comes
earlier in the mkdocs.yml nav.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from course.chapters import OPTIONAL

DOCS = Path(__file__).resolve().parent.parent / "docs"
LINE = re.compile(r"^<!--\s*prereqs:\s*(?P<list>.*?)\s*-->[ \t]*$", re.MULTILINE)
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def parse(markdown: str) -> list[str] | None:
    """The docs-relative paths a page lists ([] for "none"), or None when it has no prereqs line."""
    m = LINE.search(markdown)
    if m is None:
        return None
    items = m["list"].split()
    return [] if items == ["none"] else items


def title(rel: str) -> str:
    m = _H1.search((DOCS / rel).read_text())
    return m.group(1) if m else rel


def paragraph(listed: str, src_uri: str) -> str:
    """The visible "Prerequisites:" paragraph for a prereqs line's list, with links relative to the page
    (the site hook renders the line through course/directives.py)."""
    items = [] if listed.split() == ["none"] else listed.split()
    here = posixpath.dirname(src_uri) or "."
    refreshers = [rel for rel in items if is_refresher(rel, src_uri)]
    required = [rel for rel in items if rel not in refreshers]

    def links(rels: list[str]) -> str:
        return ", ".join(f"[{title(rel)}]({posixpath.relpath(rel, here)})" for rel in rels)
    text = links(required) + "." if required else "no earlier page."
    if refreshers:
        text += f" Optional refresher, if you need it: {links(refreshers)}."
    return f"**Prerequisites:** {text}\n{{: .course-prereqs }}"


def is_refresher(rel: str, src_uri: str) -> bool:
    """Whether a listed page belongs to an optional chapter that the listing page is not part of."""
    folder = posixpath.dirname(rel)
    return f"{folder}/index.md" in OPTIONAL and posixpath.dirname(src_uri) != folder


def render(markdown: str, src_uri: str) -> str:
    """Replace the prereqs line with a visible paragraph of links, relative to the page."""
    return LINE.sub(lambda m: paragraph(m["list"], src_uri), markdown, count=1)


def nav_order(config: Path | None = None) -> list[str]:
    """The docs-relative pages in the order mkdocs.yml's nav lists them."""
    text = (config or DOCS.parent / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:"):]
    return re.findall(r"^\s*-\s*(?:[^\n]*?:\s+)?([\w./-]+\.(?:md|ipynb))\s*$", nav, re.MULTILINE)
