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


def build_app(scheduler: Scheduler, tokenizer, info: ServerInfo, sampling_cls) -> FastAPI:
    app = FastAPI(title="refengine", docs_url=None, redoc_url=None)
    app.state.ready = False

    def bad(e: BadRequest) -> JSONResponse:
        return JSONResponse(error_body(e.message, e.param), status_code=400)

    def prompt_ids(req: Sampled) -> list[int]:
        if isinstance(req, ChatRequest):
            return tokenizer.chat_ids([{"role": m.role, "content": m.text()} for m in req.messages])
        if isinstance(req.prompt, list):
            vocab = tokenizer.vocab_size
            if any(not 0 <= t < vocab for t in req.prompt):
                raise BadRequest(f"prompt: token ids must lie in [0, {vocab})", "prompt")
            return list(req.prompt)
        return tokenizer.encode(req.prompt)

    def make_job(req: Sampled, loop) -> Job:
        if req.model not in (None, info.model_name, info.model_path):
            raise BadRequest(f"model '{req.model}' is not served here; this server serves '{info.model_name}'",
                             "model")
        ids = prompt_ids(req)
        room = info.context_length - len(ids)
        if room < 1:
            raise BadRequest(f"the prompt has {len(ids)} tokens; the context holds {info.context_length}",
                             "messages" if isinstance(req, ChatRequest) else "prompt")
        limit = req.limit if req.limit is not None else room
        if limit > room:
            raise BadRequest(f"max_tokens {limit} + prompt {len(ids)} tokens exceeds the context length "
                             f"{info.context_length}", "max_tokens")
        stop_ids = frozenset() if req.ignore_eos else frozenset(tokenizer.eos_ids)
        sampling = sampling_cls(temperature=req.temperature, top_p=req.top_p, top_k=max(req.top_k, 0), seed=req.seed)
        return Job(rid=uuid.uuid4().hex, prompt_ids=ids, max_tokens=limit, stop_ids=stop_ids, sampling=sampling,
                   loop=loop, queue=asyncio.Queue())

    async def generate(request: Request, kind: type[Sampled]) -> Response:
        try:
            req = parse(await request.body(), kind)
            job = make_job(req, asyncio.get_running_loop())
            scheduler.submit(job)
        except BadRequest as e:
            return bad(e)
        except RuntimeError as e:  # shutting down
            return JSONResponse(error_body(str(e), kind="service_unavailable", code=503), status_code=503)
        chat = kind is ChatRequest
        if req.stream:
            return StreamingResponse(stream(job, req, chat), media_type="text/event-stream")
        return await complete(job, req, chat)

    def base(job: Job, chat: bool) -> dict:
        return {"id": job.rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": info.model_name}

    def usage(job: Job) -> dict:
        n = len(job.out_ids)
        return {"prompt_tokens": len(job.prompt_ids), "completion_tokens": n,
                "total_tokens": len(job.prompt_ids) + n}

    def choice(chat: bool, text: str | None, finish: str | None, first: bool = False,
               ids: list[int] | None = None) -> dict:
        if chat:
            delta = {"role": "assistant", "content": ""} if first else ({"content": text} if text else {})
            out = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            out = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        if ids is not None:  # return_token_ids: the ids this event adds (SGLang's choices[].token_ids)
            out["token_ids"] = ids
        return out

    async def events(job: Job, req: Sampled, detok: Detokenizer):
        """(text delta, token ids, finish reason, error) per event; stop strings end the job early
        (the ids of the event that hit one are all of that step's, the text is cut at the stop)."""
        stops, text = req.stops, ""
        while True:
            event = await job.queue.get()
            if event[0] == "tokens":
                delta = detok.push(event[1])
                if stops and delta:
                    text += delta
                    hit = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
                    if hit >= 0:
                        scheduler.cancel(job)
                        yield delta[: len(delta) - (len(text) - hit)], list(event[1]), "stop", None
                        return
                yield delta, list(event[1]), None, None
            else:
                _, reason, error = event
                yield detok.flush(), [], reason, error
                return

    async def stream(job: Job, req: Sampled, chat: bool):
        finished, pending = False, []   # ids whose text the detokenizer still holds back
        try:
            if chat:
                yield _sse({**base(job, chat), "choices": [choice(chat, None, None, first=True)]})
            async for delta, ids, reason, error in events(job, req, Detokenizer(tokenizer)):
                pending += ids
                if delta:
                    yield _sse({**base(job, chat), "choices": [
                        choice(chat, delta, None, ids=pending if req.return_token_ids else None)]})
                    pending = []
                if reason is None:
                    continue
                finished = True
                if error:
                    yield _sse(error_body(error, kind="server_error", code=500))
                yield _sse({**base(job, chat), "choices": [
                    choice(chat, None, reason, ids=pending if req.return_token_ids and pending else None)]})
                if req.return_spec_tokens_details:
                    yield _sse({**base(job, chat), "choices": [],
                                "sglext": {"spec_tokens_details": job.spec.details(len(job.out_ids))}})
                if req.include_usage:
                    yield _sse({**base(job, chat), "choices": [], "usage": usage(job)})
                yield b"data: [DONE]\n\n"
        finally:
            if not finished:  # the client went away, or the task was cancelled
                scheduler.cancel(job)

    async def complete(job: Job, req: Sampled, chat: bool) -> Response:
        text, ids, reason, error = "", [], None, None
        try:
            async for delta, new, why, err in events(job, req, Detokenizer(tokenizer)):
                text, ids, reason, error = text + delta, ids + new, why, err
        finally:
            if reason is None:
                scheduler.cancel(job)
        if error:
            return JSONResponse(error_body(error, kind="server_error", code=500), status_code=500)
        body = {**base(job, chat), "object": "chat.completion" if chat else "text_completion", "usage": usage(job)}
        if chat:
            body["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                                "finish_reason": reason}]
            if req.return_token_ids:
                body["choices"][0]["token_ids"] = ids
        else:
            body["choices"] = [choice(chat, text, reason, ids=ids if req.return_token_ids else None)]
        if req.return_spec_tokens_details:
            body["sglext"] = {"spec_tokens_details": job.spec.details(len(job.out_ids))}
        return JSONResponse(body)

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
