"""What helps a reader read: screenshots of key pages, the print view, glossary tooltips, measured
figures' provenance, verification badges, chapter openings, folded answers and the kernel index.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import browser_support as bs
from browser_driver import (DESKTOP, PHONE, first_on_page, format_by_page, new_context, open_print_page,
                            survives_a_hung_browser, wait_rendered)

from course import programs, record


ROOT = bs.ROOT


def _key_pages(crawl) -> list[str]:
    """The home page, the first page with a diagram, with maths, with a results table, the kernel
    index and the print page: enough for a reviewer to see every kind of content."""
    pages = {p: i for p, i in crawl["pages"].items() if p != bs.PRINT_PAGE}
    keys = [""]
    for test in (lambda i: i["diagrams"], lambda i: i["maths"], lambda i: i["results"]):
        keys += [next((p for p, i in pages.items() if test(i) and p not in keys), None)]
    keys += [p for p in ("kernel-index/",) if p in crawl["pages"]]
    return [k for k in dict.fromkeys(keys) if k is not None]


@survives_a_hung_browser
def test_screenshots_of_key_pages(browser, base_url, crawl):
    out = bs.SCREENSHOTS
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    saved = []
    for scheme in ("light", "dark"):
        context, rec = new_context(browser, base_url, color_scheme=scheme)
        page = context.new_page()
        for path in _key_pages(crawl):
            page.goto(base_url + path, wait_until="load")
            wait_rendered(page)
            expected = "slate" if scheme == "dark" else "default"
            assert page.evaluate("() => document.body.getAttribute('data-md-color-scheme')") == expected
            name = (path.strip("/").replace("/", "-") or "home") + f"-{scheme}.png"
            # The top 2400 px in the light palette, the first screen in the dark one: enough to judge
            # a page and its palette, and quick to take however long pages grow.
            height = page.evaluate("() => document.documentElement.scrollHeight")
            if scheme == "light":
                page.screenshot(path=str(out / name), full_page=True,
                                clip={"x": 0, "y": 0, "width": DESKTOP["width"], "height": min(height, 2400)})
            else:
                page.screenshot(path=str(out / name))
            saved.append(name)
        if scheme == "light":
            page.set_viewport_size(PHONE)
            for path in [p for p in _key_pages(crawl) if p != bs.PRINT_PAGE][:3]:
                page.goto(base_url + path, wait_until="load")
                wait_rendered(page)
                name = (path.strip("/").replace("/", "-") or "home") + "-phone.png"
                page.screenshot(path=str(out / name))
                saved.append(name)
        context.close()
    assert all((out / n).stat().st_size > 10_000 for n in saved), saved


@survives_a_hung_browser
def test_print_view_holds_the_whole_course_and_prints(browser, base_url, crawl):
    """The print view (mkdocs-print-site-plugin) has every page's title, and prints to a PDF."""
    pages = crawl["pages"]
    if bs.PRINT_PAGE not in pages:
        pytest.skip("no print view: mkdocs-print-site-plugin is not enabled in mkdocs.yml")
    assert not pages[bs.PRINT_PAGE].get("failed"), \
        f"the crawl could not read the print view: {pages[bs.PRINT_PAGE]['problems']}"
    titles = [i["headings"][0]["text"] for p, i in pages.items() if p != bs.PRINT_PAGE and i["headings"]]
    printed = {h["text"] for h in pages[bs.PRINT_PAGE]["headings"] if h["level"] == 1}
    missing = [t for t in titles if t not in printed]
    assert not missing, f"pages missing from the print view: {missing}"
    context, rec = new_context(browser, base_url)
    page = context.new_page()
    open_print_page(page, base_url)
    bs.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(bs.SCREENSHOTS / "print_page-light.png"))
    page.emulate_media(media="print")
    bs.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pdf = bs.SCREENSHOTS / "course.pdf"
    page.pdf(path=str(pdf), format="A4", print_background=True, page_ranges="1-40")  # a sample
    context.close()
    assert pdf.stat().st_size > 50_000
    assert not rec.external, format_by_page(rec.external)


# ----------------------------------------------------------------------------- reading aids


def test_glossary_terms_carry_their_definition(crawl):
    pages = crawl["pages"]
    empty = {p: ["an <abbr> without a definition"] for p, i in pages.items() if any(not t for t in i["abbrs"])}
    assert not empty, format_by_page(empty)
    assert sum(len(i["abbrs"]) for i in pages.values()) > 0, "no glossary term is marked on any page"


