"""The reference server against its contract: SGLang's endpoints, stream shape, metrics, logs, faults."""

from __future__ import annotations

import json
import re
import signal
import threading
import time

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

ARMS = {
    "ar": (),
    "linear-b8": ("--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"),
    "chain-b7": ("--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8",
                 "--speculative-ddtree-budget", "7", "--speculative-ddtree-topk", "1"),
    "tree-b7-k3": ("--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8",
                   "--speculative-ddtree-budget", "7", "--speculative-ddtree-topk", "3"),
}
# SGLang's scheduler line, as its format string writes it (TP = 1: no rank tag)
DECODE_LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Decode batch, #running-req: (\d+), #token: (\d+), "
    r"token usage: (\d+\.\d\d), (?:accept len: (\d+\.\d\d), accept rate: (\d+\.\d\d), )?"
    r"cuda graph: (True|False), gen throughput \(token/s\): (\d+\.\d\d), #queue-req: (\d+)$")
DDTREE_LINE = re.compile(r"^\[[^\]]+\] DDTree window, steps: (\d+), avg tree nodes: (\d+\.\d\d), "
                         r"avg accepted depth: (\d+\.\d\d), avg commit length: (\d+\.\d\d)$")


def chat(prompt="w1 w2 w3 w4", **extra):
    return {"model": None, "messages": [{"role": "user", "content": prompt}], "max_tokens": 24,
            "temperature": 0, "ignore_eos": True, **extra}


def stream_events(url, body, path="/v1/chat/completions"):
    """Every SSE data payload, parsed, with its arrival time."""
    out = []
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.fixture(scope="module", params=list(ARMS))
def arm_server(request, server_factory, pair_dir):
    flags = ARMS[request.param]
    if flags:
        flags = (*flags[:2], "--speculative-draft-model-path", str(pair_dir / "drafter"), *flags[2:])
    return request.param, server_factory(*flags, "--decode-log-interval", "5", "--max-running-requests", "4")


def test_stream_shape_and_chunk_per_step(arm_server):
    arm, srv = arm_server
    events = stream_events(srv.url, chat(stream_options={"include_usage": True}, return_spec_tokens_details=True))
    assert events[-1] == "[DONE]"
    role, *rest = events[:-1]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [e for e in rest if e["choices"] and e["choices"][0]["delta"].get("content")]
    finish = [e for e in rest if e["choices"] and e["choices"][0]["finish_reason"]]
    spec, usage = rest[-2], rest[-1]
    assert finish and finish[0]["choices"][0]["finish_reason"] == "length"
    assert spec["choices"] == [] and "spec_tokens_details" in spec["sglext"]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 24
    details = spec["sglext"]["spec_tokens_details"]
    # one content chunk for the prefill token, then one per verify step
    assert len(content) == details["spec_verify_ct"] + 1
    # the chunk of the first token carries one word, later chunks carry what a step committed
    words = sum(len(e["choices"][0]["delta"]["content"].split()) for e in content)
    assert words == 24
    assert details["spec_accept_length"] == pytest.approx(24 / details["spec_verify_ct"])
    if arm == "ar":
        assert details["spec_verify_ct"] == 23 and details["spec_num_proposed_drafts"] == 0
    else:
        hist = details["spec_correct_drafts_histogram"]
        assert sum(hist) == details["spec_verify_ct"]
        assert details["spec_accepted_depth_histogram"] == hist  # commit = depth + 1 on a path


def test_non_streaming_matches_streaming(arm_server):
    _, srv = arm_server
    body = chat(return_spec_tokens_details=True)
    r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=60).json()
    streamed = "".join(e["choices"][0]["delta"].get("content", "") for e in stream_events(srv.url, body)[:-1]
                       if e["choices"])
    assert r["choices"][0]["message"]["content"] == streamed
    assert r["usage"]["completion_tokens"] == 24 and r["choices"][0]["finish_reason"] == "length"
    assert r["sglext"]["spec_tokens_details"]["spec_verify_ct"] >= 1


