"""One streamed chat completion, timed by hand: the raw fields of a RequestRecord, through Locust's session
(stream_chat) or an httpx.Client (stream), one parser for both (consume).

Locust's own timer stops at the response headers when stream=True, so every time here is
perf_counter_ns taken by us. Lines are read as they arrive from the socket (readline on
what recv returned), never by a fixed-size read that would wait for the next event and
report TTFT one chunk gap late. Locust gets exactly one request event per request, with
the end-to-end time, so its CSV/HTML stay a sanity check and its RPS is not inflated.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ddbench.core.answers import refused
from ddbench.core.prompts import Prompt
from ddbench.core.records import Chunk
from loadtests.sse import EventParser

CHAT_PATH = "/v1/chat/completions"
PATHS = {"chat": CHAT_PATH, "completions": "/v1/completions"}   # workload.api -> the route
ERROR_TEXT_MAX = 500
STREAM_TIMEOUT_S = 600.0   # a long generation is slow, not dead
# the NAME of the variable holding an external server's API key (loadtests/cell.py sets it for Locust): the key
# travels by environment, never on a command line or in a file
API_KEY_ENV = "DDBENCH_API_KEY_ENV"


def auth_headers() -> dict[str, str]:
    key = os.environ.get(os.environ.get(API_KEY_ENV) or "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def raw_text(prompt: Prompt) -> str:
    """A prompt as /v1/completions takes it: its messages' contents as written, blank-line separated."""
    return "\n\n".join(m.content for m in prompt.messages)


def chat_body(prompt: Prompt, *, model: str, max_tokens: int, temperature: float, top_p: float = 1.0,
              top_k: int | None = None, ignore_eos: bool = True, token_ids: bool = True,
              seed: int | None = None, api: str = "chat") -> dict[str, Any]:
    """The request body for workload.api's route: messages for chat, the raw text for completions."""
    body: dict[str, Any] = {
        "model": model,
        **({"messages": [m.model_dump() for m in prompt.messages]} if api == "chat" else {"prompt": raw_text(prompt)}),
        "max_tokens": prompt.max_tokens or max_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "stream": True,
        "stream_options": {"include_usage": True},
        # SGLang's extension; servers without it ignore unknown fields
        "return_spec_tokens_details": True,
    }
    if token_ids:
        # the generated ids in choices[].token_ids (the reference engine; SGLang's /v1/completions since
        # PR #30917). SGLang 0.5.15 ignores the field on chat; a release with #30917 but not #37365
        # refuses it on a chat stream (HTTP 400): turn it off there (--return-token-ids false)
        body["return_token_ids"] = True
    if top_k is not None:
        body["top_k"] = top_k
    if seed is not None:   # OpenAI's field; SGLang and the reference engine seed the request's sampler with it
        body["seed"] = seed
    if ignore_eos:
        body["ignore_eos"] = True
    return body


def stream_chat(session, body: dict[str, Any], request_id: str, name: str = CHAT_PATH,
                path: str = CHAT_PATH) -> dict[str, Any]:
    """Send one request through a Locust FastHttpSession; return the record's raw fields."""
    out = _blank()
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
               "Accept-Encoding": "identity", "X-Request-Id": request_id, **auth_headers()}
    data = json.dumps(body).encode()
    out["send_unix_ns"] = time.time_ns()
    out["send_ns"] = time.perf_counter_ns()
    with session.post(path, data=data, headers=headers, stream=True, catch_response=True, name=name) as resp:
        out["headers_ns"] = time.perf_counter_ns()
        try:
            read(resp, out, path)
        except Exception as e:  # a dropped or garbled stream is a record with an error, not a crash
            out["error"] = out["error"] or f"{type(e).__name__}: {e}"
        out["end_ns"] = time.perf_counter_ns()
        resp.request_meta["response_time"] = (out["end_ns"] - out["send_ns"]) / 1e6
        if out["error"]:
            resp.failure(out["error"])
        else:
            resp.success()
    if out["status"] is None:
        out["headers_ns"] = None  # no response: the time after the call is not a headers time
    return out


def read(resp, out: dict[str, Any], path: str = CHAT_PATH) -> None:
    err = getattr(resp, "error", None)
    if err is not None and not resp.status_code:
        out["error"] = f"{type(err).__name__}: {err}"
        return
    out["status"] = resp.status_code
    if resp.status_code != 200:
        out["error"] = refused(path, resp.status_code, resp.text or "")
        return
    consume(_arrived(resp._response), out)


