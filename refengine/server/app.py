"""The HTTP face: SGLang's OpenAI-compatible endpoints, its extras, and its streaming format.

Streaming sends one SSE chunk per verify step (the tokens that step committed), then a
finish chunk, then (when asked) a chunk with empty choices carrying sglext.spec_tokens_details,
then the usage chunk, then [DONE]: the order SGLang uses.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import generate_latest

from refengine.server.protocol import BadRequest, ChatRequest, CompletionRequest, Sampled, error_body, parse
from refengine.server.scheduler import Job, Scheduler
from refengine.server.stats import log_line


@dataclass
class ServerInfo:
    model_name: str
    model_path: str
    context_length: int
    args: dict
    enable_metrics: bool


class Detokenizer:
    """Text deltas from a growing id list; holds back a split UTF-8 character until it completes."""

    def __init__(self, tokenizer):
        self.tok, self.ids, self.sent = tokenizer, [], ""

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        text = self.tok.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta

    def flush(self) -> str:
        text = self.tok.decode(self.ids)
        delta, self.sent = text[len(self.sent):], text
        return delta


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def _bad(e: BadRequest) -> JSONResponse:
    return JSONResponse(error_body(e.message, e.param), status_code=400)


def _usage(job: Job) -> dict:
    n = len(job.out_ids)
    return {"prompt_tokens": len(job.prompt_ids), "completion_tokens": n, "total_tokens": len(job.prompt_ids) + n}


def _choice(chat: bool, text: str | None, finish: str | None, first: bool = False,
            ids: list[int] | None = None) -> dict:
    if chat:
        delta = {"role": "assistant", "content": ""} if first else ({"content": text} if text else {})
        out = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    else:
        out = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
    if ids is not None:  # return_token_ids: the ids this event adds (SGLang's choices[].token_ids)
        out["token_ids"] = ids
    return out


class Generation:
    """The two generating endpoints: a request becomes a scheduler job, whose events become SGLang's stream
    or its one JSON body."""

    def __init__(self, scheduler: Scheduler, tokenizer, info: ServerInfo, sampling_cls):
        self.scheduler, self.tokenizer, self.info, self.sampling_cls = scheduler, tokenizer, info, sampling_cls

    def prompt_ids(self, req: Sampled) -> list[int]:
        tok = self.tokenizer
        if isinstance(req, ChatRequest):
            return tok.chat_ids([{"role": m.role, "content": m.text()} for m in req.messages])
        if isinstance(req.prompt, list):
            if any(not 0 <= t < tok.vocab_size for t in req.prompt):
                raise BadRequest(f"prompt: token ids must lie in [0, {tok.vocab_size})", "prompt")
            return list(req.prompt)
        return tok.encode(req.prompt)

    def job(self, req: Sampled, loop) -> Job:
        info = self.info
        if req.model not in (None, info.model_name, info.model_path):
            raise BadRequest(f"model '{req.model}' is not served here; this server serves '{info.model_name}'",
                             "model")
        ids = self.prompt_ids(req)
        room = info.context_length - len(ids)
        if room < 1:
            raise BadRequest(f"the prompt has {len(ids)} tokens; the context holds {info.context_length}",
                             "messages" if isinstance(req, ChatRequest) else "prompt")
        limit = req.limit if req.limit is not None else room
        if limit > room:
            raise BadRequest(f"max_tokens {limit} + prompt {len(ids)} tokens exceeds the context length "
                             f"{info.context_length}", "max_tokens")
        stop_ids = frozenset() if req.ignore_eos else frozenset(self.tokenizer.eos_ids)
        sampling = self.sampling_cls(temperature=req.temperature, top_p=req.top_p, top_k=max(req.top_k, 0),
                                     seed=req.seed)
        return Job(rid=uuid.uuid4().hex, prompt_ids=ids, max_tokens=limit, stop_ids=stop_ids, sampling=sampling,
                   loop=loop, queue=asyncio.Queue())

    async def __call__(self, request: Request, kind: type[Sampled]) -> Response:
        try:
            req = parse(await request.body(), kind)
            job = self.job(req, asyncio.get_running_loop())
            self.scheduler.submit(job)
        except BadRequest as e:
            return _bad(e)
        except RuntimeError as e:  # shutting down
            return JSONResponse(error_body(str(e), kind="service_unavailable", code=503), status_code=503)
        chat = kind is ChatRequest
        if req.stream:
            return StreamingResponse(self.stream(job, req, chat), media_type="text/event-stream")
        return await self.complete(job, req, chat)

    def base(self, job: Job, chat: bool) -> dict:
        return {"id": job.rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": self.info.model_name}

    async def events(self, job: Job, req: Sampled):
        """(text delta, token ids, finish reason, error) per event; stop strings end the job early
        (the ids of the event that hit one are all of that step's, the text is cut at the stop)."""
        detok, stops, text = Detokenizer(self.tokenizer), req.stops, ""
        while True:
            event = await job.queue.get()
            if event[0] != "tokens":
                _, reason, error = event
                yield detok.flush(), [], reason, error
                return
            delta = detok.push(event[1])
            if stops and delta:
                text += delta
                hit = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
                if hit >= 0:
                    self.scheduler.cancel(job)
                    yield delta[: len(delta) - (len(text) - hit)], list(event[1]), "stop", None
                    return
            yield delta, list(event[1]), None, None

    async def stream(self, job: Job, req: Sampled, chat: bool):
        finished, pending = False, []   # ids whose text the detokenizer still holds back
        try:
            if chat:
                yield _sse({**self.base(job, chat), "choices": [_choice(chat, None, None, first=True)]})
            async for delta, ids, reason, error in self.events(job, req):
                pending += ids
                if delta:
                    yield _sse({**self.base(job, chat), "choices": [
                        _choice(chat, delta, None, ids=pending if req.return_token_ids else None)]})
                    pending = []
                if reason is not None:
                    finished = True
                    for chunk in self.ending(job, req, chat, reason, error, pending):
                        yield chunk
        finally:
            if not finished:  # the client went away, or the task was cancelled
                self.scheduler.cancel(job)

    def ending(self, job: Job, req: Sampled, chat: bool, reason: str, error: str | None, pending: list[int]):
        """The stream's last chunks, in SGLang's order: error, finish, spec details, usage, [DONE]."""
        if error:
            yield _sse(error_body(error, kind="server_error", code=500))
        yield _sse({**self.base(job, chat), "choices": [
            _choice(chat, None, reason, ids=pending if req.return_token_ids and pending else None)]})
        if req.return_spec_tokens_details:
            yield _sse({**self.base(job, chat), "choices": [],
                        "sglext": {"spec_tokens_details": job.spec.details(len(job.out_ids))}})
        if req.include_usage:
            yield _sse({**self.base(job, chat), "choices": [], "usage": _usage(job)})
        yield b"data: [DONE]\n\n"

    async def complete(self, job: Job, req: Sampled, chat: bool) -> Response:
        text, ids, reason, error = "", [], None, None
        try:
            async for delta, new, why, err in self.events(job, req):
                text, ids, reason, error = text + delta, ids + new, why, err
        finally:
            if reason is None:
                self.scheduler.cancel(job)
        if error:
            return JSONResponse(error_body(error, kind="server_error", code=500), status_code=500)
        body = {**self.base(job, chat), "object": "chat.completion" if chat else "text_completion",
                "usage": _usage(job)}
        if chat:
            body["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                                "finish_reason": reason}]
            if req.return_token_ids:
                body["choices"][0]["token_ids"] = ids
        else:
            body["choices"] = [_choice(chat, text, reason, ids=ids if req.return_token_ids else None)]
        if req.return_spec_tokens_details:
            body["sglext"] = {"spec_tokens_details": job.spec.details(len(job.out_ids))}
        return JSONResponse(body)


def build_app(scheduler: Scheduler, tokenizer, info: ServerInfo, sampling_cls) -> FastAPI:
    app = FastAPI(title="refengine", docs_url=None, redoc_url=None)
    app.state.ready = False
    generate = Generation(scheduler, tokenizer, info, sampling_cls)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await generate(request, ChatRequest)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await generate(request, CompletionRequest)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": info.model_name, "object": "model", "created": 0,
                                            "owned_by": "refengine", "root": info.model_path,
                                            "max_model_len": info.context_length}]}

    @app.get("/health")
    async def health():
        ok = app.state.ready and scheduler.thread.is_alive()
        return Response(status_code=200 if ok else 503)

    @app.get("/ready")
    async def ready():
        return Response(status_code=200 if app.state.ready else 503)

    @app.get("/server_info")
    async def server_info():
        return {**info.args, "internal_states": [{
            "avg_spec_accept_length": scheduler.avg_accept_length,
            "num_running_reqs": len(scheduler.running), "num_queue_reqs": len(scheduler.waiting)}]}

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache():
        # The reference engine keeps no prefix cache between requests: nothing to drop. The log line
        # is SGLang's, so analysis sees each cell start clean on either backend.
        print(log_line("Cache flushed successfully!"), flush=True)
        return PlainTextResponse("Cache flushed.\n")

    @app.get("/metrics")
    async def metrics():
        if not info.enable_metrics:
            return JSONResponse(error_body("metrics are off; start with --enable-metrics", code=404), 404)
        return Response(generate_latest(scheduler.metrics.registry), media_type="text/plain; version=0.0.4")

    return app
