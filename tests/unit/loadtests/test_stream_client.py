"""One streaming client: Locust's session (the load generator, the web UI) and httpx (the rounds, the experiments,
the build's checks) feed the same parser, so one recorded stream gives the same record through either, every chunk
stamped as it arrives and a stream without [DONE] an error; the experiments' figures are docs/metrics.md's. A server
that refuses token ids on a stream (SGLang 0.5.17 and later, on chat) is found before the cell, which asks for none."""

import io
import json
from pathlib import Path

import httpx
import pytest

from ddbench import flag_cost
from ddbench.core.profile import load_profile
from loadtests.client import _arrived, consume, stream, streams_token_ids
from loadtests.options import cell_argv


def _events(done: bool = True) -> bytes:
    out = [{"choices": [{"delta": {"content": t}, "token_ids": [i]}]} for i, t in enumerate(["He", "llo", "!"])]
    out[-1]["choices"][0]["finish_reason"] = "length"
    out.append({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7},
                "sglext": {"spec_tokens_details": {"spec_verify_ct": 2}}})
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in out) + ("data: [DONE]\n\n" if done else "")
    return text.encode()


class _Raw:
    """geventhttpclient's response as Locust's FastResponse keeps it: whole lines, then b'' at the end."""

    def __init__(self, data: bytes, complete: bool = True):
        self._io, self.message_complete = io.BytesIO(data), complete

    def readline(self, sep: bytes) -> bytes:
        return self._io.readline()


def _blank() -> dict:
    return {"chunks": [], "status": 200, "error": None, "finish_reason": None, "usage": None, "spec": None,
            "output_token_ids": None}


def _via_httpx(data: bytes) -> dict:
    client = httpx.Client(base_url="http://server", transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})))
    with client:
        return stream(client, {"model": "m"}, "r1")


def _same(r: dict) -> tuple:
    return ([c.text for c in r["chunks"]], r["usage"], r["spec"], r["finish_reason"], r["output_token_ids"],
            r["error"])


@pytest.mark.parametrize("done", [True, False])
def test_one_recorded_stream_gives_one_record_through_either_transport(done):
    locust = _blank()
    consume(_arrived(_Raw(_events(done))), locust)
    other = _via_httpx(_events(done))
    assert _same(locust) == _same(other)
    assert [c.text for c in other["chunks"]] == ["He", "llo", "!"] and other["output_token_ids"] == [0, 1, 2]
    assert other["error"] == (None if done else "stream ended without [DONE]")
    for r in (locust, other):   # every chunk stamped when it arrived, in order
        stamps = [c.t_ns for c in r["chunks"]]
        assert all(t > 0 for t in stamps) and stamps == sorted(stamps)
    assert other["send_ns"] <= other["headers_ns"] <= other["chunks"][0].t_ns <= other["end_ns"]


def test_a_connection_closed_mid_stream_is_an_error():
    with pytest.raises(ConnectionError, match="mid-stream"):
        consume(_arrived(_Raw(_events()[:40], complete=False)), _blank())


def test_a_refused_request_keeps_the_server_s_words():
    client = httpx.Client(base_url="http://server", transport=httpx.MockTransport(
        lambda request: httpx.Response(400, content=b"bad field")))
    with client:
        r = stream(client, {}, "r1")
    assert r["status"] == 400 and "bad field" in r["error"] and not r["chunks"]


def test_the_flag_cost_figures_are_the_metrics_formulas(monkeypatch):
    real = httpx.Client
    monkeypatch.setattr(flag_cost.httpx, "Client", lambda base_url: real(
        base_url=base_url, transport=httpx.MockTransport(lambda request: httpx.Response(200, content=_events()))))
    got = flag_cost.measure("http://server", {"model": "m"})
    assert got["tokens"] == 3 and got["tpot_ms"] > 0 and got["ttft_ms"] > 0
    # TPOT runs to the request's end, as formulas.tpot_s has it (not to the last chunk): E2E = TTFT + (n - 1) TPOT
    assert got["tok_s"] == pytest.approx(3 / (got["ttft_ms"] / 1e3 + 2 * got["tpot_ms"] / 1e3), rel=1e-9)


STOCK_0517 = (b'{"object":"error","message":"return_token_ids is not supported with streaming on '
              b'/v1/chat/completions. Please set stream=false when using return_token_ids=true.","code":400}')


@pytest.mark.parametrize("status, content, streams", [
    (200, _events(), True),
    (400, STOCK_0517, False),             # SGLang 0.5.17's answer to a chat stream that asks for ids
    (400, b'{"message": "max_tokens must be positive"}', True),   # another refusal: the cell reports it
])
def test_whether_a_server_streams_token_ids_is_asked_once_before_the_cell(monkeypatch, status, content, streams):
    seen = []

    def answer(request):
        seen.append(json.loads(request.content))
        return httpx.Response(status, content=content)

    real = httpx.Client
    monkeypatch.setattr(httpx, "Client",
                        lambda base_url: real(base_url=base_url, transport=httpx.MockTransport(answer)))
    assert streams_token_ids("http://server/", "m") is streams
    assert len(seen) == 1 and seen[0]["return_token_ids"] is True and seen[0]["max_tokens"] == 1


def test_a_cell_on_a_server_without_token_ids_asks_for_none():
    p = load_profile("cpu-tiny")
    for ids, word in ((True, "true"), (False, "false")):
        argv = cell_argv(p.workload, p.load, arm="ar", concurrency=1, repetition=1, records_dir=Path("/tmp/x"),
                         model="m", token_ids=ids)
        assert argv[argv.index("--return-token-ids") + 1] == word