def _arrived(raw) -> Iterator[bytes]:
    """geventhttpclient's lines as they arrive: its readline returns as soon as a whole line is buffered
    (FastResponse keeps that response in _response), which is what "read what has arrived" needs."""
    while line := raw.readline(b"\n"):
        yield line
    if not raw.message_complete:
        raise ConnectionError("connection closed mid-stream")


def consume(lines: Iterable[bytes], out: dict[str, Any]) -> None:
    """Fold a server-sent event stream into the record, as its lines arrive: each event is stamped when its first
    line came, and a stream that ends without [DONE] is an error. The one parser of every client here (Locust's
    session above, httpx's in stream())."""
    parser, done, t_event = EventParser(), False, None
    for line in lines:
        t_event = t_event or time.perf_counter_ns()
        data = parser.feed(line)
        if data is not None:
            done = take(data, t_event, out) or done
            t_event = None
    data = parser.flush()
    if data is not None:
        done = take(data, t_event or time.perf_counter_ns(), out) or done
    if not done and not out["error"]:
        out["error"] = "stream ended without [DONE]"


def stream(client, body: dict[str, Any], request_id: str, path: str = CHAT_PATH,
           timeout_s: float = STREAM_TIMEOUT_S) -> dict[str, Any]:
    """One streamed completion through an httpx.Client (the rounds, the experiments, the checks): the raw fields
    of a RequestRecord, timed and parsed as stream_chat times Locust's."""
    import httpx

    out = _blank()
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "Accept-Encoding": "identity",
               "X-Request-Id": request_id, **auth_headers()}
    out["send_unix_ns"] = time.time_ns()
    out["send_ns"] = time.perf_counter_ns()
    try:
        with client.stream("POST", path, content=json.dumps(body), headers=headers, timeout=timeout_s) as resp:
            out["headers_ns"] = time.perf_counter_ns()
            out["status"] = resp.status_code
            if resp.status_code != 200:
                out["error"] = refused(path, resp.status_code, resp.read().decode(errors="replace"))
            else:
                consume((line.encode() + b"\n" for line in resp.iter_lines()), out)
    except httpx.HTTPError as e:   # a dropped stream is a record with an error, not a crash
        out["error"] = out["error"] or f"{type(e).__name__}: {e}"
    out["end_ns"] = time.perf_counter_ns()
    return out


def _blank() -> dict[str, Any]:
    return {"chunks": [], "status": None, "error": None, "finish_reason": None, "usage": None, "spec": None,
            "headers_ns": None, "output_token_ids": None}


def take(data: str, t_ns: int, out: dict[str, Any]) -> bool:
    """Fold one event into the record; True at [DONE]."""
    if data.strip() == "[DONE]":
        return True
    try:
        obj = json.loads(data)
    except json.JSONDecodeError:
        out["error"] = f"event is not JSON: {data[:ERROR_TEXT_MAX]!r}"
        return False
    if obj.get("error"):
        out["error"] = f"server error in stream: {json.dumps(obj['error'])[:ERROR_TEXT_MAX]}"
    for choice in obj.get("choices") or []:
        text = (choice.get("delta") or {}).get("content") or choice.get("text")   # chat, then completions
        if text:
            out["chunks"].append(Chunk(t_ns=t_ns, text=text))
        ids = choice.get("token_ids")
        if isinstance(ids, list):  # this event's ids, in order; an event may carry ids and no text
            out["output_token_ids"] = (out["output_token_ids"] or []) + [int(i) for i in ids]
        if choice.get("finish_reason"):
            out["finish_reason"] = choice["finish_reason"]
    if obj.get("usage"):
        out["usage"] = obj["usage"]
    spec = (obj.get("sglext") or {}).get("spec_tokens_details")
    if spec:
        out["spec"] = spec
    return False


def streams_token_ids(url: str, model: str, api: str = "chat") -> bool:
    """Whether the server streams token ids on workload.api's route: one 1-token request asks for them. SGLang
    0.5.17 and later refuse them on a chat stream (HTTP 400 naming return_token_ids); there a cell asks for none
    and its records carry text only. Any other answer is left to the cell, which reports it."""
    import httpx

    prompt = Prompt(id="token-ids-probe", category="probe", messages=[{"role": "user", "content": "Hi"}])
    body = chat_body(prompt, model=model, max_tokens=1, temperature=0.0, api=api)
    with httpx.Client(base_url=url.rstrip("/")) as client:
        r = stream(client, body, "token-ids-probe", PATHS[api], timeout_s=60.0)
    return not (r["status"] == 400 and "return_token_ids" in (r["error"] or ""))
