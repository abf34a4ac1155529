"""Tabs inside fenced code blocks survive: Python-Markdown turns every tab into spaces before the
fences are highlighted, so a Makefile recipe copied from a page would fail with "missing separator".
A preprocessor that runs after pymdownx.snippets has pulled the file in, and before that conversion,
swaps tabs inside fences for a private-use character, which the hook's on_page_content turns back into
a tab in the HTML (what the copy button copies).
"""

from __future__ import annotations

import re

from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

TAB_STANDIN = "\ue009"  # a private-use character: never in a course file
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})")


def keep_tabs_in_fences(lines: list[str]) -> list[str]:
    """Replace tabs inside fenced blocks (after the fence's own indentation) with TAB_STANDIN."""
    out, fence, indent = [], None, ""
    for line in lines:
        if fence is None:
            m = _FENCE_OPEN.match(line)
            if m:
                fence, indent = m["fence"], m["indent"]
            out.append(line)
            continue
        body = line[len(indent):] if line.startswith(indent) else line
        if body.strip().startswith(fence[0] * len(fence)) and not body.strip().strip(fence[0]):
            fence = None
            out.append(line)
            continue
        out.append(line[: len(line) - len(body)] + body.replace("\t", TAB_STANDIN))
    return out


class _KeepTabs(Preprocessor):
    def run(self, lines):
        return keep_tabs_in_fences(lines)


class KeepTabsExtension(Extension):
    def extendMarkdown(self, md):
        # After pymdownx.snippets (32), before Python-Markdown's tab expansion (30).
        md.preprocessors.register(_KeepTabs(md), "course_keep_tabs", 31)



def restore_tabs(html: str) -> str:
    return html.replace(TAB_STANDIN, "\t")
