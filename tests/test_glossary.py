"""The glossary page (docs/glossary.md) covers every abbreviation the site's tooltips define
(snippets/abbreviations.md), with the same definition, and each entry links to a page that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GLOSSARY = DOCS / "glossary.md"
SNIPPET = ROOT / "snippets" / "abbreviations.md"
ENTRY = re.compile(r"^\*\*(?P<term>[^*\n]+)\*\*\n:\s+(?P<body>.+)$", re.MULTILINE)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _abbreviations() -> dict[str, str]:
    return dict(re.findall(r"^\*\[(.+?)\]:\s*(.+?)\s*$", SNIPPET.read_text(), re.MULTILINE))


def _entries() -> dict[str, str]:
    return {m["term"]: m["body"] for m in ENTRY.finditer(GLOSSARY.read_text())}


def test_every_abbreviation_has_a_glossary_entry_with_its_definition():
    entries = _entries()
    abbreviations = _abbreviations()
    assert abbreviations, "no abbreviations read from snippets/abbreviations.md"
    missing = [t for t in abbreviations if t not in entries]
    assert not missing, f"abbreviations without a glossary entry in docs/glossary.md: {missing}"
    differ = [t for t, d in abbreviations.items() if not entries[t].startswith(d.rstrip("."))]
    assert not differ, f"glossary definitions that differ from the tooltip's (snippets/abbreviations.md): {differ}"


def test_every_entry_links_to_the_page_that_teaches_it():
    bad = []
    for term, body in _entries().items():
        links = [m["target"] for m in LINK.finditer(body)]
        if not links:
            bad.append(f"{term}: no link to the page that teaches it")
        for target in links:
            path, _, anchor = target.partition("#")
            page = DOCS / path
            if not page.is_file():
                bad.append(f"{term}: {target} does not exist")
            elif anchor and anchor not in {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                                           for h in re.findall(r"^#+\s+(.+)$", page.read_text(), re.MULTILINE)}:
                bad.append(f"{term}: {target} has no heading #{anchor}")
    assert not bad, "glossary entries:\n" + "\n".join(bad)


def test_glossary_is_in_the_nav_before_the_kernel_index():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^\s*- Glossary: glossary\.md\s*$", nav, re.MULTILINE), "docs/glossary.md is not in the nav"
    assert nav.index("glossary.md") < nav.index("kernel-index.md")
