"""backend 'external' in the sweep: nothing is started; an arm whose URL answers nothing has every cell failed
with a reason naming the arm and the URL while the other arm's cells run; each answering server's own
description is recorded without its API key."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from containers import external
from ddbench import sweep
from ddbench.core.profile import load_profile
from ddbench.core.records import CellStatus
from ddbench.core.results import STATUS, write_json_atomic

KEY = "sk-test-7f3a9c1e5b"
METRICS = """# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="stub-model"} 120.0
# HELP sglang:spec_verify_calls_total Number of speculative verify calls.
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="stub-model"} 40.0
"""


# fields of a real SGLang DFLASH server's /get_server_info whose names hold "token" or "key" but no credential
SGLANG_SIZES = {"speculative_num_draft_tokens": 16, "max_prefill_tokens": 16384, "max_total_num_tokens": 22000,
                "token_capacity": 22000, "tokenizer_path": "/models/stub", "hf_token": None}


class _SGLangLike(BaseHTTPRequestHandler):
    """What an SGLang server with --api-key answers: 401 without the key, and its server args (key included)."""

    def do_GET(self):  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            return self._send(401, {"error": "unauthorized"})
        if self.path == "/v1/models":
            return self._send(200, {"object": "list", "data": [{"id": "stub-model", "owned_by": "sglang"}]})
        if self.path == "/get_server_info":
            return self._send(200, {"model_path": "/models/stub", "version": "0.5.15", "api_key": KEY,
                                    "speculative_algorithm": "DFLASH", "tp_size": 1, **SGLANG_SIZES})
        if self.path == "/metrics":
            body = METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        return self._send(404, {"error": "not found"})

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def live_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SGLangLike)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def dead_url() -> str:
    with socket.socket() as s:   # a port nothing listens on once this closes
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def profile(tmp_path, live: str, dead: str):
    data = {"name": "ext", "backend": {"kind": "external"},
            "arms": [{"id": "down", "kind": "ar", "url": dead},
                     {"id": "up", "kind": "linear", "block_size": 16, "url": live, "api_key_env": "STUB_AUTH"}],
            "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 8},
            "load": {"concurrency": [1, 2], "requests_per_user": 1, "repetitions": 2}}
    path = tmp_path / "ext.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profile(path)


def test_unreachable_arm_fails_its_cells_and_the_other_arm_runs(tmp_path, live_url, monkeypatch):
    monkeypatch.setenv("STUB_AUTH", KEY)
    p, run_dir = profile(tmp_path, live_url, dead_url()), tmp_path / "run"
    calls = []

    def cell(workload, load, *, url, cell_dir, arm, concurrency, repetition, **kw):
        calls.append((arm, concurrency, repetition, url, kw))
        status = CellStatus(arm=arm, concurrency=concurrency, repetition=repetition, status="ok",
                            started_unix=time.time(), ended_unix=time.time())
        write_json_atomic(cell_dir / STATUS, status.model_dump(mode="json"))
        return status

    out = sweep.run_sweep(p, run_dir, cell, telemetry_interval_s=60)
    # the other arm's four cells ran against its server, with its model and its key's variable (not the key)
    assert [(a, c, r) for a, c, r, _, _ in calls] == [("up", 1, 1), ("up", 2, 1), ("up", 1, 2), ("up", 2, 2)]
    assert all(u == live_url and kw == {"model": "stub-model", "api_key_env": "STUB_AUTH"}
               for _, _, _, u, kw in calls)
    assert [s.status for s in out["up"]] == ["ok"] * 4
    # the unreachable arm: every cell failed, and the reason names the arm and the URL
    dead = p.arm("down").url
    assert [s.status for s in out["down"]] == ["failed"] * 4
    for c, r in ((1, 1), (2, 1), (1, 2), (2, 2)):
        reason = json.loads((run_dir / "down" / f"c{c}-r{r}" / STATUS).read_text())["reason"]
        assert "external arm 'down'" in reason and dead in reason
    assert json.loads((run_dir / "down" / STATUS).read_text())["status"] == "failed"
    # what the answering server said of itself, recorded; its echoed key is not
    info = json.loads((run_dir / "up" / external.SERVER_INFO).read_text())
    assert info["summary"]["version"] == "0.5.15" and info["summary"]["speculative_algorithm"] == "DFLASH"
    served = info["endpoints"]["/get_server_info"]
    assert {k: served[k] for k in SGLANG_SIZES} == SGLANG_SIZES and served["api_key"] == "<redacted>"
    assert info["summary"]["spec_counters"] == ["sglang:spec_verify_calls_total"]
    assert info["endpoints"]["/metrics"]["families"] == ["sglang:generation_tokens_total",
                                                         "sglang:spec_verify_calls_total"]
    assert json.loads((run_dir / "up" / STATUS).read_text())["status"] == "up"
    leaked = [f for f in run_dir.rglob("*") if f.is_file() and KEY in f.read_text()]
    assert leaked == []


def test_a_server_that_stops_answering_is_reported_by_the_handle(live_url, monkeypatch):
    monkeypatch.setenv("STUB_AUTH", KEY)
    assert external.ExternalServer("up", live_url, "stub-model", "STUB_AUTH").exited() is None
    url = dead_url()
    gone = external.ExternalServer("x", url, "m").exited()
    assert gone is not None and url in gone and "arm 'x'" in gone


def test_a_wrong_key_is_a_clear_failure(tmp_path, live_url, monkeypatch):
    monkeypatch.setenv("STUB_AUTH", "wrong-key-000")
    p = profile(tmp_path, live_url, dead_url())
    with pytest.raises(Exception) as e:
        external.check(p, "up", tmp_path / "run")
    assert "external arm 'up'" in str(e.value) and live_url in str(e.value) and "HTTP 401 Unauthorized" in str(e.value)
    assert "api_key_env" in str(e.value) and "no server answers" not in str(e.value)


def test_metric_families_and_summary_of_a_vllm_server():
    text = ("# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.\n"
            "# TYPE vllm:spec_decode_num_drafts counter\n"
            'vllm:spec_decode_num_drafts_total{engine="0"} 5.0\n')
    families = external.metric_families(text)
    assert families == ["vllm:spec_decode_num_drafts"]
    s = external.summarize({"/version": {"version": "0.11.0"}, "/metrics": {"families": families},
                            "/v1/models": {"data": [{"id": "Qwen/Qwen3-8B", "root": "/models/qwen3"}]}})
    assert s["engine"] == "vLLM" and s["version"] == "0.11.0" and s["models"] == ["Qwen/Qwen3-8B"]
    assert s["speculative_algorithm"].startswith("on (vLLM spec_decode counters")
    none = external.summarize({"/metrics": {"families": ["process_cpu_seconds"]}})
    assert none["engine"] is None and none["speculative_algorithm"] is None   # not reported, not guessed


def test_only_fields_that_hold_a_credential_are_redacted():
    info = {"api_key": "sk-1", "hf_token": "hf_x", "adminPassword": "p", "ssl_keyfile": "/k.pem", "api_keys": ["a"],
            "speculative_num_draft_tokens": 16, "max_total_num_tokens": 9, "token_capacity": 9,
            "tokenizer_path": "/t", "keyword": "x", "hf_token_unset": None,
            "nested": [{"secret": "s", "n": "sk-1 in text"}]}
    out = external.scrub(info, ["sk-1"])
    assert [k for k, v in out.items() if v == "<redacted>"] == ["api_key", "hf_token", "adminPassword", "ssl_keyfile",
                                                                 "api_keys"]
    assert out["nested"] == [{"secret": "<redacted>", "n": "<redacted> in text"}]
    assert out["speculative_num_draft_tokens"] == 16 and out["tokenizer_path"] == "/t" and out["keyword"] == "x"
