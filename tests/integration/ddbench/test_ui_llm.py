"""`just ui PROFILE` for real: the reference engine serves, Locust's UI and ddbench's LLM view in headless
Chromium, two Locust processes merged on the master, an arm switch, the session analysed as a run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import psutil
import pytest

REPO = Path(__file__).resolve().parents[3]
# the page shows what the records give, by the same formulas: the only differences are the display's
# rounding (0.1 ms) and, for tokens/s, the span (the load's start against the window after warm-up)
SAME_FORMULA = 0.03
RATE = 0.15


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if value := predicate():
                return value
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def figure(page, metric: str, column: str = "total") -> str:
    return page.locator(f"xpath=//table[@id='figures']//tr[td[1][normalize-space()='{metric}']]"
                        f"/td[@class='{column}']").inner_text()


def number(text: str) -> float:
    return float(text)


@pytest.fixture
def ui(free_port, tmp_path):
    records = tmp_path / "session"
    proc = subprocess.Popen([sys.executable, "-m", "ddbench", "ui", "cpu-tiny", "--port",
                             str(free_port), "--records-dir", str(records), "--processes", "2"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{free_port}"
    try:
        wait_for(lambda: httpx.get(url + "/ddbench/stats", timeout=2).json()["state"] == "up", 120, "the UI")
    except AssertionError:
        proc.terminate()
        pytest.fail(f"the UI did not come up: {proc.communicate(timeout=60)[0][-3000:]}")
    yield url, records, proc
    if proc.poll() is None:
        proc.terminate()
        proc.communicate(timeout=60)


def test_live_llm_figures_arm_switch_and_the_session_as_a_run(ui, locust_form):
    url, records, proc = ui
    with locust_form(url) as page:
        # a load from Locust's own form, 2 users, no request limit
        page.fill("input[name=userCount]", "2")
        page.fill("input[name=requestsPerUser]", "0")
        page.fill("input[name=maxTokens]", "24")
        page.get_by_role("button", name="Start").click()
        wait_for(lambda: httpx.get(url + "/ddbench/stats", timeout=2).json()["total"]["requests"] >= 40, 90,
                 "40 requests")
        # Locust's page has the LLM tab, fed through its own /stats/requests
        page.get_by_role("tab", name="LLM").click()
        page.get_by_text("output tokens/s").first.wait_for(timeout=10_000)
        page.get_by_role("button", name="Stop").click()
        wait_for(lambda: httpx.get(url + "/stats/requests", timeout=2).json()["state"] == "stopped", 30, "the stop")

        page.goto(url + "/ddbench")
        page.locator("#arm", has_text="ar").wait_for(timeout=10_000)
        page.wait_for_timeout(2500)   # one refresh after the stop: the figures hold still now
        shown = {m: figure(page, m) for m in ("output tokens/s", "TTFT p50 (ms)", "TPOT p50 (ms)", "tau")}
        assert number(shown["tau"]) == 1.0
        assert "refengine.serve" in page.locator("#command").inner_text()
        page.screenshot(path=str(records / "llm-view.png"), full_page=True)

        # switch to the linear arm from the page: the server changes in place
        page.select_option("#arm-select", "linear-b16")
        page.click("#switch")
        page.locator("#arm", has_text="linear-b16").wait_for(timeout=60_000)
        page.locator("#state", has_text="up").wait_for(timeout=120_000)
        r = httpx.post(url + "/swarm", data={"user_count": 2, "spawn_rate": 10, "requests_per_user": 0,
                                             "max_tokens": 24}, timeout=10)
        assert r.json()["success"], r.text
        wait_for(lambda: httpx.get(url + "/ddbench/stats", timeout=2).json()["total"]["requests"] >= 20, 90,
                 "20 requests on linear-b16")
        page.wait_for_timeout(2500)
        assert number(figure(page, "tau", "window")) > 1.5   # live, while it runs
        httpx.post(url + "/stop", timeout=10)
        wait_for(lambda: httpx.get(url + "/stats/requests", timeout=2).json()["state"] == "stopped", 30, "the stop")
        page.wait_for_timeout(2500)
        tau_linear = number(figure(page, "tau"))
        assert tau_linear > 1.5 and figure(page, "tau from") == "requests"

    # both arms came up through the containers stage, each with its status.json and server.log
    servers = {arm: json.loads((records / arm / "status.json").read_text())["url"] for arm in ("ar", "linear-b16")}
    assert all((records / arm / "server.log").is_file() for arm in servers)
    proc.terminate()
    out = proc.communicate(timeout=90)[0]
    assert proc.returncode is not None, out
    for server in servers.values():   # both servers are down, and no Locust process is left
        with pytest.raises(httpx.HTTPError):
            httpx.get(server + "/v1/models", timeout=2)
    assert not [q for q in psutil.process_iter(["cmdline"]) if str(records) in " ".join(q.info["cmdline"] or [])]

    # the session analyses as a run: one cell per (arm, users) phase, whose figures the page showed
    done = subprocess.run([sys.executable, "-m", "ddbench", "analyze", str(records)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = pd.read_csv(records / "tables" / "cells.csv").set_index(["arm", "concurrency", "repetition"])
    assert sorted(cells.index) == [("ar", 2, 1), ("linear-b16", 2, 2)]
    ar = cells.loc[("ar", 2, 1)]
    assert number(shown["TTFT p50 (ms)"]) == pytest.approx(1000 * ar["ttft_p50"], rel=SAME_FORMULA)
    assert number(shown["TPOT p50 (ms)"]) == pytest.approx(1000 * ar["tpot_p50"], rel=SAME_FORMULA)
    assert number(shown["output tokens/s"]) == pytest.approx(ar["throughput"], rel=RATE)
    assert tau_linear == pytest.approx(cells.loc[("linear-b16", 2, 2)]["tau"], rel=SAME_FORMULA)
