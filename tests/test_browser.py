"""The site as readers use it: every page in a real browser (headless Chromium), offline.

The site is built with `mkdocs build --strict` into a temporary folder and served on 127.0.0.1 by the
test itself. One crawl visits every page the build produced (no fixed list: the course grows) and
gathers what the tests below check; the browser is Debian's chromium, driven by Playwright.

Without Chromium or Playwright the browser tests are skipped with the reason; under CI (CI set in the
environment) they fail instead, so a CI machine cannot pass without running them.
Screenshots of key pages, in both palettes and on a phone, are saved to build/screenshots/.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import shutil
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import browser_support as bs

from course import programs, record

ROOT = bs.ROOT
PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 900}
# Where a phone reader would have to scroll sideways on a prose page: pages listed here may (wide tables
# are scrolled inside their own box by the theme, so nothing should need to be listed).
PHONE_EXEMPT: set[str] = set()
# The whole-course print page is megabytes of HTML: on a busy machine it takes far longer than any other
# page, so it is waited for, up to this long (COURSE_PRINT_TIMEOUT_S), until it is loaded and drawn.
PRINT_TIMEOUT_S = float(os.environ.get("COURSE_PRINT_TIMEOUT_S") or 300)
# A page that takes longer than this (COURSE_PAGE_TIMEOUT_S; the print view gets PRINT_TIMEOUT_S on top)
# is taken as hung: its browser is killed, and the page is visited once more in a fresh one.
PAGE_TIMEOUT_S = float(os.environ.get("COURSE_PAGE_TIMEOUT_S") or 120)
# Loaded, every page of the course in it, and its diagrams and maths drawn.
PRINT_READY_JS = f"""() => document.readyState === "complete"
  && document.querySelectorAll("#print-site-page section.print-page").length > 0
  && ({bs.RENDERED_JS.strip()})()"""


def _need(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests, but {reason}: {bs.INSTALL_HINT}")
    pytest.skip(f"{reason}: {bs.INSTALL_HINT}")


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    return bs.build_site(tmp_path_factory.mktemp("browser-site"))


@pytest.fixture(scope="module")
def base_url(site):
    with bs.serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("Playwright's Python package is not installed")
    path = bs.chromium_path()
    if not path:
        _need("no Chromium binary found (looked for chromium on PATH and /usr/bin/chromium)")
    pw = sync_playwright().start()
    b = RelaunchableBrowser(pw)
    yield b
    b.close()
    pw.stop()


class RelaunchableBrowser:
    """The tests' shared Chromium, as a Playwright Browser; a test guarded by survives_a_hung_browser may
    kill it and start a fresh one (the attributes of the Browser in use are read through)."""

    def __init__(self, pw):
        self._pw = pw
        self.relaunch()

    def relaunch(self) -> None:
        self.current = _launch(self._pw)
        self.pid = _browser_pid(self.current)

    def __getattr__(self, name):
        return getattr(self.current, name)


# A test that uses the shared browser for longer than this is taken as hung (a page's allowance more than
# the print view's own wait, the longest any test waits on purpose).
TEST_TIMEOUT_S = PAGE_TIMEOUT_S + PRINT_TIMEOUT_S


def survives_a_hung_browser(test=None, *, limit_s: float | None = None):
    """Playwright's evaluate has no timeout of its own: if the test's shared browser is still busy after
    limit_s (TEST_TIMEOUT_S), the browser is killed, which makes the stuck call raise, and the test runs once
    more in a fresh browser, with a warning. A test that fails on its own fails at once."""
    if test is None:
        return lambda t: survives_a_hung_browser(t, limit_s=limit_s)

    @functools.wraps(test)
    def run(*args, **kwargs):
        browser = kwargs["browser"]
        for attempt in (1, 2):
            killed = threading.Event()

            def kill(pid=browser.pid):
                killed.set()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)

            timer = threading.Timer(limit_s or TEST_TIMEOUT_S, kill)
            timer.daemon = True
            timer.start()
            try:
                return test(*args, **kwargs)
            except Exception as e:
                if not killed.is_set() or attempt == 2:
                    raise
                warnings.warn(f"{test.__name__}: the browser hung for {limit_s or TEST_TIMEOUT_S:.0f} s and was "
                              f"killed ({str(e).splitlines()[0] if str(e) else type(e).__name__}); running the "
                              "test once more in a fresh browser", stacklevel=2)
            finally:
                timer.cancel()
                if killed.is_set():
                    with contextlib.suppress(Exception):
                        browser.current.close()
                    browser.relaunch()
    return run


def _launch(pw):
    # Nothing may leave the machine: every host name except 127.0.0.1 resolves to nothing, so a stray
    # request fails fast instead of reaching the network; the recorder notes it and the test fails.
    args = bs.CHROMIUM_ARGS + ["--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
    return pw.chromium.launch(executable_path=bs.chromium_path(), args=args, headless=True)


class Recorder:
    """Every request, failure and error of the browser contexts it is attached to, filed under the page
    being visited (a crawl worker attaches each fresh context it starts to the same recorder)."""

    def __init__(self, base_url: str):
        self.base = urlsplit(base_url)
        self.current = "?"
        self.errors: dict[str, list[str]] = {}
        self.failed: dict[str, list[str]] = {}
        self.external: dict[str, list[str]] = {}

    def attach(self, context) -> None:
        context.on("request", self._request)
        context.on("requestfailed", self._failed)
        context.on("response", lambda r: r.status >= 400 and self._add(self.failed, f"{r.url} (HTTP {r.status})"))
        context.on("page", self.watch)

    def forget(self, page: str) -> list[str]:
        """Drop what was filed under `page` (a visit that is being repeated); returns it, for the report."""
        return [item for where in (self.errors, self.failed, self.external) for item in where.pop(page, [])]

    def _add(self, where, text):
        where.setdefault(self.current, []).append(text)

    def _failed(self, request):
        if request.failure and "ERR_ABORTED" in request.failure:
            return  # cancelled because the test moved on (a favicon still loading), not refused
        self._add(self.failed, f"{request.url} ({request.failure})")

    def _request(self, request):
        url = urlsplit(request.url)
        if url.scheme in ("data", "blob", "about", "chrome-extension"):
            return
        if url.hostname != "127.0.0.1" or url.port != self.base.port:
            self._add(self.external, request.url)

    def watch(self, page):
        page.on("pageerror", lambda e: self._add(self.errors, f"uncaught: {e}"))
        page.on("console", lambda m: m.type == "error" and self._add(self.errors, f"console: {m.text}"))


def _new_context(browser, base_url, **kw):
    context = browser.new_context(viewport=DESKTOP, base_url=base_url, **kw)
    base = urlsplit(base_url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=f"{base.scheme}://{base.netloc}")
    rec = Recorder(base_url)
    rec.attach(context)
    return context, rec


def _first_on_page(browser, base_url, path: str, selector: str):
    """A fresh context with `path` loaded, and the first element there that matches `selector`, scrolled
    into view (a test that reads one element's behaviour: a tooltip, a focus style)."""
    context, _ = _new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url + path, wait_until="load")
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    return context, page, element


