"""Exact tau at T=0 by simulating decoding over the target's greedy continuation.

At temperature 0 the target's output is fixed, so a verify step accepts exactly the longest
drafted prefix that agrees with it. The drafter's marginals at a position depend only on the
context before it and the committed token there, so one masked forward gives the marginals at
every position; each arm's walk (linear block, chain, DDTree of budget B and top-k K) is then
replayed on the CPU. Linear-b and chain-(b-1) are the same walk, so they agree by construction.
"""

from __future__ import annotations

import heapq

import numpy as np
import torch
import torch.nn.functional as F

from refengine.train.draft_model import DraftModel
from refengine.train.target import autocast

BUDGETS = (7, 15, 31, 63)
TOPKS = (1, 2, 4, 8)


@torch.no_grad()
def marginals(model: DraftModel, target, seq: torch.Tensor, start: int, topk: int = 8):
    """seq (N, L): top-k token ids and log-probs (N, L-1-start, b-1, k) for blocks anchored at start .. L-2."""
    n, length = seq.shape
    b = model.block_size
    dev = next(model.parameters()).device
    seq = seq.to(dev)
    anchors = torch.arange(start, length - 1, device=dev).expand(n, -1)
    with autocast(dev):
        feats = model.context(target.model(seq, output_hidden_states=True).hidden_states)
        ids = torch.full((*anchors.shape, b), model.mask_token_id, device=dev, dtype=seq.dtype)
        ids[..., 0] = seq.gather(1, anchors)
        emb = target.get_input_embeddings()(ids.view(n, -1))
        h = model(feats, emb, anchors).view(n, anchors.shape[1], b, -1)[:, :, 1:]
        logits = F.linear(h, target.get_output_embeddings().weight)
    lp, top = F.log_softmax(logits.float(), -1).topk(topk, -1)
    return top.int().cpu().numpy(), lp.cpu().numpy()


def build_tree(ids: np.ndarray, logp: np.ndarray, budget: int, topk: int) -> dict:
    """Best-first DDTree: the `budget` most probable prefixes, at most topk children per node.
    ids/logp (depth, k) sorted by probability. Returns {(parent node, token): node}, root = 0."""
    depth = ids.shape[0]
    heap = [(-float(logp[0, 0]), 1, 0, 0, 0.0)]   # (-score, depth, rank, parent, parent score)
    children, n = {}, 0
    while heap and n < budget:
        neg, d, r, parent, pscore = heapq.heappop(heap)
        n += 1
        children[(parent, int(ids[d - 1, r]))] = n
        if r + 1 < topk:
            heapq.heappush(heap, (-(pscore + float(logp[d - 1, r + 1])), d, r + 1, parent, pscore))
        if d < depth:
            heapq.heappush(heap, (neg - float(logp[d, 0]), d + 1, 0, n, -neg))
    return children


def accepted(children: dict, truth: np.ndarray) -> int:
    node, depth = 0, 0
    for t in truth:
        node = children.get((node, int(t)))
        if node is None:
            break
        depth += 1
    return depth


def walk(seq: np.ndarray, start: int, new_tokens: int, ids: np.ndarray, logp: np.ndarray,
         budget: int, topk: int) -> list[int]:
    """Commit lengths of each verify step generating seq[start+1 : start+new_tokens].
    seq[start] is the prefill's token; ids/logp are indexed by anchor - start."""
    depth = ids.shape[1]
    pos, end, commits = start, start + new_tokens, []
    while pos < end - 1:
        tree = build_tree(ids[pos - start], logp[pos - start], budget, topk)
        c = min(accepted(tree, seq[pos + 1: pos + 1 + depth]) + 1, end - 1 - pos)
        commits.append(c)
        pos += c
    return commits


def arms(block_size: int) -> list[tuple[str, int, int]]:
    """(arm id, budget, top-k) for the linear block, its chain, and the budget x top-k grid."""
    out = [(f"linear-b{block_size}", block_size - 1, 1)]
    for B in BUDGETS:
        for K in TOPKS:
            out.append((f"chain-b{B}" if K == 1 else f"tree-b{B}-k{K}", B, K))
    return out


def tau_table(cases: list[dict], block_size: int) -> dict:
    """cases: {category, seq, start, new_tokens, ids, logp}; a category 'chat:code' also counts
    towards 'chat'. -> {arm: {category: tau}} plus 'all', token-weighted (sum commits / sum steps)."""
    table = {}
    for arm, budget, topk in arms(block_size):
        sums: dict[str, list[int]] = {}
        for c in cases:
            commits = walk(c["seq"], c["start"], c["new_tokens"], c["ids"], c["logp"], budget, topk)
            for key in {c["category"], c["category"].split(":")[0], "all"}:
                s = sums.setdefault(key, [0, 0])
                s[0] += sum(commits)
                s[1] += len(commits)
        table[arm] = {k: round(t / s, 3) for k, (t, s) in sums.items()}
    return table
