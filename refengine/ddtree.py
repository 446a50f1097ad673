"""DDTree (chain = top-k 1): draft once, build the best-first tree, verify it in one target
forward (position = start + depth, ancestor-only visibility), walk, commit, compact the KV
cache to the accepted path, and keep the path's features as the drafter's next context.

At T > 0 the target samples every node independently and the walk follows the samples: lossless.
"""

from __future__ import annotations

import torch

from refengine.output import Step
from refengine.sampling import pick
from refengine.tree import build, walk


def step(engine, req, plan) -> None:
    block = plan.block_size or engine.drafter.block_size
    depth = min(block - 1, plan.budget)
    t0 = engine.clock()
    logprobs = engine.draft(req, depth, block).float().log_softmax(-1)
    t1 = engine.clock()
    tree = build(req.root, logprobs, plan.budget, plan.width, plan.depth_bonus)
    device = engine.device
    ids = torch.tensor(tree.tokens, device=device)
    positions = req.start + torch.tensor(tree.depths, device=device)
    visible = torch.from_numpy(tree.visible()).to(device)
    t2 = engine.clock()
    logits, feats = engine.verify(ids, positions, visible)
    choice = pick(logits, req.sampling, req.generator).tolist()
    t3 = engine.clock()
    path = walk(tree, choice)
    keep = torch.tensor(path, device=device)
    engine.tcache.commit(0, keep)
    req.features = feats.index_select(0, keep)[None]
    tokens = [tree.tokens[n] for n in path[1:]] + [choice[path[-1]]]
    t4 = engine.clock()
    req.steps.append(Step(committed=req.commit(tokens), accepted=len(path) - 1, depth=tree.depths[path[-1]],
                          nodes=tree.size, draft_s=t1 - t0, verify_s=t3 - t2,
                          bookkeeping_s=(t2 - t1) + (t4 - t3)))
