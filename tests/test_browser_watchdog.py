"""The browser tests' watchdog: a hung page is killed and visited again, a test whose browser hangs
runs again in a fresh one, and every test that drives the shared browser is guarded.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from pathlib import Path

import pytest

import browser_support as bs
from browser_driver import crawl_pages, survives_a_hung_browser


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


# Every module of browser tests (this one too): the guard below reads them all.
BROWSER_TEST_MODULES = sorted(p.stem for p in Path(__file__).parent.glob("test_browser*.py"))


def test_every_test_that_drives_the_shared_browser_is_guarded_against_a_hang():
    # The two tests above take `browser` only to be skipped (or failed, in CI) without Chromium.
    gate_only = {test_a_hung_page_is_killed_and_visited_again_without_stopping_the_crawl.__name__,
                 test_a_test_whose_browser_hangs_runs_again_in_a_fresh_browser.__name__}
    drivers = [(module.__name__, name, fn) for module in map(importlib.import_module, BROWSER_TEST_MODULES)
               for name, fn in vars(module).items()
               if name.startswith("test_") and callable(fn) and name not in gate_only
               and "browser" in inspect.signature(fn).parameters]
    assert drivers, f"no test in {BROWSER_TEST_MODULES} drives the shared browser: the guard reads the wrong files"
    unguarded = [f"{module}.py: {name}" for module, name, fn in drivers if not hasattr(fn, "__wrapped__")]
    assert not unguarded, f"decorate these with @survives_a_hung_browser: {unguarded}"