def _wait_rendered(page) -> str | None:
    try:
        page.wait_for_function(bs.RENDERED_JS, timeout=8_000)
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError; reported, not raised)
        return "diagrams or maths were not rendered within 8 s"
    return None


def _open_print_page(page, base_url: str) -> float:
    """Open the print view and wait, up to PRINT_TIMEOUT_S, until it is loaded and drawn (PRINT_READY_JS);
    returns the seconds it took. Raises with what was missing, rather than Playwright's bare timeout."""
    started = time.monotonic()
    limit_ms = PRINT_TIMEOUT_S * 1000
    try:
        page.goto(base_url + bs.PRINT_PAGE, wait_until="commit", timeout=limit_ms)
        page.wait_for_function(PRINT_READY_JS, timeout=max(1.0, limit_ms - 1000 * (time.monotonic() - started)),
                               polling=250)
    except Exception as e:  # noqa: BLE001 (Playwright's TimeoutError, reported with the page's state)
        try:
            state = page.evaluate("""() => ({ready: document.readyState,
                sections: document.querySelectorAll("#print-site-page section.print-page").length,
                undrawnDiagrams: document.querySelectorAll("pre.mermaid").length,
                untypesetMaths: Array.from(document.querySelectorAll(".arithmatex"))
                    .filter(m => !m.querySelector(".katex, .katex-error")).length})""")
        except Exception:  # noqa: BLE001
            state = "unknown (the page did not answer)"
        raise RuntimeError(
            f"the print view (/{bs.PRINT_PAGE}) was not loaded and drawn within {PRINT_TIMEOUT_S:.0f} s "
            f"(COURSE_PRINT_TIMEOUT_S); its state then: {state}; Playwright said: {str(e).splitlines()[0]}") from None
    return time.monotonic() - started


