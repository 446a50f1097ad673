"""DDTree (chain = top-k 1): draft once, build the best-first tree, verify it in one target
forward (position = start + depth, ancestor-only visibility), walk, commit, compact the KV
cache to the accepted path, and keep the path's features as the drafter's next context.
Every running request takes the step together; trees of different sizes are padded with
idle nodes that see only themselves and are never walked into.

At T > 0 the target samples every node independently and the walk follows the samples: lossless.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch
from torch.profiler import record_function

from refengine.output import Step
from refengine.sampling import pick_rows
from refengine.tree import build, walk


def step(engine, reqs, plan) -> None:
    block = plan.block_size or engine.drafter.block_size
    depth = min(block - 1, plan.budget)
    t0 = engine.clock()
    logprobs = engine.draft(reqs, depth, block).float().log_softmax(-1)
    t1 = engine.clock()
    with part("tree.topk"):
        k = min(plan.width, logprobs.shape[-1])
        values, ids = logprobs.topk(k, dim=-1)
        values, ids = values.tolist(), ids.tolist()
    with part("tree.build"):
        trees = [build(r.root, v, i, plan.budget, plan.depth_bonus)
                 for r, v, i in zip(reqs, values, ids, strict=True)]
    with part("tree.masks"):
        width = max(len(t.tokens) for t in trees)
        tokens = np.zeros((len(reqs), width), dtype=np.int64)
        depths = np.zeros((len(reqs), width), dtype=np.int64)
        visible = np.broadcast_to(np.eye(width, dtype=bool), (len(reqs), width, width)).copy()
        for i, t in enumerate(trees):
            s = len(t.tokens)
            tokens[i, :s], depths[i, :s], visible[i, :s, :s] = t.tokens, t.depths, t.visible()
        starts = torch.tensor([[r.start] for r in reqs])
    t2 = engine.clock()
    logits, feats = engine.verify(torch.from_numpy(tokens), starts + torch.from_numpy(depths),
                                  torch.from_numpy(visible))
    choice = pick_rows(logits, reqs, [len(t.tokens) for t in trees]).tolist()
    t3 = engine.clock()
    with part("tree.walk"):
        paths = [walk(t, c) for t, c in zip(trees, choice, strict=True)]
    with part("tree.compact"):
        engine.tcache.compact(paths)
    with part("tree.features"):
        for i, (r, path) in enumerate(zip(reqs, paths, strict=True)):
            r.features = feats[i, path][None]  # advanced indexing copies: safe from the next graph replay
    t4 = engine.clock()
    for r, t, c, path in zip(reqs, trees, choice, paths, strict=True):
        committed = r.commit([t.tokens[n] for n in path[1:]] + [c[path[-1]]])
        r.steps.append(Step(committed=committed, accepted=len(path) - 1, depth=t.depths[path[-1]], nodes=t.size,
                            draft_s=t1 - t0, verify_s=t3 - t2, bookkeeping_s=(t2 - t1) + (t4 - t3)))


PARTS = ("tree.topk", "tree.build", "tree.masks", "tree.walk", "tree.compact", "tree.features")


def part(name: str):
    """A label for `refengine.bench --profile`; a label costs ~9 us even with no profiler
    listening, so the step is labelled only while one is."""
    return record_function(name) if torch.autograd._profiler_enabled() else nullcontext()
