"""Linear DFlash (block b): draft b-1 tokens in one drafter pass, verify b tokens in one causal
target pass, commit the longest matching prefix plus the target's next token (the bonus).

At T > 0 the target samples every position independently and a draft is kept while it equals
the target's sample, so every committed token is a target sample: lossless.
"""

from __future__ import annotations

import torch

from refengine.output import Step
from refengine.sampling import pick


def step(engine, req, plan) -> None:
    b = plan.block_size
    t0 = engine.clock()
    drafts = engine.draft(req, b - 1, block=b).argmax(-1)
    t1 = engine.clock()
    ids = torch.cat([torch.tensor([req.root], device=drafts.device), drafts])
    positions = torch.arange(req.start, req.start + b, device=drafts.device)
    logits, feats = engine.verify(ids, positions, None)
    choice = pick(logits, req.sampling, req.generator)
    t2 = engine.clock()
    accepted = int((drafts == choice[:-1]).int().cumprod(0).sum().item())
    tokens = drafts[:accepted].tolist() + [choice[accepted].item()]
    engine.tcache.commit(0, accepted + 1)
    req.features = feats[None, :accepted + 1].clone()
    t3 = engine.clock()
    req.steps.append(Step(committed=req.commit(tokens), accepted=accepted, depth=accepted, nodes=b - 1,
                          draft_s=t1 - t0, verify_s=t2 - t1, bookkeeping_s=t3 - t2))
