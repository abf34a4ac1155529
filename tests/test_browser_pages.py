"""Every page of the site as the crawl found it: it loads offline without errors, its links and
anchors resolve, its diagrams and maths are drawn, it is readable (alt text, headings, contrast), and
nothing scrolls sideways.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

import browser_support as bs
from browser_driver import DESKTOP, PHONE_SCREEN, format_by_page


# Where a phone reader would have to scroll sideways on a prose page: pages listed here may (wide tables
# are scrolled inside their own box by the theme, so nothing should need to be listed).
PHONE_EXEMPT: set[str] = set()


# ----------------------------------------------------------------------------- loading, offline


def test_every_page_loads_without_errors_or_failed_requests(crawl):
    rec = crawl["recorder"]
    problems = {p: list(i["problems"]) for p, i in crawl["pages"].items() if i["problems"]}
    for where in (rec.errors, rec.failed):
        for page, items in where.items():
            problems.setdefault(page, []).extend(items)
    assert crawl["pages"], "the built site has no pages"
    assert not problems, "problems while loading pages:\n" + format_by_page(problems)


def test_no_request_leaves_the_machine(crawl):
    external = crawl["recorder"].external
    assert not external, ("requests to other hosts (fonts, maths, diagrams and search must be served "
                          "from the site itself):\n" + format_by_page(external))


def test_diagrams_and_maths_are_drawn(crawl):
    bad = {}
    for path, info in crawl["pages"].items():
        flat = [d for d in info["diagrams"] if d["height"] < 20]
        if flat:
            bad[path] = [f"{len(flat)} mermaid diagram(s) drawn with no height"]
        if not all(info["maths"]):
            bad.setdefault(path, []).append("maths left untypeset")
    assert not bad, format_by_page(bad)


def test_every_listed_kernel_shows_its_profile_card(crawl):
    """Each kernel course/profile_cards.py lists has its card element (or its one-line notice) on its
    page as built: the directive rendered, and was not left as a comment."""
    from course import profile_cards

    missing = {}
    for card in profile_cards.CARDS:
        path = card.page[len("docs/"):-len(".md")] + "/"
        if card.label not in crawl["pages"].get(path, {}).get("cards", []):
            missing.setdefault(path, []).append(f"no profile card {card.label}")
    assert not missing, format_by_page(missing)


def test_mermaid_loads_only_where_a_diagram_is_drawn(crawl, site):
    """Mermaid (3.5 MB) is fetched only by pages that draw a diagram (overrides/main.html), and there
    every diagram of the built page is drawn."""
    bad: dict[str, list[str]] = {}
    expected = {}
    for path, info in crawl["pages"].items():
        html = (site / path / "index.html").read_text(errors="replace")
        expected[path] = want = len(re.findall(r"""<pre class=["']mermaid["']""", html))
        if not want and info["mermaidLoaded"]:
            bad[path] = ["loads Mermaid but draws no diagram"]
        if want and not info["mermaidLoaded"]:
            bad[path] = [f"has {want} diagram(s) but Mermaid was not loaded"]
        if want and info["diagramsDrawn"] != want:
            bad.setdefault(path, []).append(f"drew {info['diagramsDrawn']} of its {want} diagram(s)")
    with_diagrams = [p for p, n in expected.items() if n and p != bs.PRINT_PAGE]
    assert with_diagrams, "no page of the built site has a Mermaid diagram: nothing was checked"
    assert len(with_diagrams) < len(expected) - 1, "every page has a diagram: loading Mermaid lazily is not checked"
    if bs.PRINT_PAGE in expected:
        assert expected[bs.PRINT_PAGE] == sum(n for p, n in expected.items() if p != bs.PRINT_PAGE), \
            "the print view does not hold every page's diagrams"
    assert not bad, "Mermaid loaded where no diagram is drawn, or diagrams not drawn:\n" + format_by_page(bad)


# ----------------------------------------------------------------------------- links


def test_internal_links_and_anchors_resolve(crawl, base_url, site):
    pages = crawl["pages"]
    ids = {path: set(info["ids"]) for path, info in pages.items()}
    broken: dict[str, list[str]] = {}
    base = urlsplit(base_url)
    for path, info in pages.items():
        for link in info["links"]:
            url = urlsplit(link["href"])
            if url.scheme not in ("http", "https") or (url.hostname, url.port) != (base.hostname, base.port):
                continue  # external links may exist; they are never fetched by the tests
            if not url.path.startswith(bs.SUBPATH):
                broken.setdefault(path, []).append(f"{link['raw']!r} ({link['text']}): leaves {bs.SUBPATH}")
                continue
            target_path = unquote(url.path)[len(bs.SUBPATH):]
            target = site / target_path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.setdefault(path, []).append(f"{link['raw']!r} ({link['text']}): no such file")
                continue
            fragment = unquote(url.fragment)
            if not fragment or target.suffix != ".html":
                continue
            key = target_path if target_path.endswith("/") or target_path == "" else target_path
            known = ids.get(key)
            if known is None:  # a page the crawl did not visit: read its ids from the HTML
                known = set(re.findall(r"""\bid=["']([^"']+)["']""", target.read_text(errors="replace")))
            if fragment not in known:
                broken.setdefault(path, []).append(f"{link['raw']!r} ({link['text']}): no anchor #{fragment}")
    assert not broken, "broken links:\n" + format_by_page(broken)


def test_previous_and_next_follow_the_whole_nav(crawl, base_url):
    pages = crawl["pages"]
    chain, seen = [], set()
    url = base_url
    while url and url not in seen:
        seen.add(url)
        path = url[len(base_url):]
        chain.append(path)
        info = pages.get(path)
        if info is None:
            break
        nxt = info["next"]
        if nxt:
            assert pages.get(nxt[len(base_url):], {}).get("prev") == url, \
                f"/{nxt[len(base_url):]}'s 'Previous' does not lead back to /{path}"
        url = nxt
    missing = sorted(set(pages) - set(chain) - {bs.PRINT_PAGE})
    assert not missing, f"pages not reachable by 'Next' from the home page: {missing}"
    if bs.PRINT_PAGE in pages:  # the print view is listed in the navigation, after the course
        assert any(urlsplit(a["href"]).path == bs.SUBPATH + bs.PRINT_PAGE for a in pages[""]["links"]), \
            "the home page's navigation does not link to the print view"


# Pages whose embedded kernels still hold a line too long for the column at 1280 px (every kernel file now
# keeps to 118 columns, so none). The test fails when a listed page no longer needs its place, so the list
# only shrinks.
CODE_WIDTH_WAITING: set[str] = set()


def test_no_code_block_scrolls_sideways_on_a_desktop(crawl):
    """At 1280 px, every embedded program and command fits its column (reader.css widens the column for
    code; kernels keep to about 120 columns). Program output may scroll (browser_support.CODE_OVERFLOW_JS)."""
    wide = {p: [f"a block {o['width']} px wide holds a line of {o['columns']} characters: {o['line']!r}"
                for o in i["codeOverflow"]]
            for p, i in crawl["pages"].items() if i["codeOverflow"] and p not in CODE_WIDTH_WAITING}
    assert not wide, f"code blocks that scroll sideways at {DESKTOP['width']} px:\n" + format_by_page(wide)
    fixed = sorted(p for p in CODE_WIDTH_WAITING if p in crawl["pages"] and not crawl["pages"][p]["codeOverflow"])
    assert not fixed, f"these pages' code fits now: remove them from CODE_WIDTH_WAITING: {fixed}"


def test_no_horizontal_scrolling_on_a_phone(crawl):
    wide = {p: [f"page is {i['phone']['scrollWidth']} px wide in a {i['phone']['clientWidth']} px viewport; "
                f"too wide: {i['phone']['wide']}"]
            for p, i in crawl["pages"].items()
            if p not in PHONE_EXEMPT and i["phone"]["scrollWidth"] > i["phone"]["clientWidth"]}
    assert not wide, "horizontal scrolling at phone width:\n" + format_by_page(wide)


def test_first_prose_starts_on_a_phones_first_screen(crawl):
    """At 390 px, a page's first sentence (not the verification box, not the prerequisites) starts within
    the first screen: a reader sees what the page is about before scrolling."""
    late = {p: [f"first prose starts at {i['firstProse']['top']} px, below the {i['firstProse']['screen']} px "
                f"screen: {i['firstProse']['text']!r}"]
            for p, i in crawl["pages"].items()
            if i.get("firstProse") and i["firstProse"]["top"] >= i["firstProse"]["screen"]}
    measured = [p for p, i in crawl["pages"].items() if i.get("firstProse")]
    assert len(measured) > len(crawl["pages"]) // 2, "first prose found on too few pages: the check is broken"
    assert not late, f"pages whose prose starts below the first screen at {PHONE_SCREEN['width']} px:\n" + \
        format_by_page(late)


def test_no_results_table_scrolls_sideways_on_a_desktop(crawl):
    """At 1280 px, every table (results headlines and every row measured included, every fold open) fits
    its column."""
    wide = {p: [f"a table {o['width']} px wide scrolls by {o['over']} px: {o['head']!r}" for o in i["tableOverflow"]]
            for p, i in crawl["pages"].items() if i.get("tableOverflow")}
    assert not wide, f"tables that scroll sideways at {DESKTOP['width']} px:\n" + format_by_page(wide)


def test_charts_fill_the_column_with_readable_labels(crawl):
    """Every chart drawn from the record shows one drawing, the column's whole width on a desktop, with
    labels of at least 11 px on a desktop and on a phone (course/svg.py draws one for each)."""
    bad: dict[str, list[str]] = {}
    charts = 0
    for path, info in crawl["pages"].items():
        for screen, found in (info.get("plots") or {}).items():
            for plot in found:
                charts += 1
                if plot["shown"] != 1:
                    bad.setdefault(path, []).append(f"[{screen}] {plot['shown']} drawings shown: {plot['title']!r}")
                    continue
                if plot["textPx"] < 11:
                    bad.setdefault(path, []).append(f"[{screen}] labels {plot['textPx']:.1f} px: {plot['title']!r}")
                if screen == "desktop" and plot["fill"] < 0.9:
                    bad.setdefault(path, []).append(f"[desktop] {plot['fill']:.0%} of the column: {plot['title']!r}")
    assert not bad, "charts too narrow or with labels too small:\n" + format_by_page(bad)


# ----------------------------------------------------------------------------- accessibility


def test_every_image_has_alt_text(crawl):
    bad = {p: [f"<img src={im['src']!r}> has no alt text" for im in i["images"]
               if im["alt"] is None or (not im["alt"].strip() and not im["decorative"])]
           for p, i in crawl["pages"].items()}
    bad = {p: v for p, v in bad.items() if v}
    assert not bad, format_by_page(bad)


def test_every_figure_loads_on_its_page(crawl):
    """The SVG figures drawn by course/figures/: each is shown on some page, and loads there."""
    from course import figures

    seen: set[str] = set()
    broken = {}
    for path, info in crawl["pages"].items():
        for im in info["images"]:
            name = (im["src"] or "").rsplit("/", 1)[-1]
            if "assets/figures/" not in (im["src"] or ""):
                continue
            seen.add(name)
            if not im.get("naturalWidth"):
                broken.setdefault(path, []).append(f"{im['src']} did not load (naturalWidth 0)")
    assert not broken, "figures that did not load:\n" + format_by_page(broken)
    missing = sorted(set(figures.FIGURES) - seen)
    assert not missing, f"figures shown on no page of the built site: {missing}"


def test_heading_order_is_sane(crawl):
    bad = {}
    for path, info in crawl["pages"].items():
        levels = [h["level"] for h in info["headings"]]
        problems = []
        whole_course = path == bs.PRINT_PAGE  # one <h1> per page of the course
        if (levels.count(1) != 1 and not whole_course) or (levels and levels[0] != 1):
            problems.append(f"expected one <h1> first, got levels {levels[:8]}")
        for (a, b) in zip(info["headings"], info["headings"][1:]):
            if b["level"] > a["level"] + 1:
                problems.append(f"<h{a['level']}> {a['text']!r} is followed by <h{b['level']}> {b['text']!r}")
        if problems:
            bad[path] = problems
    assert not bad, "heading order:\n" + format_by_page(bad)


def test_text_contrast_in_both_palettes(crawl):
    bad = {}
    for path, info in crawl["pages"].items():
        for scheme, found in info["contrast"].items():
            for f in found:
                bad.setdefault(path, []).append(
                    f"[{scheme}] {f['ratio']}:1 < {f['need']}:1 <{f['tag']} class={f['cls']!r}> {f['text']!r} "
                    f"({f['color']} on {f['background']})")
    assert not bad, "text below WCAG AA contrast:\n" + format_by_page(bad, limit=200)


PAGE_HTML_LIMIT = 1_500_000  # bytes of HTML a page may weigh; the whole-course page is every page at once


def test_pages_stay_light(site):
    # What a visit costs, measured by what it downloads rather than by a clock: how long a crawl takes
    # depends on how busy the machine is, and a test must not fail by chance.
    heavy = {str(page.relative_to(site)): page.stat().st_size for page in site.rglob("*.html")
             if page.stat().st_size > PAGE_HTML_LIMIT and not str(page.relative_to(site)).startswith(bs.PRINT_PAGE)}
    assert not heavy, f"pages over {PAGE_HTML_LIMIT:,} bytes of HTML: {heavy}"