_NOTHING_COPIED = "\u2400"  # the mark COPY_ALL_JS leaves where a button copied nothing


def _copy_all(page) -> list[str]:
    """Click every copy button in the page's content, return the texts it put on the clipboard.
    Folded answers are opened and the tab holding each block is selected first, as a reader would.
    A page that lost focus (two browsers side by side on a busy machine) can make a clipboard call hang,
    or make Material's own write fail silently, so that every button of the page copies nothing (a clean-
    clone CI run failed so on one page): then the page is focused and every button clicked once more; a
    button that is really broken copies nothing the second time too."""
    try:
        texts = page.evaluate(bs.COPY_ALL_JS, [bs.COPY_BUTTON, bs.REVEAL_JS, 10_000])
    except Exception:  # noqa: BLE001 (a clipboard call timed out: focus the page and try once more)
        texts = None
    if texts is None or any(_NOTHING_COPIED in t for t in texts):
        page.bring_to_front()
        texts = page.evaluate(bs.COPY_ALL_JS, [bs.COPY_BUTTON, bs.REVEAL_JS, 10_000])
    return texts


CONTRAST_SCOPE = ".md-header, .md-content, .md-footer"


def _visit(page, base_url: str, path: str, info: dict) -> None:
    page.set_viewport_size(DESKTOP)
    if path == bs.PRINT_PAGE:
        _open_print_page(page, base_url)
    else:
        page.goto(base_url + path, wait_until="load")
        problem = _wait_rendered(page)
        if problem:
            info["problems"].append(problem)
        try:  # a block still without its button is reported by the copy-button test, from COLLECT_JS
            page.wait_for_function(bs.COPY_BUTTONS_READY_JS, timeout=8_000)
        except Exception:  # noqa: BLE001 (Playwright's TimeoutError)
            pass
    info.update(page.evaluate(bs.COLLECT_JS))
    if path == bs.PRINT_PAGE:  # every page again: its colours, blocks and layout are checked on their own
        info.update(contrast={}, copied=[], codeOverflow=[], phone={"scrollWidth": 0, "clientWidth": 0, "wide": []})
        return
    # Colours change with a transition: switch them off so each palette is measured as it settles.
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; animation: none !important; }")
    info["contrast"] = {"light": page.evaluate(bs.CONTRAST_JS, CONTRAST_SCOPE)}
    page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'slate')")
    info["contrast"]["dark"] = page.evaluate(bs.CONTRAST_JS, CONTRAST_SCOPE)
    page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'default')")
    info["copied"] = _copy_all(page)
    info["codeOverflow"] = page.evaluate(bs.CODE_OVERFLOW_JS)
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(50)
    info["phone"] = page.evaluate(bs.OVERFLOW_JS)


EMPTY_INFO = (("ids", []), ("links", []), ("images", []), ("headings", []), ("abbrs", []), ("diagrams", []),
              ("maths", []), ("tabSets", []), ("copied", []), ("contrast", {}), ("codeOverflow", []), ("prev", None),
              ("next", None), ("badge", False), ("results", False), ("codeBlocks", 0), ("copyButtons", 0),
              ("phone", {"scrollWidth": 0, "clientWidth": 0, "wide": []}))


def _browser_pid(browser) -> int | None:
    """The operating system's process id of a Chromium that Playwright launched (for the watchdog)."""
    info = browser.new_browser_cdp_session().send("SystemInfo.getProcessInfo")
    return next((p["id"] for p in info["processInfo"] if p["type"] == "browser"), None)


