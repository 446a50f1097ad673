"""`ddbench ui` without --url: the arm comes up through the containers stage and goes down with the UI."""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx
import psutil

from ddbench.profile import load_profile
from loadtests.ui import serve


def test_ui_brings_the_arm_up_and_takes_it_down(write_profile, free_port, tmp_path):
    profile = load_profile(write_profile({"concurrency": [2], "requests_per_user": 2}))
    stand_in = [sys.executable, "-m", "loadtests.nullserver", "--port", "{port}",
                "--ttft-ms", "5", "--itl-ms", "1", "--tokens", "4"]
    records = tmp_path / "adhoc"
    result = {}
    t = threading.Thread(target=lambda: result.update(rc=serve(profile, "ar", port=free_port, records_dir=records,
                                                                  command=stand_in)))
    t.start()
    ui = f"http://127.0.0.1:{free_port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(ui, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    else:
        raise AssertionError("the web UI did not come up")
    arm = json.loads((records / "ar" / "status.json").read_text())
    assert arm["status"] == "up" and (records / "ar" / "server.log").is_file()
    assert httpx.get(arm["url"] + "/v1/models", timeout=5).status_code == 200
    # the UI drives the arm it brought up
    assert httpx.get(ui + "/", timeout=5).text.count(arm["url"]) >= 1

    locust = [p for p in psutil.Process().children(recursive=True) if "locust" in " ".join(p.cmdline())]
    assert locust
    for p in locust:
        p.terminate()
    t.join(timeout=60)
    assert not t.is_alive() and "rc" in result
    try:
        httpx.get(arm["url"] + "/v1/models", timeout=2)
        raise AssertionError("the arm is still up after the UI ended")
    except httpx.HTTPError:
        pass