def test_token_ids_are_the_generated_ids(arm_server, pair_dir):
    # return_token_ids: each streamed choice carries the ids it adds; together they are the output,
    # the same as the non-streamed choice's, and they decode to the text
    from refengine.tokenizer import Tokenizer
    _, srv = arm_server
    body = chat(return_token_ids=True, stream_options={"include_usage": True})
    events = [e for e in stream_events(srv.url, body)[:-1] if e["choices"]]
    ids = [i for e in events for i in e["choices"][0].get("token_ids", [])]
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
    r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=60).json()
    assert len(ids) == 24 and r["choices"][0]["token_ids"] == ids
    assert Tokenizer.from_pretrained(pair_dir / "target").decode(ids) == text
    assert all("token_ids" not in e["choices"][0] for e in stream_events(srv.url, chat())[:-1] if e["choices"])


AR_TEXTS: dict[str, list[str]] = {}  # filled by the ar server, which runs first (ARMS order)


def test_every_arm_gives_ar_tokens_at_t0(arm_server):
    arm, srv = arm_server
    prompts = ["w5 w6 w7", "w100 w3", "w9 w9 w9 w9 w9", "w42"]
    got = [httpx.post(srv.url + "/v1/completions", timeout=60, json={
        "prompt": p, "max_tokens": 20, "temperature": 0}).json()["choices"][0]["text"] for p in prompts]
    assert all(got)
    if arm == "ar":
        AR_TEXTS["ar"] = got
    else:
        assert "ar" in AR_TEXTS, "the ar server's test did not run first"
        assert got == AR_TEXTS["ar"]


def test_concurrent_requests_get_what_they_get_alone(arm_server):
    _, srv = arm_server
    prompts = [f"w{i} w{i + 1} w{i + 2}" for i in range(1, 9)]
    alone = [httpx.post(srv.url + "/v1/completions", timeout=60,
                        json={"prompt": p, "max_tokens": 16, "temperature": 0, "ignore_eos": True}).json()
             for p in prompts]
    together = [None] * len(prompts)

    def send(i):
        together[i] = httpx.post(srv.url + "/v1/completions", timeout=60, json={
            "prompt": prompts[i], "max_tokens": 16, "temperature": 0, "ignore_eos": True}).json()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r["choices"][0]["text"] for r in together] == [r["choices"][0]["text"] for r in alone]


def test_seeded_sampling_repeats(arm_server):
    _, srv = arm_server
    body = {"prompt": "w1 w2", "max_tokens": 16, "temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 7}
    a, b = (httpx.post(srv.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
            for _ in range(2))
    assert a == b


def test_metrics_and_log_lines(arm_server):
    arm, srv = arm_server
    for _ in range(2):
        httpx.post(srv.url + "/v1/chat/completions", json=chat(max_tokens=40), timeout=60)
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(srv.url + "/metrics").text)}
    for name in ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:spec_verify_calls",
                 "sglang:generation_tokens", "sglang:num_running_reqs", "sglang:num_queue_reqs",
                 "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                 "sglang:e2e_request_latency_seconds"):
        assert name in families, name
    gen = next(s.value for s in families["sglang:generation_tokens"].samples if s.name.endswith("_total"))
    assert gen >= 80
    info = httpx.get(srv.url + "/server_info").json()
    assert info["internal_states"][0]["avg_spec_accept_length"] >= 1.0
    lines = srv.log.read_text().splitlines()
    decode = [m for m in map(DECODE_LINE.match, lines) if m]
    assert decode, "no Decode batch line in the log"
    assert all((m.group(4) is None) == (arm == "ar") for m in decode)
    trees = [m for m in map(DDTREE_LINE.match, lines) if m]
    if arm.startswith(("chain", "tree")):
        assert trees
        for m in trees:  # commit length = accepted depth + 1, averaged over the same steps
            assert float(m.group(4)) == pytest.approx(float(m.group(3)) + 1, abs=0.011)
    else:
        assert not trees