def _crawl_part(base_url: str, paths: list[str], watch: dict) -> tuple[dict, Recorder, list[str]]:
    """One worker's share of the crawl, with its own Playwright and Chromium (the sync API is per thread).
    A visit that raises (the watchdog killed a hung browser, or a timeout) is repeated once in a fresh
    browser; the page fails only if the second visit fails too. Returns the pages, the recorder and a
    line for each repeated visit."""
    from playwright.sync_api import sync_playwright

    me = threading.get_ident()
    pages: dict[str, dict] = {}
    repeated: list[str] = []
    rec = Recorder(base_url)
    with sync_playwright() as pw:

        def start():
            browser = _launch(pw)
            watch["pid"][me] = _browser_pid(browser)
            context, _ = _new_context(browser, base_url)
            rec.attach(context)
            return browser, context.new_page()

        browser, page = start()
        for path in paths:
            rec.current = path
            for attempt in (1, 2):
                watch["page"][me] = (path, time.monotonic())
                info: dict = {"problems": []}
                try:
                    _visit(page, base_url, path, info)
                    info["seconds"] = time.monotonic() - watch["page"][me][1]
                    break
                except Exception as e:  # noqa: BLE001 (one page's trouble must not hide the others')
                    why = str(e).splitlines()[0] if str(e) else type(e).__name__
                    if attempt == 1:
                        dropped = rec.forget(path)
                        repeated.append(f"/{path}: {why}" + (f" (dropped with it: {dropped})" if dropped else ""))
                    else:
                        info["problems"].append(f"the crawl failed on this page, twice: {why}")
                        info["failed"] = True
                        for key, empty in EMPTY_INFO:
                            info.setdefault(key, empty)
                    try:
                        browser.close()
                    except Exception:  # noqa: BLE001 (already gone: the watchdog killed it)
                        pass
                    browser, page = start()
            pages[path] = info
        watch["page"].pop(me, None)
        browser.close()
    return pages, rec, repeated


def crawl_pages(base_url: str, paths: list[str], workers: int, page_limit_s: float = PAGE_TIMEOUT_S,
                limit_s: float = 1800) -> dict:
    """Visit `paths`, shared among `workers` browsers in daemon threads, with a watchdog: Playwright's
    evaluate has no timeout of its own, so a page that stops answering (seen once in CI, after 1800 s on a
    page that takes seconds) would hang its worker forever. The watchdog kills the browser of a worker that
    has spent page_limit_s on one page, which makes the stuck call raise and the worker visit the page once
    more in a fresh browser. limit_s bounds the whole crawl, naming the pages still being visited."""
    started = time.monotonic()
    watch: dict = {"page": {}, "pid": {}}
    results: list = [None] * workers
    errors: list = []
    killed: list[str] = []

    def work(i):
        try:
            results[i] = _crawl_part(base_url, paths[i::workers], watch)
        except BaseException as e:  # noqa: BLE001 (re-raised below, in the caller's thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    done_killing: set = set()
    while any(t.is_alive() for t in threads) and time.monotonic() < started + limit_s:
        time.sleep(0.5)
        now = time.monotonic()
        for me, (path, since) in list(watch["page"].items()):
            allowed = page_limit_s + (PRINT_TIMEOUT_S if path == bs.PRINT_PAGE else 0)
            pid = watch["pid"].get(me)
            if now - since > allowed and pid and (me, since) not in done_killing:
                done_killing.add((me, since))
                killed.append(f"/{path} after {now - since:.0f} s")
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
    stuck = [watch["page"].get(t.ident, ("(not started)",))[0] for t in threads if t.is_alive()]
    if stuck:
        pytest.fail(f"the crawl did not finish in {limit_s:.0f} s (COURSE_CRAWL_TIMEOUT_S); stuck on: {stuck}")
    if errors:
        raise errors[0]
    pages = {p: info for part, _, _ in results for p, info in part.items()}
    pages = {p: pages[p] for p in paths}  # in the order asked: the home page first
    rec = results[0][1]
    for _, other, _ in results[1:]:
        for name in ("errors", "failed", "external"):
            for page, items in getattr(other, name).items():
                getattr(rec, name).setdefault(page, []).extend(items)
    repeated = [line for _, _, lines in results for line in lines]
    if repeated or killed:  # in pytest's warnings summary: a repeated visit passes, but is news
        warnings.warn(f"crawl: hung browsers killed: {killed}; pages visited twice: {repeated}", stacklevel=2)
    return {"pages": pages, "recorder": rec, "seconds": time.monotonic() - started, "workers": workers,
            "repeated": repeated, "killed": killed}


