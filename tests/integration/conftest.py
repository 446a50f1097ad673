"""What integration tests of several stages share: a free port, and Locust's start form in a headless browser."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from loadtests import nullserver


@pytest.fixture(name="free_port")
def free_port_fixture() -> int:
    return nullserver.free_port()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def locust_form():
    """locust_form(url): a page of Debian's chromium, headless, driven by Playwright (never `playwright
    install`), on Locust's start form at url with its custom parameters open."""
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

    @contextmanager
    def open_form(url: str):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page()
            page.goto(url)
            page.get_by_text("Advanced options").click()
            page.get_by_text("Custom parameters").click()
            try:
                yield page
            finally:
                browser.close()

    return open_form
