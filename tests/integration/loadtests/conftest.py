"""A real null server process on a free port, and small profiles written to disk."""

from __future__ import annotations

import shutil
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from loadtests import nullserver


@dataclass
class NullServer:
    url: str
    log: Path


@pytest.fixture(name="free_port")
def free_port_fixture() -> int:
    return nullserver.free_port()


@pytest.fixture
def null_server(tmp_path):
    with ExitStack() as stack:
        def start(**flags) -> NullServer:
            log = tmp_path / f"null-{nullserver.free_port()}.jsonl"
            return NullServer(stack.enter_context(nullserver.running(log=log, **flags)), log)

        yield start


@pytest.fixture
def write_profile(tmp_path):
    def write(load: dict, workload: dict | None = None, name: str = "nulltest") -> Path:
        data = {"name": name, "backend": {"kind": "refengine"}, "models": {"target": "none"},
                "arms": [{"id": "ar", "kind": "ar"}],
                "workload": {"prompt_set": "loadtests/prompts/study5.jsonl", "max_tokens": 32, **(workload or {})},
                "load": load}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write


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
