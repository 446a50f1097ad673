"""The scheduler's engine: a refengine.batch.Batch, stepped once per scheduler iteration.

Every running request owns one row of the engine's KV caches, allocated once at start-up
(rows = --max-running-requests), so memory is bounded whatever the load. A step is one
batched drafter pass and one batched target pass over all running requests.
"""

from __future__ import annotations

import torch

from refengine.batch import Batch
from refengine.engine import Engine
from refengine.plan import Plan
from refengine.request import Request
from refengine.server.scheduler import Job, StepOut


class BatchRunner:
    def __init__(self, engine: Engine, plan: Plan, context_length: int):
        self.engine, self.plan = engine, plan
        self.batch = Batch(engine, plan)
        self.speculative = plan.speculative
        self.ddtree = plan.kind in ("chain", "tree")
        self.cuda_graph = engine.graphs
        self.context_length = context_length

    @torch.inference_mode()
    def prefill(self, job: Job) -> StepOut:
        e = self.engine
        req = Request(list(job.prompt_ids), job.sampling, job.max_tokens, job.stop_ids,
                      job.sampling.generator(e.device))
        self.batch.add(req)
        job.state = req
        return StepOut(tokens=list(req.tokens), finish_reason=req.finish_reason)

    @torch.inference_mode()
    def step(self, jobs: list[Job]) -> list[StepOut]:
        before = [len(job.state.tokens) for job in jobs]
        self.batch.step()
        outs = []
        for job, n in zip(jobs, before, strict=True):
            req: Request = job.state
            s = req.steps[-1]
            outs.append(StepOut(tokens=req.tokens[n:], finish_reason=req.finish_reason,
                                accepted=s.accepted, depth=s.depth, nodes=s.nodes))
        return outs

    def release(self, job: Job) -> None:
        self.batch.remove(job.state)

    def used_tokens(self, jobs: list[Job]) -> int:
        return sum(len(j.prompt_ids) + len(j.out_ids) for j in jobs)
