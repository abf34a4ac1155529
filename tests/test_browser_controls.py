"""What a reader operates on the site: search, the copy buttons, content tabs and the palette toggle."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import browser_support as bs
from browser_driver import NOTHING_COPIED, format_by_page, new_context, survives_a_hung_browser

from course import programs, record


ROOT = bs.ROOT


# ----------------------------------------------------------------------------- search


def _kernels_to_search(site: Path, limit: int = 4) -> list[tuple[str, str]]:
    """(kernel name, URL path of a page that shows it): the first kernel of each chapter."""
    chosen, chapters = [], set()
    embedders: dict[str, list[Path]] = {}
    for md in sorted(bs.DOCS.rglob("*.md")):
        for rel in record.embedded_files(md.read_text()):
            embedders.setdefault(rel, []).append(md)
    for prog in programs.all_programs():
        chapter = Path(prog.rel).parts[1]
        if chapter in chapters or prog.lang != "cuda":
            continue
        for name in re.findall(r"__global__\s+(?:void|[\w:<>]+)\s+(\w+)\s*\(", prog.path.read_text()):
            for md in embedders.get(prog.rel, []):
                rel = md.relative_to(bs.DOCS).with_suffix("")
                url = "" if rel.as_posix() == "index" else (
                    rel.parent.as_posix() + "/" if rel.name == "index" else rel.as_posix() + "/")
                html = site / url / "index.html"
                if html.is_file() and re.search(rf"\b{re.escape(name)}\b", html.read_text()):
                    chosen.append((name, url))
                    chapters.add(chapter)
                    break
            if chapter in chapters:
                break
        if len(chosen) >= limit:
            break
    return chosen


@survives_a_hung_browser
def test_search_finds_a_kernel_by_name(browser, base_url, site):
    kernels = _kernels_to_search(site)
    assert kernels, "no kernel name found on any page to search for"
    context, rec = new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url, wait_until="load")
    misses = []
    for name, url in kernels:
        hits = _search(page, name)
        if not hits:
            misses.append(f"{name}: no results")
        elif bs.SUBPATH + url not in hits:
            misses.append(f"{name}: /{url} not among {hits[:6]}")
    context.close()
    assert not rec.external, format_by_page(rec.external)
    assert not misses, "search did not find kernels by name:\n" + "\n".join(misses)


def _search(page, query: str) -> list[str]:
    """Types `query` into the site's search box; the paths of the results (none within 10 s: [])."""
    page.locator("label.md-search__icon, .md-search__input").first.click()
    box = page.locator("input.md-search__input")
    box.fill("")
    box.type(query, delay=10)
    try:
        page.wait_for_selector(".md-search-result__item", timeout=10_000)
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError: no results)
        return []
    page.wait_for_timeout(300)
    hits = page.eval_on_selector_all(".md-search-result__item > a", "els => els.map(e => e.href)")
    page.keyboard.press("Escape")
    return [urlsplit(h).path for h in hits]


@survives_a_hung_browser
def test_search_finds_an_identifier_by_a_word_inside_it(browser, base_url, site):
    """A reader types "syncthreads" and finds the page that teaches __syncthreads(): the search plugin's
    separator (mkdocs.yml) splits words at underscores, not only at spaces and hyphens."""
    page_md = bs.DOCS / "memory-model" / "synchronisation.md"
    assert "__syncthreads" in page_md.read_text(), "the barrier page no longer mentions __syncthreads"
    html = (site / "memory-model" / "synchronisation" / "index.html").read_text()
    assert "__syncthreads" in html
    context, rec = new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url, wait_until="load")
    hits = _search(page, "syncthreads")
    context.close()
    assert not rec.external, format_by_page(rec.external)
    assert bs.SUBPATH + "memory-model/synchronisation/" in hits, \
        f"searching for 'syncthreads' did not find the page on barriers (__syncthreads); results: {hits[:8]}"


# ----------------------------------------------------------------------------- copy buttons


_ARTEFACTS = {"\u00b6": "a pilcrow", "\u00a0": "a non-breaking space", "\u200b": "a zero-width space",
              NOTHING_COPIED: "nothing (the button did not copy)"}


def test_copy_button_copies_exactly_what_should_be_pasted(crawl):
    problems: dict[str, list[str]] = {}
    checked = 0
    for path, info in crawl["pages"].items():
        copied = list(info["copied"])
        if info["copyButtons"] < info["codeBlocks"] and path != bs.PRINT_PAGE:
            problems.setdefault(path, []).append(
                f"{info['codeBlocks'] - info['copyButtons']} code block(s) without a copy button")
        for text in copied:
            for ch, what in _ARTEFACTS.items():
                if ch in text:
                    problems.setdefault(path, []).append(f"copied text contains {what}: {text[:60]!r}")
        source = bs.source_for(path)
        if source is None:
            continue
        remaining = list(copied)
        for info_string, expected in bs.expected_code_blocks(source):
            checked += 1
            if info_string.split()[:1] == ["diff"]:
                # A diff's blank context line is a single space, which the rendered block (and so its copy)
                # drops; patch and git apply read an empty line in a hunk as that same blank context line.
                expected = re.sub(r"(?m)^ $", "", expected)
            if expected in remaining:
                remaining.remove(expected)
                continue
            near = min(remaining, key=lambda t: _distance(t, expected), default="")
            problems.setdefault(path, []).append(
                f"block ```{info_string} copies differently from its source:\n"
                f"    expected {expected[:300]!r}\n    nearest  {near[:300]!r}")
    assert checked, "no code block was checked"
    assert not problems, format_by_page(problems)


