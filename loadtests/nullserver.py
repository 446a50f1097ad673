"""A chat-completions server whose stream schedule is known, for tests and accuracy checks.

    python -m loadtests.nullserver --port 8000 --ttft-ms 80 --itl-ms 20 --tokens 64 [--tokens-per-chunk 4]

Content chunk j of a request leaves at t_recv + ttft + j * itl on an absolute schedule (no
drift from sleeps adding up), where t_recv is when the request body was read. Streams are
shaped like SGLang's: a role chunk at once, content chunks, a finish chunk, then, when asked,
`sglext.spec_tokens_details` in a chunk with empty choices, the usage chunk, and [DONE].

--log PATH writes, per request, the X-Request-Id it came with and the perf_counter_ns of its
receipt and of each content chunk's write, so a client's timings can be checked against the
server's own clock (one clock for every process of a host). Fault switches (--error-every,
--drop-every) exercise the client's error records. Plain asyncio on raw sockets keeps the
server's own overhead far below the gaps it is asked to keep.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MODEL = "null-model"


@dataclass(frozen=True)
class Schedule:
    ttft_ms: float
    itl_ms: float
    tokens: int
    tokens_per_chunk: int = 1
    error_every: int = 0
    error_status: int = 500
    drop_every: int = 0


class NullServer:
    def __init__(self, schedule: Schedule, log_path: str | None = None):
        self.s = schedule
        self.count = 0
        self.log = open(log_path, "a", buffering=1) if log_path else None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await read_request(reader)
                if req is None:
                    break
                keep = await self.respond(req, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def respond(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        if req.method == "GET" and req.path in ("/health", "/ready", "/health_generate"):
            return await send_json(writer, 200, {})
        if req.method == "GET" and req.path == "/v1/models":
            return await send_json(writer, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if req.method != "POST" or req.path != "/v1/chat/completions":
            return await send_json(writer, 404, {"error": {"message": f"no route {req.method} {req.path}"}})
        try:
            body = json.loads(req.body or b"{}")
        except json.JSONDecodeError as e:
            return await send_json(writer, 400, {"error": {"message": f"body is not JSON: {e.msg}"}})
        self.count += 1
        if self.s.error_every and self.count % self.s.error_every == 0:
            return await send_json(writer, self.s.error_status,
                                   {"error": {"message": f"null server: injected error on request {self.count}"}})
        n = min(self.s.tokens, int(body.get("max_tokens") or self.s.tokens))
        if not body.get("stream"):
            return await send_json(writer, 200, completion(body, n))
        drop = bool(self.s.drop_every and self.count % self.s.drop_every == 0)
        await self.stream(req, body, n, writer, drop)
        return not drop

    async def stream(self, req: Request, body: dict, n: int, writer: asyncio.StreamWriter, drop: bool) -> None:
        s, loop = self.s, asyncio.get_running_loop()
        rid = req.headers.get("x-request-id", "")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        write_event(writer, chunk({"role": "assistant", "content": ""}))
        await writer.drain()
        sizes = [min(s.tokens_per_chunk, n - i) for i in range(0, n, s.tokens_per_chunk)]
        # the schedule runs on the event loop's clock; the log uses perf_counter_ns for the client
        start, sent = loop.time(), []
        for j, k in enumerate(sizes):
            delay = start + (s.ttft_ms + j * s.itl_ms) / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if drop and j == len(sizes) // 2:
                writer.transport.abort()  # a stream cut short: no finish, no terminating chunk
                self.write_log(rid, req.recv_ns, sent, dropped=True)
                return
            first = sum(sizes[:j])
            write_event(writer, chunk({"content": "".join(f" t{first + i}" for i in range(k))}))
            sent.append(time.perf_counter_ns())
            await writer.drain()
        write_event(writer, chunk({}, finish="length"))
        usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": n,
                 "total_tokens": prompt_tokens(body) + n}
        if body.get("return_spec_tokens_details"):
            spec = {"spec_tokens_details": spec_details(n, len(sizes))}
            write_event(writer, {**envelope(), "choices": [], "sglext": spec})
        if (body.get("stream_options") or {}).get("include_usage"):
            write_event(writer, {**envelope(), "choices": [], "usage": usage})
        writer.write(event_bytes(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        self.write_log(rid, req.recv_ns, sent)

    def write_log(self, rid: str, recv_ns: int, sent: list[int], dropped: bool = False) -> None:
        if self.log:
            self.log.write(json.dumps({"rid": rid, "recv_ns": recv_ns, "sent_ns": sent, "dropped": dropped}) + "\n")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    recv_ns: int


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    return Request(method, path.split("?", 1)[0], headers, body, time.perf_counter_ns())


def envelope() -> dict:
    return {"id": "null", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL}


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {**envelope(), "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                       "finish_reason": finish, "matched_stop": None}], "usage": None}


def event_bytes(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def write_event(writer: asyncio.StreamWriter, obj: dict) -> None:
    writer.write(event_bytes(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"))


async def send_json(writer: asyncio.StreamWriter, status: int, obj: dict) -> bool:
    data = json.dumps(obj).encode()
    writer.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                 % (status, len(data), data))
    await writer.drain()
    return True


def prompt_tokens(body: dict) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])


def spec_details(n: int, steps: int) -> dict:
    # shaped like SGLang's per-request fields; the numbers follow from the schedule
    return {"spec_verify_ct": steps, "spec_accept_length": n / steps if steps else 0.0,
            "spec_num_correct_drafts": n - steps}


def completion(body: dict, n: int) -> dict:
    text = "".join(f" t{i}" for i in range(n))
    return {"id": "null", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_tokens(body), "completion_tokens": n,
                      "total_tokens": prompt_tokens(body) + n}}


async def serve(host: str, port: int, server: NullServer) -> None:
    srv = await asyncio.start_server(server.handle, host, port, backlog=1024)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set_result, None)
    print(f"null server on http://{host}:{port} ({server.s})", flush=True)
    async with srv:
        await stop


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(log: Path | None = None, port: int | None = None, **flags) -> Iterator[str]:
    """A null server subprocess for the duration of a block; yields its URL. Flags as on the CLI."""
    port = port or free_port()
    argv = [sys.executable, "-m", "loadtests.nullserver", "--port", str(port)]
    if log:
        argv += ["--log", str(log)]
    for k, v in flags.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parent.parent)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"null server did not start: {proc.stderr.read().decode()}") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtests.nullserver", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--ttft-ms", type=float, required=True, help="first content chunk this long after the request")
    ap.add_argument("--itl-ms", type=float, required=True, help="then one content chunk every this many ms")
    ap.add_argument("--tokens", type=int, required=True, help="completion tokens (capped by the request's max_tokens)")
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--error-every", type=int, default=0, help="answer every Nth chat request with --error-status")
    ap.add_argument("--error-status", type=int, default=500)
    ap.add_argument("--drop-every", type=int, default=0, help="cut every Nth stream off half way")
    ap.add_argument("--log", help="JSONL of server-side send times per request")
    a = ap.parse_args(argv)
    if a.tokens < 1 or a.tokens_per_chunk < 1 or a.ttft_ms < 0 or a.itl_ms < 0:
        ap.error("--tokens and --tokens-per-chunk must be >= 1, --ttft-ms and --itl-ms >= 0")
    sched = Schedule(a.ttft_ms, a.itl_ms, a.tokens, a.tokens_per_chunk, a.error_every, a.error_status, a.drop_every)
    asyncio.run(serve(a.host, a.port, NullServer(sched, a.log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