BAD = [
    (b'{"messages": [', "not valid JSON"),
    (b'{"max_tokens": 5}', "messages"),
    (b'{"messages": []}', "messages"),
    (b'{"model": "gpt-9", "messages": [{"role": "user", "content": "w1"}]}', "not served here"),
    (b'{"messages": [{"role": "user", "content": "w1"}], "max_tokens": 0}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "w1"}], "max_tokens": 100000}', "context length"),
    (b'{"messages": [{"role": "user", "content": "w1"}], "temperature": -1}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "w1"}], "max_tokens": "ten"}', "max_tokens"),
    (b'{"messages": "hello"}', "messages"),
    (b'{"messages": [{"role": "user", "content": "w1 \xff\xfe"}]}', "UTF-8"),
    (json.dumps({"messages": [{"role": "user", "content": " ".join(["w3"] * 300)}]}).encode(), "context"),
]


@pytest.mark.parametrize("body,needle", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_is_a_400_and_the_server_keeps_serving(server_factory, body, needle):
    srv = _plain(server_factory)
    r = httpx.post(srv.url + "/v1/chat/completions", content=body, timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert needle in err["message"] and err["type"] == "invalid_request_error" and err["code"] == 400
    assert httpx.post(srv.url + "/v1/chat/completions", json=chat(max_tokens=2), timeout=30).status_code == 200


_PLAIN = {}


def _plain(server_factory):
    if "s" not in _PLAIN or _PLAIN["s"].proc.poll() is not None:
        _PLAIN["s"] = server_factory("--max-running-requests", "1", "--decode-log-interval", "1")
    return _PLAIN["s"]


def running(srv) -> tuple[float, float]:
    fams = {f.name: f for f in text_string_to_metric_families(httpx.get(srv.url + "/metrics").text)}
    return (fams["sglang:num_running_reqs"].samples[0].value, fams["sglang:num_queue_reqs"].samples[0].value)


def test_disconnect_frees_the_slot(server_factory):
    srv = _plain(server_factory)
    with httpx.stream("POST", srv.url + "/v1/chat/completions", timeout=30,
                      json=chat(max_tokens=200, stream=True)) as r:
        for line in r.iter_lines():
            if '"content": "w' in line or '"content":"w' in line:
                break
    deadline = time.monotonic() + 5
    while running(srv) != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(srv) == (0, 0)
    # the slot is usable again: a new request completes
    assert httpx.post(srv.url + "/v1/chat/completions", json=chat(max_tokens=3), timeout=30).status_code == 200


def test_requests_beyond_max_running_wait_in_the_queue(server_factory):
    srv = _plain(server_factory)  # --max-running-requests 1
    threads = [threading.Thread(target=httpx.post, args=(srv.url + "/v1/chat/completions",),
                                kwargs={"json": chat(max_tokens=150), "timeout": 60}) for _ in range(3)]
    for t in threads:
        t.start()
    seen = set()
    deadline = time.monotonic() + 30
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        seen.add(running(srv))
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert max(r for r, _ in seen) <= 1
    assert max(q for _, q in seen) >= 1
    queued = [int(m.group(8)) for m in map(DECODE_LINE.match, srv.log.read_text().splitlines()) if m]
    assert max(queued) >= 1


def test_sigterm_ends_in_flight_requests_within_seconds(server_factory):
    srv = server_factory("--max-running-requests", "2")
    result = {}

    def long_stream():
        try:
            result["events"] = stream_events(srv.url, chat(max_tokens=230))
        except httpx.HTTPError as e:
            result["error"] = e

    t = threading.Thread(target=long_stream)
    t.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(15)
    took = time.monotonic() - t0
    t.join(15)
    assert took < 8, f"shutdown took {took:.1f} s"
    assert not t.is_alive()


def test_memory_is_bounded_under_a_burst(server_factory):
    srv = server_factory("--max-running-requests", "8")
    proc = psutil.Process(srv.proc.pid)
    base = proc.memory_info().rss
    threads = [threading.Thread(target=httpx.post, args=(srv.url + "/v1/completions",),
                                kwargs={"json": {"prompt": " ".join(["w7"] * 100), "max_tokens": 100,
                                                 "ignore_eos": True}, "timeout": 300}) for _ in range(64)]
    peak = base
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, proc.memory_info().rss)
        time.sleep(0.05)
    print(f"server RSS: {base / 2**20:.0f} MiB at rest, {peak / 2**20:.0f} MiB peak under 64 concurrent requests")
    # KV slots are allocated at start-up; the burst only queues, so memory barely moves
    assert peak - base < 200 * 2**20
