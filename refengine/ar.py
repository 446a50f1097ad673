"""AR: one target forward per token for every running request (the baseline; tau = 1 by definition)."""

from __future__ import annotations

import torch

from refengine.output import Step
from refengine.sampling import pick_rows


def step(engine, reqs, plan) -> None:
    t0 = engine.clock()
    roots = torch.tensor([r.root for r in reqs])
    logits = engine.decode(roots, torch.tensor([r.start for r in reqs]))
    tokens = pick_rows(logits, reqs).tolist()
    engine.tcache.advance([1] * len(reqs))
    t1 = engine.clock()
    for r, token in zip(reqs, tokens, strict=True):
        r.steps.append(Step(committed=r.commit([token]), accepted=0, depth=0, nodes=0, verify_s=t1 - t0))