@pytest.fixture(scope="module")
def crawl(browser, base_url, site):
    """Visit every page once on a desktop, then at phone width, gathering everything the tests check.
    The pages are shared among COURSE_BROWSER_WORKERS browsers (default: 2, or 1 on one core)."""
    workers = max(1, int(os.environ.get("COURSE_BROWSER_WORKERS") or min(2, os.cpu_count() or 1)))
    return crawl_pages(base_url, bs.site_pages(site), workers,
                       limit_s=float(os.environ.get("COURSE_CRAWL_TIMEOUT_S", 1800)))


def _site_with_a_spinning_page(folder: Path) -> None:
    """Two pages: good/, and hang/, whose script spins forever once it has loaded (every evaluate in it
    then waits for ever, as in a browser that stopped answering)."""
    article = '<article class="md-content__inner"><h1 id="t">{}</h1><p>Text.</p></article>'
    for name, script in (("good", ""), ("hang", '<script>addEventListener("load", () => setTimeout(() => '
                                                 '{ for (;;) {} }, 0))</script>')):
        (folder / name).mkdir()
        (folder / name / "index.html").write_text(
            f"<!doctype html><html lang=en><head><title>{name}</title></head><body>"
            f"{article.format(name)}{script}</body></html>")


def test_a_hung_page_is_killed_and_visited_again_without_stopping_the_crawl(browser, tmp_path):
    # The watchdog must kill the hung page's browser (twice: the repeated visit hangs too), report the
    # page as failed, and go on to the next page in a fresh browser.
    _site_with_a_spinning_page(tmp_path)
    with bs.serve(tmp_path) as url, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = crawl_pages(url, ["hang/", "good/"], workers=1, page_limit_s=3, limit_s=120)
    hung, good = result["pages"]["hang/"], result["pages"]["good/"]
    assert hung.get("failed") and "twice" in hung["problems"][-1], hung["problems"]
    assert len(result["killed"]) == 2 and result["killed"][0].startswith("/hang/"), result["killed"]
    assert len(result["repeated"]) == 1 and result["repeated"][0].startswith("/hang/"), result["repeated"]
    assert not good.get("failed") and "seconds" in good and "t" in good["ids"], good
    assert any("hung browsers killed" in str(w.message) for w in caught)


def test_a_test_whose_browser_hangs_runs_again_in_a_fresh_browser(browser, tmp_path):
    # The guard of the tests that use the shared browser: the first run hangs, is killed and repeated;
    # the second run passes; the browser the later tests get is a fresh one that answers.
    _site_with_a_spinning_page(tmp_path)
    runs, starts = [], []

    @survives_a_hung_browser(limit_s=3)
    def visit(browser):
        starts.append(browser.pid)
        page = browser.new_page()
        page.goto(url + ("hang/" if len(starts) == 1 else "good/"), wait_until="load")
        runs.append(page.evaluate("() => document.title"))
        page.close()
        return runs[-1]

    first_pid = browser.pid
    with bs.serve(tmp_path) as url, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert visit(browser=browser) == "good"
    assert runs == ["good"] and starts[0] == first_pid and browser.pid == starts[1] != first_pid
    assert any("hung" in str(w.message) for w in caught)

    @survives_a_hung_browser(limit_s=30)
    def fails_on_its_own(browser):
        runs.append("failed")
        raise AssertionError("a real failure")

    with pytest.raises(AssertionError, match="a real failure"):
        fails_on_its_own(browser=browser)
    assert runs == ["good", "failed"], "a failure that is not a hang must not be repeated"


def test_every_test_that_drives_the_shared_browser_is_guarded_against_a_hang():
    # The two tests above take `browser` only to be skipped (or failed, in CI) without Chromium.
    gate_only = {test_a_hung_page_is_killed_and_visited_again_without_stopping_the_crawl,
                 test_a_test_whose_browser_hangs_runs_again_in_a_fresh_browser}
    unguarded = [name for name, fn in globals().items()
                 if name.startswith("test_") and callable(fn) and fn not in gate_only
                 and "browser" in inspect.signature(fn).parameters and not hasattr(fn, "__wrapped__")]
    assert not unguarded, f"decorate these with @survives_a_hung_browser: {unguarded}"


