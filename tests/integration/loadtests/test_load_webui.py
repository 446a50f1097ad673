"""Locust's web UI in real headless Chromium: our options show (and the fields that file the records do not), a
run starts, counts grow, it stops."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from loadtests.recorder import read_records

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def web_ui(null_server, write_profile, free_port, tmp_path):
    srv = null_server(ttft_ms=20, itl_ms=10, tokens=40)
    prof = write_profile({"concurrency": [3], "warmup_requests": 1, "requests_per_user": 5})
    proc = subprocess.Popen([sys.executable, "-m", "loadtests", "ui", "--profile", str(prof), "--arm", "ar",
                             "--url", srv.url, "--port", str(free_port), "--records-dir",
                             str(tmp_path / "records")], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{free_port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"web UI did not come up: {proc.communicate()[0]}")
    yield url
    proc.terminate()
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode is not None, out


def total_requests(url: str) -> int:
    stats = httpx.get(url + "/stats/requests", timeout=5).json()
    return next(s["num_requests"] for s in stats["stats"] if s["name"] == "Aggregated")


def test_web_ui_runs_a_load_with_our_options(web_ui, locust_form, tmp_path):
    records = tmp_path / "records"
    with locust_form(web_ui) as page:
        form = page.locator("form")
        for label in ("Prompt Set", "Category", "Max Tokens", "Temperature", "Warmup Requests",
                      "Requests Per User"):
            assert form.get_by_text(label, exact=False).first.is_visible(), label
        for name in ("recordsDir", "arm", "concurrency", "repetition"):   # set by the session, not typed
            assert page.locator(f"input[name={name}]").count() == 0, name
        assert page.input_value("input[name=promptSet]").endswith("study5.jsonl")
        page.fill("input[name=userCount]", "3")
        page.fill("input[name=requestsPerUser]", "0")  # no limit: the run goes on until stopped
        page.fill("input[name=maxTokens]", "7")
        page.get_by_role("button", name="Start").click()

        deadline = time.monotonic() + 30
        while total_requests(web_ui) == 0 and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert total_requests(web_ui) > 0
        page.get_by_text("chat", exact=True).first.wait_for(timeout=10_000)  # the stats table shows our requests
        assert "RUNNING" in page.locator("header").inner_text().upper()
        page.screenshot(path=str(tmp_path / "running.png"), full_page=True)

        page.get_by_role("button", name="Stop").click()
        page.get_by_text("STOPPED", exact=False).first.wait_for(timeout=15_000)

    recs = read_records(records)
    assert recs, "the UI run wrote no records"
    assert all(r.arm == "ar" and r.concurrency == 3 and r.max_tokens == 7 for r in recs)
    assert all(r.ok and r.usage.completion_tokens == 7 for r in recs)
    assert {r.user for r in recs} <= {0, 1, 2}
