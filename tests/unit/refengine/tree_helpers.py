"""Trees straight from full log-probs, for tests (the engine takes one batched top-k for all rows)."""

from __future__ import annotations

import torch

from refengine.tree import Tree, build


def build_from_logprobs(root: int, logprobs: torch.Tensor, budget: int, topk: int,
                        depth_bonus: float = 0.0) -> Tree:
    """`build` over full log-probs [L, V]."""
    values, ids = logprobs.topk(min(topk, logprobs.shape[-1]), dim=-1)
    return build(root, values.tolist(), ids.tolist(), budget, depth_bonus)
