"""Every page states its prerequisites right after its title, and each comes earlier in the nav.

The line is `<!-- prereqs: a/b.md c/d.md -->` or `<!-- prereqs: none -->` (paths relative to docs/);
course/prereqs.py renders it as a visible "Prerequisites:" paragraph.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course import directives, prereqs  # noqa: E402

DOCS = ROOT / "docs"
NAV = prereqs.nav_order()
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "assets" not in p.parts)


def test_nav_is_read():
    assert "index.md" in NAV and "setup/first-kernel.md" in NAV
    assert NAV.index("setup/first-kernel.md") < NAV.index("memory-model/coalescing.md")


@pytest.mark.parametrize("page", PAGES)
def test_page_lists_prerequisites_after_its_title(page):
    text = (DOCS / page).read_text()
    listed = prereqs.parse(text)
    assert listed is not None, f"docs/{page} has no `<!-- prereqs: ... -->` line (use `none` if it needs nothing)"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[0].startswith("# ") and prereqs.LINE.match(lines[1]), \
        f"docs/{page}: the prereqs line must be the first thing after the title"
    assert len(prereqs.LINE.findall(text)) == 1, f"docs/{page} has more than one prereqs line"
    for rel in listed:
        assert (DOCS / rel).is_file(), f"docs/{page} lists {rel}, which does not exist"
        assert rel != page, f"docs/{page} lists itself"
        if page in NAV:
            assert rel in NAV, f"docs/{page} lists {rel}, which is not in the nav"
            assert NAV.index(rel) < NAV.index(page), \
                f"docs/{page} lists {rel}, which comes later in the nav: reorder or drop it"


def test_render_links_relative_to_the_page():
    out = prereqs.render("# T\n\n<!-- prereqs: setup/first-kernel.md -->\n", "memory-model/coalescing.md")
    assert "[Your first kernel](../setup/first-kernel.md)" in out and "Prerequisites:" in out
    assert re.search(r"Prerequisites:\*\* no earlier page\.", prereqs.render("<!-- prereqs: none -->", "index.md"))


def test_an_optional_chapter_is_offered_as_a_refresher_not_required():
    out = prereqs.paragraph("setup/index.md cpp/index.md", "gpu-intro/index.md")
    required, _, optional = out.partition("Optional refresher")
    assert "../setup/index.md" in required and "../cpp/index.md" in optional
    assert "Optional" not in prereqs.paragraph("cpp/pointers.md", "cpp/types.md"), \
        "within the refresher, its own pages are prerequisites"


# A second statement of prerequisites beside the generated one (they disagreed: "none", then "a GPU").
_HAND_WRITTEN = re.compile(r"^(?:\*\*Prerequisites:?\*\*|#+\s*Prerequisites\b)", re.MULTILINE | re.IGNORECASE)


@pytest.mark.parametrize("page", PAGES)
def test_prerequisites_are_stated_once(page):
    text = directives.FENCE.sub("", (DOCS / page).read_text())
    assert not _HAND_WRITTEN.search(text), \
        f"docs/{page} states prerequisites by hand beside its prereqs line: list pages there, and write " \
        f"what is not a page (hardware, software, skills) under **You will need:**"


# Pages that are lists or references rather than lessons: no "What you now know" / "Further reading".
NOT_LESSONS = {"index.md", "glossary.md", "kernel-index.md", "contributing.md"}


def _is_lesson(page: str) -> bool:
    name = page.rsplit("/", 1)[-1]
    return page not in NOT_LESSONS and name not in ("index.md", "exercises.md")


@pytest.mark.parametrize("page", [p for p in PAGES if _is_lesson(p)])
def test_lesson_ends_with_what_you_now_know_and_further_reading(page):
    text = (DOCS / page).read_text()
    heads = re.findall(r"^## (.+?)\s*$", text, re.MULTILINE)
    assert heads[-2:] == ["What you now know", "Further reading"], \
        f"docs/{page} must end with '## What you now know' then '## Further reading' (its last sections: {heads[-2:]})"
    known = text.split("## What you now know", 1)[1].split("## Further reading", 1)[0]
    bullets = re.findall(r"^- ", known, re.MULTILINE)
    assert 1 <= len(bullets) <= 4, f"docs/{page}: 'What you now know' should have 1 to 4 bullets, has {len(bullets)}"
    reading = text.split("## Further reading", 1)[1]
    assert re.search(r"\]\(https://", reading), f"docs/{page}: 'Further reading' links to nothing"
