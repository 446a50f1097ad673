"""AR: one target forward per token (the baseline; tau = 1 by definition)."""

from __future__ import annotations

from refengine.output import Step
from refengine.sampling import pick


def step(engine, req, plan) -> None:
    t0 = engine.clock()
    logits = engine.decode(req.root, req.start)
    token = pick(logits, req.sampling, req.generator).item()
    engine.tcache.commit(0, 1)
    t1 = engine.clock()
    req.steps.append(Step(committed=req.commit([token]), accepted=0, depth=0, nodes=0, verify_s=t1 - t0))