@survives_a_hung_browser
def test_glossary_tooltip_shows_on_hover(browser, base_url, crawl):
    path = next((p for p, i in crawl["pages"].items() if i["abbrs"]), None)
    assert path is not None
    context, page, abbr = first_on_page(browser, base_url, path, "article abbr")
    abbr.hover()
    page.wait_for_timeout(600)
    tooltips = re.search(r"^\s*-\s*content\.tooltips\b", bs.site_config().read_text(), re.MULTILINE)
    if tooltips:  # Material draws the definition in its own tooltip, which touch and keyboard users get too
        shown = page.evaluate("""() => Array.from(document.querySelectorAll('.md-tooltip2--active'))
            .map(t => t.textContent.trim())""")
        assert shown and any(s for s in shown), "hovering a glossary term showed no tooltip"
    else:  # the browser's own tooltip, from the title attribute
        assert abbr.get_attribute("title")
    context.close()


@survives_a_hung_browser
def test_a_measured_figure_shows_its_provenance_when_tapped(browser, base_url, site):
    """A figure from the record (a claim) names its run on hover (title) and on a tap or Tab (focus)."""
    path = next((p for p in bs.site_pages(site) if p != bs.PRINT_PAGE
                 and 'class="course-claim" tabindex="0"' in (site / p / "index.html").read_text()), None)
    if path is None:
        pytest.skip("no page shows a measured figure from the record")
    context, page, claim = first_on_page(browser, base_url, path, "article .course-claim[tabindex]")
    claim.focus()
    shown = page.evaluate("(el) => getComputedStyle(el, '::after').content", claim.element_handle())
    assert page.evaluate("(el) => document.activeElement === el", claim.element_handle())
    assert "Measured on" in shown and "records/gpu-record.json" in shown, shown
    context.close()


def test_pages_with_gpu_examples_show_their_verification_badge(site):
    missing = []
    for md in sorted(p for p in bs.DOCS.rglob("*.md") if "vendor" not in p.parts):
        if not record.page_gpu_items(md):
            continue
        rel = md.relative_to(bs.DOCS).with_suffix("")
        url = "" if rel.as_posix() == "index" else (rel.parent.as_posix() + "/" if rel.name == "index" else rel.as_posix() + "/")
        html = site / url / "index.html"
        if html.is_file() and "course-badge" not in html.read_text():
            missing.append(md.relative_to(ROOT).as_posix())
    assert not missing, f"pages with GPU examples but no verification badge: {missing}"


def _chapters() -> list[Path]:
    return sorted(d for d in bs.DOCS.iterdir() if d.is_dir() and d.name not in ("assets",) and list(d.glob("*.md")))


@pytest.mark.parametrize("chapter", _chapters(), ids=lambda d: d.name)
def test_chapter_opens_with_prerequisites_and_what_you_will_learn(chapter):
    index = chapter / "index.md"
    assert index.is_file(), f"docs/{chapter.name}/ has no index.md introducing the chapter"
    text = index.read_text()
    lower = text.lower()
    # The prerequisites are stated once, by the prereqs directive the site renders as "Prerequisites: ..."
    # (course/prereqs.py); a page that states them in its own words counts too.
    stated = [at for at in (lower.find("<!-- prereqs:"), lower.find("prerequisites")) if at >= 0]
    found = {"prerequisites": min(stated, default=-1), "what you will learn": lower.find("what you will learn")}
    missing = [k for k, at in found.items() if at < 0]
    assert not missing, f"docs/{chapter.name}/index.md does not state: {missing}"
    # "At the top": before the first section that is about something else.
    other = [m.start() for m in re.finditer(r"^##\s+(.+)$", text, re.MULTILINE)
             if not re.match(r"(prerequisites|what it builds on|what you will learn)", m.group(1).strip().lower())]
    if other:
        late = [k for k, at in found.items() if at > other[0]]
        assert not late, f"docs/{chapter.name}/index.md states {late} only after its first section"


def test_exercises_have_folded_answers(site):
    bare = []
    for html_file in sorted(site.rglob("index.html")):
        text = html_file.read_text(errors="replace")
        m = re.search(r"<h2[^>]*>\s*Exercises.*?</h2>(?P<body>.*?)(?=<h2|</article>)", text, re.S)
        if m and "<details" not in m["body"]:
            bare.append(html_file.parent.relative_to(site).as_posix())
    assert not bare, f"pages whose Exercises have no folded (??? example \"Answer\") solution: {bare}"


def test_kernel_index_lists_every_kernel_file(site):
    page = site / "kernel-index" / "index.html"
    assert page.is_file(), "the kernel index page (docs/kernel-index.md) was not built"
    html = page.read_text()
    missing = [p.rel for p in programs.all_programs() if f"<code>{p.rel}</code>" not in html]
    assert not missing, f"kernel files missing from the kernel index: {missing}"
