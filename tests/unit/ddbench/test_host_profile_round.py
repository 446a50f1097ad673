"""The host-profile round: one unmeasured unit per arm at C=1 and C=8, each under SGLang's profiler with CPU
activity and Python stacks for HOST_STEPS forward steps, summarized where the GPU's idle time went."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx

from containers import kernel_time
from ddbench import sweep
from ddbench.core import schedule
from ddbench.core.profile import load_profile

STEP = "/s/sglang/srt/managers/scheduler.py(1): run_batch"


def test_each_arm_is_profiled_at_c1_and_c8_with_the_host_frames(monkeypatch, tmp_path):
    monkeypatch.setenv("DDBENCH_TWIN_DIR", str(tmp_path))
    profile = load_profile("h200-twin8b-sglang")
    block = schedule.blocks(profile)[0]
    servers = {a.id: SimpleNamespace(url=f"http://h:{30000 + i}") for i, a in enumerate(profile.arms)}
    posted, rounds = [], []

    def post(url, json=None, **kw):
        posted.append((url, json))
        return httpx.Response(500 if url.endswith("/stop_profile") else 200, text="not in progress")

    monkeypatch.setattr(kernel_time.httpx, "post", post)

    def stretch(targets, load, *, concurrency, repetition, around):
        rounds.append((concurrency, [t[0] for t in targets], load.requests_per_user, repetition))
        for arm, _, url, _, _ in targets:
            with around(SimpleNamespace(arm=arm, url=url)) as timer:   # the server wrote its trace on its own
                (timer.dir / "ddbench.trace.json").write_text(json.dumps({"traceEvents": [
                    {"ph": "X", "cat": "python_function", "name": STEP, "ts": 0, "dur": 100, "pid": 1, "tid": 1},
                    {"ph": "X", "cat": "kernel", "name": "k", "ts": 20, "dur": 60, "pid": 0, "tid": 0}]}))

    sweep.time_host(profile, block, tmp_path, servers, stretch, outside=False)
    arms = [a.id for a in profile.arms]
    assert rounds == [(1, arms, 1, 0), (8, arms, 1, 0)]            # C = 32 is not profiled
    start = posted[0][1]
    assert posted[0][0] == "http://h:30000/start_profile"
    assert start["activities"] == ["CPU", "GPU"] and start["with_stack"] and start["num_steps"] == sweep.HOST_STEPS
    doc = json.loads((tmp_path / "diagnostics" / "host-profile" / "ar-c1.json").read_text())
    assert "error" not in doc                                      # a server that stopped itself is no failure
    assert doc["steps"] == 1 and doc["idle_ms_per_step"] == 0.04 and doc["top_sglang_ms"][0][1] == 0.04
    n = len(rounds)
    sweep.time_host(profile, block, tmp_path, servers, stretch, outside=False)   # a resumed sweep keeps them
    assert len(rounds) == n


def test_the_gpu_time_round_profiles_the_gpu_alone_and_a_failed_stop_is_an_error(monkeypatch, tmp_path):
    posted = []

    def post(url, json=None, **kw):
        posted.append(json)
        return httpx.Response(500 if url.endswith("/stop_profile") else 200, text="boom")

    monkeypatch.setattr(kernel_time.httpx, "post", post)
    with kernel_time.KernelTimer("http://h:1", tmp_path / "k.json"):
        pass
    assert posted[0]["activities"] == ["GPU"] and not posted[0]["with_stack"] and "num_steps" not in posted[0]
    assert "HTTP 500" in json.loads((tmp_path / "k.json").read_text())["error"]