def _fmt(found: dict[str, list], limit: int = 60) -> str:
    lines = [f"/{page}: {item}" for page, items in found.items() for item in items]
    more = f"\n... and {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


# ----------------------------------------------------------------------------- loading, offline


def test_every_page_loads_without_errors_or_failed_requests(crawl):
    rec = crawl["recorder"]
    problems = {p: list(i["problems"]) for p, i in crawl["pages"].items() if i["problems"]}
    for where in (rec.errors, rec.failed):
        for page, items in where.items():
            problems.setdefault(page, []).extend(items)
    assert crawl["pages"], "the built site has no pages"
    assert not problems, "problems while loading pages:\n" + _fmt(problems)


def test_no_request_leaves_the_machine(crawl):
    external = crawl["recorder"].external
    assert not external, ("requests to other hosts (fonts, maths, diagrams and search must be served "
                          "from the site itself):\n" + _fmt(external))


def test_diagrams_and_maths_are_drawn(crawl):
    bad = {}
    for path, info in crawl["pages"].items():
        flat = [d for d in info["diagrams"] if d["height"] < 20]
        if flat:
            bad[path] = [f"{len(flat)} mermaid diagram(s) drawn with no height"]
        if not all(info["maths"]):
            bad.setdefault(path, []).append("maths left untypeset")
    assert not bad, _fmt(bad)


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
    assert not bad, "Mermaid loaded where no diagram is drawn, or diagrams not drawn:\n" + _fmt(bad)


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
    assert not broken, "broken links:\n" + _fmt(broken)


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
    context, rec = _new_context(browser, base_url)
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
    assert not rec.external, _fmt(rec.external)
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
    context, rec = _new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url, wait_until="load")
    hits = _search(page, "syncthreads")
    context.close()
    assert not rec.external, _fmt(rec.external)
    assert bs.SUBPATH + "memory-model/synchronisation/" in hits, \
        f"searching for 'syncthreads' did not find the page on barriers (__syncthreads); results: {hits[:8]}"


# ----------------------------------------------------------------------------- copy buttons


_ARTEFACTS = {"\u00b6": "a pilcrow", "\u00a0": "a non-breaking space", "\u200b": "a zero-width space",
              _NOTHING_COPIED: "nothing (the button did not copy)"}


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
    assert not problems, _fmt(problems)


def _distance(a: str, b: str) -> int:
    import difflib
    return -int(1000 * difflib.SequenceMatcher(None, a, b).quick_ratio())


@survives_a_hung_browser
def test_copy_button_works_with_a_real_click(browser, base_url, crawl):
    """The crawl clicks buttons from script; one real mouse click shows the same text arrives."""
    path = next((p for p, i in crawl["pages"].items() if i["copied"] and p != bs.PRINT_PAGE), None)
    assert path is not None, "no page has a copy button"
    context, rec = _new_context(browser, base_url)
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
    context, rec = _new_context(browser, tabs_site)
    page = context.new_page()
    page.goto(tabs_site, wait_until="load")
    problems = _check_linked_tabs(page, "Python") + _check_linked_tabs(page, "C++")
    assert "Second set, C++." in page.locator("article").inner_text()
    context.close()
    # And on every course page with two or more tab sets that share a label.
    context, rec2 = _new_context(browser, base_url)
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
    assert not (rec.errors or rec2.errors), _fmt({**rec.errors, **rec2.errors})
    assert not problems, "tabs did not switch together:\n" + "\n".join(problems)


@survives_a_hung_browser
def test_light_dark_toggle_switches_and_persists(browser, base_url):
    context, rec = _new_context(browser, base_url)
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
    assert not rec.errors, _fmt(rec.errors)


# ----------------------------------------------------------------------------- phone, screenshots


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
    assert not wide, f"code blocks that scroll sideways at {DESKTOP['width']} px:\n" + _fmt(wide)
    fixed = sorted(p for p in CODE_WIDTH_WAITING if p in crawl["pages"] and not crawl["pages"][p]["codeOverflow"])
    assert not fixed, f"these pages' code fits now: remove them from CODE_WIDTH_WAITING: {fixed}"


