"""A lighter search index: every reader's first search downloads search/search_index.json whole.

The theme's search plugin indexes each section's full text, code listings and recorded output included,
and a search result shows only the first lines of a section. After it has written the index
(hooks.py's on_post_build), `trim` keeps each section's opening paragraph as written, for the result's
preview, and replaces the rest by its distinct words, once each, less the English stop words that the
search drops anyway: every word a reader can search for is still there, in a fraction of the bytes.
Before that, `exclude` marks what is not worth finding at all (hooks.py's on_page_content): the
verification badge, the "not run by the tests" notes, the prerequisites line and Mermaid diagrams'
source.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

# The theme's search skips an element with this attribute (and then removes the attribute from the page).
_EXCLUDE = ' data-search-exclude="yes"'
_NOT_WORTH_FINDING = re.compile(r'<(?:div|p) class="(?:course-badge|course-run-note|course-prereqs)[^"]*"'
                                r'|<pre class="mermaid"')
# The English stop words of lunr's stopWordFilter (the index's pipeline): a search never matches them.
_STOP = frozenset(
    "a able about across after all almost also am among an and any are as at be because been but by can cannot "
    "could dear did do does either else ever every for from get got had has have he her hers him his how however "
    "i if in into is it its just least let like likely may me might most must my neither no nor not of off often "
    "on only or other our own rather said say says she should since so some than that the their them then there "
    "these they this tis to too twas us wants was we were what when where which while who whom why will with would "
    "yet you your".split())
# Characters that never belong to a searchable word (the search's separator splits at most of them).
_WORD = re.compile(r"[^\s,:;!=\[\](){}<>\"'/`|*+&^%#@?$~]+")
_OPENING = re.compile(r"\s*(<p>.*?</p>)", re.DOTALL)
_PREVIEW_CHARS = 600  # an opening paragraph longer than this is not kept whole: the preview shows less


def exclude(page_html: str) -> str:
    """The page with the elements not worth finding marked for the search to skip."""
    return _NOT_WORTH_FINDING.sub(lambda m: m[0].replace(" class=", _EXCLUDE + " class=", 1), page_html)


def _plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def trim_text(text: str) -> str:
    """A section's indexed text: its opening paragraph as written, then every other distinct word once."""
    m = _OPENING.match(text)
    opening = m[1] if m and len(m[1]) <= _PREVIEW_CHARS else ""
    rest = text[m.end():] if opening else text
    seen = {w.lower() for w in _WORD.findall(_plain(opening))}
    words = []
    for word in _WORD.findall(_plain(rest)):
        word = word.strip(".")
        key = word.lower()
        if len(word) > 1 and key not in _STOP and key not in seen:
            seen.add(key)
            words.append(word)
    bag = html.escape(" ".join(words), quote=False)
    return opening + (f" <p>{bag}</p>" if bag else "")


def trim(index: Path) -> tuple[int, int]:
    """Rewrite the search index in place; its size in bytes before and after."""
    before = index.stat().st_size
    data = json.loads(index.read_text(encoding="utf-8"))
    for doc in data["docs"]:
        doc["text"] = trim_text(doc["text"])
    index.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return before, index.stat().st_size
