"""Linear DFlash (block b): draft b-1 tokens in one drafter pass, verify b tokens in one causal
target pass, commit the longest matching prefix plus the target's next token (the bonus).
Every running request takes the step together: one drafter pass and one target pass in all.

At T > 0 the target samples every position independently and a draft is kept while it equals
the target's sample, so every committed token is a target sample: lossless.
"""

from __future__ import annotations

import torch

from refengine.output import Step
from refengine.sampling import pick_rows


def step(engine, reqs, plan) -> None:
    b = plan.block_size
    t0 = engine.clock()
    drafts = engine.draft(reqs, b - 1, block=b).argmax(-1)  # [n, b-1]
    t1 = engine.clock()
    roots = torch.tensor([[r.root] for r in reqs], device=drafts.device)
    ids = torch.cat([roots, drafts], 1)
    positions = torch.tensor([[r.start] for r in reqs], device=drafts.device) + torch.arange(b, device=drafts.device)
    logits, feats = engine.verify(ids, positions, None)
    choice = pick_rows(logits, reqs)
    t2 = engine.clock()
    accepted = (drafts == choice[:, :-1]).int().cumprod(1).sum(1).tolist()
    drafts, choice = drafts.tolist(), choice.tolist()
    engine.tcache.advance([a + 1 for a in accepted])
    feats = feats.clone()  # a replayed graph reuses its output buffer
    for i, (r, a) in enumerate(zip(reqs, accepted, strict=True)):
        r.features = feats[i:i + 1, :a + 1]
    t3 = engine.clock()
    for i, (r, a) in enumerate(zip(reqs, accepted, strict=True)):
        r.steps.append(Step(committed=r.commit(drafts[i][:a] + [choice[i][a]]), accepted=a, depth=a, nodes=b - 1,
                            draft_s=t1 - t0, verify_s=t2 - t1, bookkeeping_s=t3 - t2))
