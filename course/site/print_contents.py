"""A contents list for the whole course on one page (the print-site plugin's page).

The plugin's own table of contents is copied by a script from the right-hand sidebar, which
`toc.integrate` moves into the left one, and the print page hides the left one, so it is switched off
(mkdocs.yml). `add_contents` (hooks.py's on_post_build, after the plugin has written the page) lists
every chapter and page of the combined page instead, numbered as the page numbers them and linked to
them, at its top.
"""

from __future__ import annotations

import html
import re

# A chapter of the nav (written by the plugin with single quotes) or a page (double quotes), and its title.
_SECTION = re.compile(r"""<section class=(?P<q>['"])print-page(?: md-section)?(?P=q) id=(?P=q)(?P<id>[^'"]+)(?P=q) """
                      r"""heading-number=(?P=q)(?P<number>[\d.]+)(?P=q)>\s*<h1[^>]*>(?P<title>.*?)<a """, re.DOTALL)
_START = re.compile(r'<div id="print-site-page"[^>]*>')
MARK = 'id="course-print-contents"'


def _text(fragment: str) -> str:
    return html.escape(" ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split()), quote=False)


def contents(page_html: str) -> str:
    """The contents list (HTML) of the combined page: chapters, each with its pages nested under it."""
    out, open_chapter = ['<nav class="course-print-contents" ' + MARK + ' aria-label="Contents">',
                         # Not a heading: the page's headings start with the first page's <h1>.
                         "<p><strong>Contents</strong></p>", "<ol>"], False
    for m in _SECTION.finditer(page_html):
        inner = "." in m["number"]
        if open_chapter and not inner:
            out.append("</ol></li>")
            open_chapter = False
        item = f'<a href="#{m["id"]}">{m["number"]} {_text(m["title"])}</a>'
        if m["q"] == "'":  # a chapter: its pages follow, nested
            out.append(f"<li>{item}<ol>")
            open_chapter = True
        else:
            out.append(f"<li>{item}</li>")
    if open_chapter:
        out.append("</ol></li>")
    return "\n".join(out + ["</ol>", "</nav>"])


def add_contents(page_html: str) -> str:
    """The combined page with its contents list at the top (once: a page that has one is left alone)."""
    start = _START.search(page_html)
    if start is None or MARK in page_html:
        return page_html
    return page_html[:start.end()] + contents(page_html) + page_html[start.end():]
