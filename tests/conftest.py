"""Fixtures of the browser tests (tests/test_browser_*.py) and of tests/test_site.py, shared by all of
them for the whole session: the site is built once, served once, and crawled once, whichever of the
modules run. And the pool that builds the course's programs ahead of the tests (tests/build_ahead.py).

Without Chromium or Playwright the browser tests are skipped with the reason; under CI (CI set in the
environment) they fail instead, so a CI machine cannot pass without running them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import browser_support as bs
import build_ahead
from browser_driver import RelaunchableBrowser, crawl_pages

TESTS = Path(__file__).resolve().parent


def _need(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests, but {reason}: {bs.INSTALL_HINT}")
    pytest.skip(f"{reason}: {bs.INSTALL_HINT}")


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    return bs.build_site(tmp_path_factory.mktemp("browser-site"))


@pytest.fixture(scope="session")
def base_url(site):
    with bs.serve(site) as url:
        yield url


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
def crawl(browser, base_url, site):
    """Visit every page once on a desktop, then at phone width, gathering everything the tests check.
    The pages are shared among COURSE_BROWSER_WORKERS browsers (default: 2, or 1 on one core)."""
    workers = max(1, int(os.environ.get("COURSE_BROWSER_WORKERS") or min(2, os.cpu_count() or 1)))
    return crawl_pages(base_url, bs.site_pages(site), workers,
                       limit_s=float(os.environ.get("COURSE_CRAWL_TIMEOUT_S", 1800)))


# ----------------------------------------------------------------------------- building ahead


class _BuildAhead:
    """Holds the pool of tests/build_ahead.py for the session (registered as a plugin, so that its
    hooks see every item, the pages' blocks too)."""

    def __init__(self, pool: build_ahead.Pool):
        self.pool = pool

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        # A page's blocks may compile into build/ themselves, and a benchmark is timed on a quiet
        # machine: the pool has finished before the first of either.
        if TESTS not in Path(item.path).resolve().parents or item.get_closest_marker("bench") is not None:
            self.pool.drain()

    def pytest_sessionfinish(self):
        self.pool.stop()


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    pool = build_ahead.Pool(build_ahead.builds_of(session.items), build_ahead.jobs())
    session.config.pluginmanager.register(_BuildAhead(pool), "course-build-ahead")