def test_no_horizontal_scrolling_on_a_phone(crawl):
    wide = {p: [f"page is {i['phone']['scrollWidth']} px wide in a {i['phone']['clientWidth']} px viewport; "
                f"too wide: {i['phone']['wide']}"]
            for p, i in crawl["pages"].items()
            if p not in PHONE_EXEMPT and i["phone"]["scrollWidth"] > i["phone"]["clientWidth"]}
    assert not wide, "horizontal scrolling at phone width:\n" + _fmt(wide)


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
        context, rec = _new_context(browser, base_url, color_scheme=scheme)
        page = context.new_page()
        for path in _key_pages(crawl):
            page.goto(base_url + path, wait_until="load")
            _wait_rendered(page)
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
                _wait_rendered(page)
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
    context, rec = _new_context(browser, base_url)
    page = context.new_page()
    _open_print_page(page, base_url)
    bs.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(bs.SCREENSHOTS / "print_page-light.png"))
    page.emulate_media(media="print")
    bs.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pdf = bs.SCREENSHOTS / "course.pdf"
    page.pdf(path=str(pdf), format="A4", print_background=True, page_ranges="1-40")  # a sample
    context.close()
    assert pdf.stat().st_size > 50_000
    assert not rec.external, _fmt(rec.external)


# ----------------------------------------------------------------------------- reading aids


def test_glossary_terms_carry_their_definition(crawl):
    pages = crawl["pages"]
    empty = {p: ["an <abbr> without a definition"] for p, i in pages.items() if any(not t for t in i["abbrs"])}
    assert not empty, _fmt(empty)
    assert sum(len(i["abbrs"]) for i in pages.values()) > 0, "no glossary term is marked on any page"


@survives_a_hung_browser
def test_glossary_tooltip_shows_on_hover(browser, base_url, crawl):
    path = next((p for p, i in crawl["pages"].items() if i["abbrs"]), None)
    assert path is not None
    context, page, abbr = _first_on_page(browser, base_url, path, "article abbr")
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
    context, page, claim = _first_on_page(browser, base_url, path, "article .course-claim[tabindex]")
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
    found = {k: lower.find(k) for k in ("prerequisites", "what you will learn")}
    missing = [k for k, at in found.items() if at < 0]
    assert not missing, f"docs/{chapter.name}/index.md does not state: {missing}"
    # "At the top": before the first section that is about something else.
    other = [m.start() for m in re.finditer(r"^##\s+(.+)$", text, re.MULTILINE)
             if not re.match(r"(prerequisites|what you will learn)", m.group(1).strip().lower())]
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


# ----------------------------------------------------------------------------- accessibility


def test_every_image_has_alt_text(crawl):
    bad = {p: [f"<img src={im['src']!r}> has no alt text" for im in i["images"]
               if im["alt"] is None or (not im["alt"].strip() and not im["decorative"])]
           for p, i in crawl["pages"].items()}
    bad = {p: v for p, v in bad.items() if v}
    assert not bad, _fmt(bad)


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
    assert not broken, "figures that did not load:\n" + _fmt(broken)
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
    assert not bad, "heading order:\n" + _fmt(bad)


def test_text_contrast_in_both_palettes(crawl):
    bad = {}
    for path, info in crawl["pages"].items():
        for scheme, found in info["contrast"].items():
            for f in found:
                bad.setdefault(path, []).append(
                    f"[{scheme}] {f['ratio']}:1 < {f['need']}:1 <{f['tag']} class={f['cls']!r}> {f['text']!r} "
                    f"({f['color']} on {f['background']})")
    assert not bad, "text below WCAG AA contrast:\n" + _fmt(bad, limit=200)


def test_crawl_stays_fast(crawl):
    # Each page's own visit, so that a hung browser the watchdog killed (reported on its own) is not
    # counted against the site's speed.
    seconds = [info["seconds"] for info in crawl["pages"].values() if "seconds" in info]
    per_page = sum(seconds) / max(1, len(seconds))
    assert per_page < 6, f"a page's visit took {per_page:.1f} s on average"
