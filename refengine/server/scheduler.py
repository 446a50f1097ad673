"""Continuous batching: one thread owns the engine; requests join and leave between steps.

The HTTP side submits Jobs and reads their events from an asyncio queue; this thread admits
waiting jobs while slots are free (prefill gives each its first token), runs one verify step
over all running jobs, and drops cancelled jobs before the next step, so a client that goes
away frees its slot within a step. Where a request stops (stop token, max_tokens) is the
engine's rule (refengine.request), reported back with each step.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from refengine.server.stats import Metrics, RequestSpec, Window, log_line

log = logging.getLogger("refengine.server")


@dataclass
class Job:
    rid: str
    prompt_ids: list[int]
    max_tokens: int
    stop_ids: frozenset[int]
    sampling: object  # refengine.sampling.Sampling
    loop: asyncio.AbstractEventLoop | None = None
    queue: asyncio.Queue | None = None
    out_ids: list[int] = field(default_factory=list)
    spec: RequestSpec = field(default_factory=RequestSpec)
    cancelled: bool = False
    finish_reason: str | None = None
    arrived: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    state: object = None  # the engine's own per-request state

    def emit(self, event: tuple) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


@dataclass
class StepOut:
    tokens: list[int]  # committed by this step (already cut at a stop token or max_tokens)
    finish_reason: str | None = None
    accepted: int = 0
    depth: int = 0
    nodes: int = 0


class Engine(Protocol):
    speculative: bool
    ddtree: bool
    cuda_graph: bool
    context_length: int

    def prefill(self, job: Job) -> StepOut: ...  # the first token; sets job.state

    def step(self, jobs: list[Job]) -> list[StepOut]: ...  # one verify step for each job

    def release(self, job: Job) -> None: ...

    def used_tokens(self, jobs: list[Job]) -> int: ...


class Scheduler:
    def __init__(self, engine: Engine, metrics: Metrics, max_running: int, log_interval: int,
                 log_sink=None):
        self.engine, self.metrics = engine, metrics
        self.max_running, self.log_interval = max_running, log_interval
        self.waiting: deque[Job] = deque()
        self.running: list[Job] = []
        self.cv = threading.Condition()
        self.stopping = False
        self.window = Window()
        self.lifetime_tokens = 0
        self.lifetime_steps = 0
        self.log_sink = log_sink or (lambda line: print(line, flush=True))
        self.thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    # -- called from the HTTP side ------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def submit(self, job: Job) -> None:
        with self.cv:
            if self.stopping:
                raise RuntimeError("server is shutting down")
            self.waiting.append(job)
            self.metrics.queued.set(len(self.waiting))
            self.cv.notify()

    def cancel(self, job: Job) -> None:
        with self.cv:
            job.cancelled = True
            self.cv.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Abort what is in flight and end the loop."""
        with self.cv:
            self.stopping = True
            self.cv.notify()
        self.thread.join(timeout)

    @property
    def avg_accept_length(self) -> float:
        return self.lifetime_tokens / self.lifetime_steps if self.lifetime_steps else 0.0

    # -- the scheduler thread -----------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self.cv:
                while not (self.waiting or self.running or self.stopping):
                    self.cv.wait()
                if self.stopping:
                    break
                self._drop_cancelled()
                admitted = []
                while self.waiting and len(self.running) + len(admitted) < self.max_running:
                    admitted.append(self.waiting.popleft())
            try:
                for job in admitted:
                    self._admit(job)
                if self.running:
                    self._step()
            except Exception as e:  # an engine fault fails the requests in flight, not the server
                log.exception("engine step failed")
                for job in self.running:
                    self._finish(job, "abort", error=f"engine error: {e}")
                self.running = []
            self._gauges()
        for job in [*self.running, *self.waiting]:
            self._finish(job, "abort", error="server shutting down")
        self.running, self.waiting = [], deque()

    def _drop_cancelled(self) -> None:
        for job in [j for j in self.running if j.cancelled]:
            self._finish(job, "abort")
        self.running = [j for j in self.running if j.finish_reason is None]
        kept = deque(j for j in self.waiting if not j.cancelled)
        for job in self.waiting:
            if job.cancelled:
                job.finish_reason = "abort"
                self.metrics.aborted.inc()
        self.waiting = kept

    def _admit(self, job: Job) -> None:
        if job.cancelled:
            return
        self.metrics.prompt_tokens.inc(len(job.prompt_ids))
        try:
            first = self.engine.prefill(job)
        except ValueError as e:  # this request cannot run; the others go on
            self._finish(job, "abort", error=str(e))
            return
        job.first_token_at = time.perf_counter()
        self.metrics.ttft.observe(job.first_token_at - job.arrived)
        self._commit(job, first)
        if job.finish_reason is None:
            self.running.append(job)

    def _step(self) -> None:
        jobs = list(self.running)
        outs = self.engine.step(jobs)
        w = self.window
        w.iterations += 1
        for job, out in zip(jobs, outs, strict=True):
            job.spec.add(out.accepted, out.depth, out.nodes)
            w.request_steps += 1
            w.accepted += out.accepted
            w.commits += out.accepted + 1
            w.proposed += out.nodes
            w.depth += out.depth
            w.nodes += out.nodes
            committed = self._commit(job, out)
            w.tokens += committed
            self.lifetime_tokens += committed
            self.lifetime_steps += 1
            self.metrics.verify_calls.inc()
        self.running = [j for j in self.running if j.finish_reason is None]
        if w.iterations >= self.log_interval:
            self._log_window()

    def _commit(self, job: Job, out: StepOut) -> int:
        job.out_ids.extend(out.tokens)
        self.metrics.generation_tokens.inc(len(out.tokens))
        job.emit(("tokens", out.tokens))
        if out.finish_reason:
            self._finish(job, out.finish_reason)
        return len(out.tokens)

    def _finish(self, job: Job, reason: str, error: str | None = None) -> None:
        if job.finish_reason is not None:
            return
        job.finish_reason = reason
        if job.state is not None:
            self.engine.release(job)
            job.state = None
        now = time.perf_counter()
        if reason == "abort":
            self.metrics.aborted.inc()
        else:
            self.metrics.requests.inc()
            self.metrics.e2e.observe(now - job.arrived)
            if len(job.out_ids) > 1 and job.first_token_at is not None:
                self.metrics.itl.observe((now - job.first_token_at) / (len(job.out_ids) - 1))
        job.emit(("finish", reason, error))

    def _gauges(self) -> None:
        m = self.metrics
        m.running.set(len(self.running))
        m.queued.set(len(self.waiting))
        m.token_usage.set(self.engine.used_tokens(self.running) / self._capacity)

    @property
    def _capacity(self) -> int:
        return self.max_running * self.engine.context_length

    def _log_window(self) -> None:
        w, e = self.window, self.engine
        line = w.decode_batch_line(len(self.running), e.used_tokens(self.running), self._capacity,
                                   len(self.waiting), e.speculative, e.cuda_graph)
        self.log_sink(log_line(line))
        if e.ddtree:
            self.log_sink(log_line(w.ddtree_line()))
        elapsed = max(time.perf_counter() - w.started, 1e-9)
        self.metrics.gen_throughput.set(w.tokens / elapsed)
        if e.speculative:
            self.metrics.accept_length.set(w.accept_length)
            self.metrics.accept_rate.set(w.accept_rate)
        self.window = Window()
