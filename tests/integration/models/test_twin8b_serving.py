"""The qwen3-8b twin at 8B cost, served: it loads in the reference engine and, through the offline GPU bundles, in
SGLang, and every arm of the twin's two profiles answers a request, its speculative arms with the trained
pair's acceptance (a twin whose drafter lost the pair's predictions would verify one token a step).

GPU tests: they need CUDA and the twin (`just twin qwen3-8b --seed 0 --dtype bf16`, or DDBENCH_TWIN_DIR);
SGLang's half also needs the bundles on PYTHONPATH (`containers/offline/setup.sh harness sglang sglang-ddtree`).
Graphs are off here, so that each server comes up in seconds; the committed runs serve the twin with them on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from containers import gpu_memory
from containers.launch import server_command
from ddbench.core import prom
from ddbench.core.profile import load_profile

REPO = Path(__file__).resolve().parents[3]
PROFILES = {"refengine": "h200-twin8b", "sglang": "h200-twin8b-sglang"}
TWIN = Path(os.environ.get("DDBENCH_TWIN_DIR", REPO / ".twins/qwen3-8b-s0"))
MAX_TOKENS = 64
# the shipped pair verifies ~6-8 tokens a step on chat prompts; a drafter that predicts nothing verifies 1
MIN_TAU = 2.0

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not (TWIN / "twin.json").is_file(),
                                 reason=f"no twin at {TWIN}: just twin qwen3-8b --seed 0 --dtype bf16")]


def _cases() -> list[tuple[str, str]]:
    return [(backend, arm.id) for backend, name in PROFILES.items() for arm in load_profile(name).arms]


def _profile(backend: str):
    """The backend's twin profile with graphs off; SGLang's for this card: its shares of an H200 would leave an 80 GB
    card less than the twin's 16.4 GB of weights (0.16 x 80 GB)."""
    name = PROFILES[backend]
    if backend == "sglang" and _gpu_gib() <= 100:
        name = "h100-twin8b-sglang"
    profile = load_profile(name)
    return profile.model_copy(update={"runtime": profile.runtime.model_copy(update={"cuda_graphs": False})})


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


@pytest.mark.parametrize(("backend", "arm_id"), _cases())
def test_each_arm_serves_the_twin_with_the_pairs_acceptance(backend, arm_id, refengine_servers, tmp_path):
    if backend == "sglang" and importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang's bundles are not on PYTHONPATH: containers/offline/setup.sh harness sglang sglang-ddtree")
    profile = _profile(backend)
    if arm_id not in {a.id for a in profile.arms}:
        pytest.skip(f"{arm_id} is not an arm of {profile.name}, the profile for this card")
    arm, port = profile.arm(arm_id), refengine_servers.free_port()
    sized, _ = gpu_memory.fitted_now(profile)
    launch = server_command(sized, arm, port=port, python=sys.executable)
    argv = launch.argv + (["--disable-piecewise-cuda-graph"] if backend == "sglang" else [])
    url = refengine_servers.launch(argv, port, tmp_path / "server.log", env={**os.environ, **launch.env},
                                   timeout=600)
    prompt = json.loads((REPO / profile.workload.prompt_set).read_text().splitlines()[0])
    before = prom.parse(_get(url + "/metrics"))
    reply = _post(url + "/v1/chat/completions",
                  {"model": profile.models.target, "messages": prompt["messages"], "max_tokens": MAX_TOKENS,
                   "temperature": 0, "ignore_eos": True})
    assert reply["usage"]["completion_tokens"] == MAX_TOKENS
    assert reply["choices"][0]["message"]["content"].strip()
    deadline = time.monotonic() + 10
    while True:   # a server may count a finished request a moment after answering it
        after = prom.parse(_get(url + "/metrics"))
        generated = after.get(prom.GENERATED, 0) - before.get(prom.GENERATED, 0)
        if generated >= MAX_TOKENS or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert generated == MAX_TOKENS
    if arm.kind != "ar":
        steps = after[prom.VERIFY_CALLS] - before.get(prom.VERIFY_CALLS, 0)
        assert generated / steps >= MIN_TAU, f"{backend} {arm_id}: tau {generated / steps:.2f}"


def _gpu_gib() -> float:
    import torch
    return torch.cuda.get_device_properties(0).total_memory / 2**30 if torch.cuda.is_available() else 0.0


def test_one_interleaved_round_per_arm_of_the_twin_on_sglang(refengine_servers, tmp_path):
    """Every arm of the twin's SGLang profile up together, as the sweep brings them up (an 80 GB card holds the
    H100 profile's three), then one rounds stretch at C=1 through the real runner: each arm answers the same
    prompts in turn, no two units overlap, and each arm's cell holds its own records and metrics."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("SGLang's bundles are not on PYTHONPATH: containers/offline/setup.sh harness sglang sglang-ddtree")
    from ddbench.core.results import read_records
    from loadtests.cell import probe
    from loadtests.rounds import Target, run_stretch

    profile = _profile("sglang")
    targets = []
    for arm in profile.arms:   # one at a time, each sized to its share of the GPU, as the sweep starts them
        port = refengine_servers.free_port()
        sized, _ = gpu_memory.fitted_now(profile)
        launch = server_command(sized, arm, port=port, python=sys.executable)
        url = refengine_servers.launch(launch.argv + ["--disable-piecewise-cuda-graph"], port,
                                       tmp_path / f"{arm.id}.log", env={**os.environ, **launch.env}, timeout=600)
        work = profile.workload_for(arm.id).model_copy(update={"max_tokens": MAX_TOKENS})
        targets.append(Target(arm.id, url, tmp_path / arm.id, work, probe(url)))
    before = {t.arm: prom.parse(_get(t.url + "/metrics")) for t in targets}
    load = profile.load.model_copy(update={"requests_per_user": 2, "warmup_requests": 0, "unit_s": None})
    statuses = run_stretch(targets, load, concurrency=1, repetition=1)
    recs = {t.arm: read_records(t.cell_dir) for t in targets}
    for t in targets:
        assert statuses[t.arm].status == "ok" and statuses[t.arm].requests == 2, statuses[t.arm]
        assert [r.usage.completion_tokens for r in recs[t.arm]] == [MAX_TOKENS, MAX_TOKENS]
        if profile.arm(t.arm).kind != "ar":
            after = prom.parse(_get(t.url + "/metrics"))
            steps = after[prom.VERIFY_CALLS] - before[t.arm].get(prom.VERIFY_CALLS, 0)
            assert 2 * MAX_TOKENS / steps >= MIN_TAU, f"{t.arm}: tau {2 * MAX_TOKENS / steps:.2f}"
    for j in (0, 1):   # the same prompt to every arm of a round
        assert len({r.prompt_id for a in recs for r in recs[a] if r.round == j}) == 1
    spans = sorted((r.send_ns, r.end_ns) for a in recs for r in recs[a])
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))