def _distance(a: str, b: str) -> int:
    import difflib
    return -int(1000 * difflib.SequenceMatcher(None, a, b).quick_ratio())


@survives_a_hung_browser
def test_copy_button_works_with_a_real_click(browser, base_url, crawl):
    """The crawl clicks buttons from script; one real mouse click shows the same text arrives."""
    path = next((p for p, i in crawl["pages"].items() if i["copied"] and p != bs.PRINT_PAGE), None)
    assert path is not None, "no page has a copy button"
    context, rec = new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url + path, wait_until="load")
    block = page.locator("article pre").first
    block.hover()
    page.evaluate("() => navigator.clipboard.writeText('')")
    page.locator(f"article :is({bs.COPY_BUTTON})").first.click()
    page.wait_for_timeout(100)
    assert page.evaluate("() => navigator.clipboard.readText()") == crawl["pages"][path]["copied"][0]
    context.close()


# ----------------------------------------------------------------------------- tabs, palette


TABS_FIXTURE = '''# Tabs fixture

=== "C++"

    ```cpp
    int first = 1;
    ```

=== "Python"

    ```python
    first = 1
    ```

Some prose between the two sets.

=== "C++"

    Second set, C++.

=== "Python"

    Second set, Python.
'''


@pytest.fixture(scope="module")
def tabs_site(tmp_path_factory):
    """A one-page site with the course's own theme and extensions, and two linked tab sets on it:
    the course's pages may have none yet, and the theme's behaviour must be tested all the same."""
    pytest.importorskip("mkdocs")
    tmp = tmp_path_factory.mktemp("tabs")
    docs = tmp / "docs"
    shutil.copytree(bs.DOCS / "assets", docs / "assets")
    shutil.copytree(ROOT / "overrides", tmp / "overrides")  # theme.custom_dir, relative to the config file
    (docs / "index.md").write_text(TABS_FIXTURE)
    config = tmp / "mkdocs.yml"
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nhooks: []\nnav:\n  - index.md\n"
                      "plugins:\n  - search\n")
    out = bs.build_site(tmp / "site", config)
    with bs.serve(out) as url:
        yield url


def _check_linked_tabs(page, label: str) -> list[str]:
    """Click `label` in the first set that has it; every set with that label must then show it."""
    page.locator("article .tabbed-set > .tabbed-labels > label", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first.click()
    page.wait_for_timeout(100)
    shown = page.evaluate("""(label) => Array.from(document.querySelectorAll('article .tabbed-set')).map(set => {
        const labels = Array.from(set.querySelectorAll(':scope > .tabbed-labels > label'));
        const inputs = Array.from(set.querySelectorAll(':scope > input'));
        const i = inputs.findIndex(x => x.checked);
        const has = labels.some(l => l.textContent.trim() === label);
        const blocks = set.querySelectorAll(':scope > .tabbed-content > .tabbed-block');
        const visible = Array.from(blocks).filter(b => getComputedStyle(b).display !== 'none').length;
        return {has, checked: i >= 0 ? labels[i].textContent.trim() : null, visible};
    })""", label)
    return [f"set {n}: shows {s['checked']!r}, not {label!r} ({s['visible']} blocks visible)"
            for n, s in enumerate(shown) if s["has"] and (s["checked"] != label or s["visible"] != 1)]


@survives_a_hung_browser
def test_content_tabs_switch_and_stay_linked(browser, tabs_site, crawl, base_url):
    context, rec = new_context(browser, tabs_site)
    page = context.new_page()
    page.goto(tabs_site, wait_until="load")
    problems = _check_linked_tabs(page, "Python") + _check_linked_tabs(page, "C++")
    assert "Second set, C++." in page.locator("article").inner_text()
    context.close()
    # And on every course page with two or more tab sets that share a label.
    context, rec2 = new_context(browser, base_url)
    page = context.new_page()
    for path, info in crawl["pages"].items():
        sets = info["tabSets"]
        shared = [lab for lab in (sets[0] if sets else []) if sum(lab in s for s in sets) > 1]
        if not shared:
            continue
        page.goto(base_url + path, wait_until="load")
        for label in reversed(shared):
            problems += [f"/{path}: {p}" for p in _check_linked_tabs(page, label)]
    context.close()
    assert not (rec.errors or rec2.errors), format_by_page({**rec.errors, **rec2.errors})
    assert not problems, "tabs did not switch together:\n" + "\n".join(problems)


@survives_a_hung_browser
def test_light_dark_toggle_switches_and_persists(browser, base_url):
    context, rec = new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url, wait_until="load")
    scheme = lambda: page.evaluate("() => document.body.getAttribute('data-md-color-scheme')")  # noqa: E731
    background = lambda: page.evaluate("() => getComputedStyle(document.body).backgroundColor")  # noqa: E731
    assert scheme() == "default"
    light_bg = background()
    page.locator("form[data-md-component=palette] label:visible").first.click()
    page.wait_for_function("() => document.body.getAttribute('data-md-color-scheme') === 'slate'", timeout=5000)
    assert background() != light_bg, "the dark palette did not change the page's background"
    page.reload(wait_until="load")
    assert scheme() == "slate", "the chosen palette was not kept across page loads"
    page.locator("form[data-md-component=palette] label:visible").first.click()
    page.wait_for_function("() => document.body.getAttribute('data-md-color-scheme') === 'default'", timeout=5000)
    context.close()
    assert not rec.errors, format_by_page(rec.errors)
