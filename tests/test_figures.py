"""The figures under docs/assets/figures/ are what course/figures/ draws (beside the timelines that
scripts/timeline_svg.py draws from the GPU record), legible, and each is shown on a page with alt text
(tests/test_browser_pages.py checks that they load there)."""

from __future__ import annotations

import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course import figures  # noqa: E402

# The timeline figures are drawn from the GPU record by scripts/timeline_svg.py (checked by
# tests/test_timeline_svg.py), not by course/figures/.
_spec = importlib.util.spec_from_file_location("timeline_svg", ROOT / "scripts" / "timeline_svg.py")
timeline_svg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timeline_svg)
TIMELINES = {p.name for p in timeline_svg.outputs()}

NS = "{http://www.w3.org/2000/svg}"
EMBED = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]*assets/figures/(?P<name>[\w.-]+\.svg))\)")


def _luminance(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_every_drawn_figure_is_committed_and_nothing_else():
    assert {p.parent for p in timeline_svg.outputs()} == {figures.OUT}
    assert not TIMELINES & set(figures.FIGURES), "course/figures/ and scripts/timeline_svg.py draw the same file"
    committed = {p.name for p in figures.OUT.glob("*.svg")}
    drawn = set(figures.FIGURES) | TIMELINES
    assert committed == drawn, \
        f"docs/assets/figures/ holds {sorted(committed)}; course/figures/ draws {sorted(figures.FIGURES)} " \
        f"and scripts/timeline_svg.py {sorted(TIMELINES)}"


@pytest.mark.parametrize("name", sorted(figures.FIGURES))
def test_committed_figure_is_what_the_script_draws(name):
    assert (figures.OUT / name).read_text() == figures.FIGURES[name](), \
        f"docs/assets/figures/{name} differs from what course/figures/ draws: run `python -m course.figures`"


@pytest.mark.parametrize("name", sorted(figures.FIGURES))
def test_figure_is_legible_on_its_own_card(name):
    """An opaque light card behind everything, and every text at least 4.5:1 against what lies under it."""
    root = ET.fromstring(figures.FIGURES[name]())
    assert root.get("width") and root.get("height") and root.find(f"{NS}title").text
    shapes = [e for e in root if e.tag in (f"{NS}rect", f"{NS}text")]
    card = shapes[0]
    assert card.tag == f"{NS}rect" and card.get("fill") == figures.CARD and card.get("x") == "0"
    rects: list[tuple[float, float, float, float, str]] = []
    bad = []
    for e in shapes:
        if e.tag == f"{NS}rect":
            if e.get("fill", "none") != "none":
                rects.append((float(e.get("x")), float(e.get("y")), float(e.get("width")), float(e.get("height")),
                              e.get("fill")))
            continue
        x, y, size = float(e.get("x")), float(e.get("y")), float(e.get("font-size"))
        under = [f for (rx, ry, rw, rh, f) in rects if rx <= x <= rx + rw and ry <= y - size / 3 <= ry + rh]
        behind = under[-1] if under else figures.CARD
        ratio = contrast(e.get("fill"), behind)
        if ratio < 4.5:
            bad.append(f"{e.text!r}: {e.get('fill')} on {behind} is {ratio:.1f}:1")
        assert size >= 10, f"{e.text!r} is drawn at {size} px"
    assert not bad, f"{name}: text below 4.5:1 contrast: {bad}"


def test_every_figure_is_shown_on_a_page_with_alt_text():
    shown: dict[str, list[str]] = {}
    for md in (ROOT / "docs").rglob("*.md"):
        for m in EMBED.finditer(md.read_text()):
            assert m["alt"].strip(), f"{md.relative_to(ROOT)} shows {m['name']} without alt text"
            assert (md.parent / m["src"]).resolve() == (figures.OUT / m["name"]).resolve(), \
                f"{md.relative_to(ROOT)}: {m['src']} does not point at docs/assets/figures/{m['name']}"
            shown.setdefault(m["name"], []).append(md.relative_to(ROOT).as_posix())
    missing = sorted(set(figures.FIGURES) - set(shown))
    assert not missing, f"figures no page shows: {missing}"
