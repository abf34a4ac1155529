"""Driving headless Chromium for the browser tests (tests/test_browser_*.py): the shared browser that a
hung test may kill and relaunch (survives_a_hung_browser), the recorder of every request and error, one
page's visit, and the crawl of every page with its watchdog. tests/conftest.py makes the fixtures from
these; browser_support.py builds and serves the site and holds the scripts run in the pages.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import warnings
from urllib.parse import urlsplit

import pytest

import browser_support as bs

PHONE = {"width": 360, "height": 740}  # nothing may scroll sideways, even this narrow
PHONE_SCREEN = {"width": 390, "height": 844}  # a common phone: the first prose starts on its first screen
DESKTOP = {"width": 1280, "height": 900}
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


def new_context(browser, base_url, **kw):
    context = browser.new_context(viewport=DESKTOP, base_url=base_url, **kw)
    base = urlsplit(base_url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=f"{base.scheme}://{base.netloc}")
    rec = Recorder(base_url)
    rec.attach(context)
    return context, rec


def first_on_page(browser, base_url, path: str, selector: str):
    """A fresh context with `path` loaded, and the first element there that matches `selector`, scrolled
    into view (a test that reads one element's behaviour: a tooltip, a focus style)."""
    context, _ = new_context(browser, base_url)
    page = context.new_page()
    page.goto(base_url + path, wait_until="load")
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    return context, page, element


def wait_rendered(page) -> str | None:
    try:
        page.wait_for_function(bs.RENDERED_JS, timeout=8_000)
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError; reported, not raised)
        return "diagrams or maths were not rendered within 8 s"
    return None


def open_print_page(page, base_url: str) -> float:
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


NOTHING_COPIED = "\u2400"  # the mark COPY_ALL_JS leaves where a button copied nothing


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
    if texts is None or any(NOTHING_COPIED in t for t in texts):
        page.bring_to_front()
        texts = page.evaluate(bs.COPY_ALL_JS, [bs.COPY_BUTTON, bs.REVEAL_JS, 10_000])
    return texts


CONTRAST_SCOPE = ".md-header, .md-content, .md-footer"


def _visit(page, base_url: str, path: str, info: dict) -> None:
    # Loaded as a phone first sees it (where its first prose starts), then read on a desktop.
    page.set_viewport_size(DESKTOP if path == bs.PRINT_PAGE else PHONE_SCREEN)
    if path == bs.PRINT_PAGE:
        open_print_page(page, base_url)
    else:
        page.goto(base_url + path, wait_until="load")
        problem = wait_rendered(page)
        if problem:
            info["problems"].append(problem)
        try:  # a block still without its button is reported by the copy-button test, from COLLECT_JS
            page.wait_for_function(bs.COPY_BUTTONS_READY_JS, timeout=8_000)
        except Exception:  # noqa: BLE001 (Playwright's TimeoutError)
            pass
    if path != bs.PRINT_PAGE:  # on load, before any fold is opened
        info["firstProse"] = page.evaluate(bs.FIRST_PROSE_JS)
        page.set_viewport_size(DESKTOP)
    info.update(page.evaluate(bs.COLLECT_JS))
    if path == bs.PRINT_PAGE:  # every page again: its colours, blocks and layout are checked on their own
        info.update(contrast={}, copied=[], codeOverflow=[], tableOverflow=[], plots={"desktop": [], "phone": []},
                    firstProse=None, phone={"scrollWidth": 0, "clientWidth": 0, "wide": []})
        return
    # Colours change with a transition: switch them off so each palette is measured as it settles.
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; animation: none !important; }")
    info["contrast"] = {"light": page.evaluate(bs.CONTRAST_JS, CONTRAST_SCOPE)}
    page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'slate')")
    info["contrast"]["dark"] = page.evaluate(bs.CONTRAST_JS, CONTRAST_SCOPE)
    page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'default')")
    info["copied"] = _copy_all(page)
    info["codeOverflow"] = page.evaluate(bs.CODE_OVERFLOW_JS)  # opens every fold
    info["tableOverflow"] = page.evaluate(bs.TABLE_OVERFLOW_JS)
    info["plots"] = {"desktop": page.evaluate(bs.PLOTS_JS)}
    page.set_viewport_size(PHONE_SCREEN)
    info["plots"]["phone"] = page.evaluate(bs.PLOTS_JS)
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(50)
    info["phone"] = page.evaluate(bs.OVERFLOW_JS)


EMPTY_INFO = (("ids", []), ("links", []), ("images", []), ("headings", []), ("abbrs", []), ("diagrams", []),
              ("maths", []), ("tabSets", []), ("copied", []), ("contrast", {}), ("codeOverflow", []), ("prev", None),
              ("next", None), ("badge", False), ("results", False), ("codeBlocks", 0), ("copyButtons", 0),
              ("tableOverflow", []), ("plots", {"desktop": [], "phone": []}), ("firstProse", None),
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
            context, _ = new_context(browser, base_url)
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


def format_by_page(found: dict[str, list], limit: int = 60) -> str:
    lines = [f"/{page}: {item}" for page, items in found.items() for item in items]
    more = f"\n... and {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more
