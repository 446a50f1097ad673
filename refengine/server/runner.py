"""The scheduler's engine: refengine.engine.Engine driven one request-step at a time.

Each running request owns a slot: a target and a drafter KV cache allocated once at start-up,
so memory is bounded by --max-running-requests whatever the load. A step runs the arm's
decoding step (refengine.ar / linear / ddtree) for each running request in turn, on that
request's slot. Requests therefore interleave between steps, but do not yet share one forward:
that batched verify is the next piece of work, and what makes throughput grow with concurrency.
"""

from __future__ import annotations

import torch

from refengine.engine import _STEPS, Engine
from refengine.plan import Plan
from refengine.request import Request
from refengine.server.scheduler import Job, StepOut


def slot_capacity(plan: Plan, context_length: int) -> int:
    """KV entries a slot needs: the context plus the tentative entries of the widest verify."""
    width = {"ar": 1, "linear": plan.block_size or 0}.get(plan.kind, (plan.budget or 0) + 1)
    return context_length + width


class SlotRunner:
    def __init__(self, engine: Engine, plan: Plan, slots: int, context_length: int):
        if engine.graphs and slots > 1:
            raise ValueError("CUDA graphs are captured on one request's caches: with graphs on, "
                             "--max-running-requests must be 1 until the batched engine lands "
                             "(or pass --disable-cuda-graph)")
        self.engine, self.plan = engine, plan
        self.speculative = plan.speculative
        self.ddtree = plan.kind in ("chain", "tree")
        self.cuda_graph = engine.graphs
        self.context_length = context_length
        self.step_fn = _STEPS[plan.kind]
        if slots == 1:
            self.free = [(engine.tcache, engine.dcache)]
        else:
            t, d, n = engine.target, engine.drafter, slot_capacity(plan, context_length)
            self.free = [(t.new_cache(1, n), d.new_cache(1, n) if d else None) for _ in range(slots)]

    def _use(self, job: Job) -> Request:
        req, (tcache, dcache) = job.state
        self.engine.tcache, self.engine.dcache = tcache, dcache
        return req

    @torch.inference_mode()
    def prefill(self, job: Job) -> StepOut:
        e = self.engine
        e._check(job.prompt_ids, self.plan, job.max_tokens)
        req = Request(list(job.prompt_ids), job.sampling, job.max_tokens, job.stop_ids,
                      job.sampling.generator(e.device))
        job.state = (req, self.free.pop())
        self._use(job)
        e.prefill(req, self.speculative)
        return StepOut(tokens=list(req.tokens), finish_reason=req.finish_reason)

    @torch.inference_mode()
    def step(self, jobs: list[Job]) -> list[StepOut]:
        outs = []
        for job in jobs:
            req = self._use(job)
            before = len(req.tokens)
            self.step_fn(self.engine, req, self.plan)
            s = req.steps[-1]
            outs.append(StepOut(tokens=req.tokens[before:], finish_reason=req.finish_reason,
                                accepted=s.accepted, depth=s.depth, nodes=s.nodes))
        return outs

    def release(self, job: Job) -> None:
        _, slot = job.state
        self.free.append(slot)

    def used_tokens(self, jobs: list[Job]) -> int:
        return sum(len(j.prompt_ids) + len(j.out_ids) for j in jobs)
