"""The site builds strictly, offline, with badges and generated tables in place."""

import re

import pytest

from course import programs

ROOT = programs.ROOT


# `site`: the site, built once per session with `mkdocs build --strict` and no warning printed, for a
# sub-path as a project site is served (tests/conftest.py, shared with the browser tests).


def test_no_asset_comes_from_another_host(site):
    external = []
    for page in site.rglob("*.html"):
        text = page.read_text()
        for m in re.finditer(r"""<(?:script|link|img|iframe|source)[^>]+(?:src|href)=["'](https?:)?//[^"']+""", text):
            if re.search(r"""rel=["'](canonical|alternate)""", m.group(0)):
                continue  # a link for search engines, never fetched by the browser
            external.append(f"{page.relative_to(site)}: {m.group(0)[:120]}")
    assert not external, "assets loaded from other hosts:\n" + "\n".join(external)


def test_pages_with_gpu_examples_carry_a_verification_badge(site):
    html = (site / "setup" / "device-query" / "index.html").read_text()
    assert "course-verified" in html or "course-unverified" in html


def _recorded_results_page():
    """(page's built path, its first program's recorded rows) for the first page whose results section
    over one program has every bench run of that program recorded: the generated parts must be there.
    Which page that is depends on the record (items awaiting a GPU run show a notice instead)."""
    from course import record

    rec = record.load()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        for m in re.finditer(r"<!--\s*course:results\s+(kernels/\S+)\s*-->", text):
            if f"course:plot {m[1]}" in text:  # the page draws its own plot: the section then has none
                continue
            prog = programs.program_for(m[1])
            if prog is None:  # a directive quoted as an example (contributing.md's skeleton), not a program
                continue
            try:
                rows, _ = record.passing_bench_rows(prog, rec)
            except record.NotRecorded:
                continue
            if len({b["case"] for b in rows}) > 1 and any(not b.get("peer") for b in rows):
                rel = page.relative_to(ROOT / "docs").with_suffix("")
                return (rel.parent if rel.name == "index" else rel) / "index.html", rows
    pytest.skip("no page's results section has its program's benchmarks recorded")


def test_generated_results_table_is_present(site):
    built, rows = _recorded_results_page()
    html = (site / built).read_text()
    # The implementation names appear only in the table generated from the record's BENCH lines.
    assert f"<td>{rows[0]['impl']}</td>" in html.replace("&amp;", "&") and "Measured on" in html


def test_results_sections_open_with_headline_and_plot(site):
    """Every generated results section: the headline table, then a plot, then every row folded."""
    built, _ = _recorded_results_page()
    html = (site / built).read_text()
    head, plot, folded = html.find('class="course-headline"'), html.find('<figure class="course-plot">'), html.find("Every row measured")
    assert -1 < head < plot < folded, (built, head, plot, folded)
