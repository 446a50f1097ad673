"""Tree building and walking, checked against brute force on small cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from tree_helpers import build_from_logprobs as build

from refengine.tree import walk


def _brute_force(logprobs: torch.Tensor, budget: int, topk: int, bonus: float) -> set[tuple[int, ...]]:
    """The `budget` best prefixes over each depth's top-k tokens, by summed log-prob + bonus per edge."""
    lp = logprobs.tolist()
    ranked = [sorted(range(len(row)), key=lambda t: -row[t])[:topk] for row in lp]
    scored = []
    for d in range(1, len(lp) + 1):
        for prefix in itertools.product(*ranked[:d]):
            scored.append((sum(lp[i][t] for i, t in enumerate(prefix)) + bonus * d, prefix))
    scored.sort(key=lambda x: -x[0])
    return {p for _, p in scored[:budget]}


@pytest.mark.parametrize("seed,budget,topk,bonus", [(0, 7, 3, 0.0), (1, 15, 8, 0.0), (2, 20, 2, 0.0),
                                                     (3, 12, 4, 0.5), (4, 5, 1, 0.0), (5, 30, 5, 1.0)])
def test_build_keeps_the_most_probable_prefixes(seed, budget, topk, bonus):
    gen = torch.Generator().manual_seed(seed)
    logprobs = ((3 if bonus == 0 else 0.3) * torch.randn(4, 10, generator=gen)).log_softmax(-1)
    # with every edge scoring <= 0 a prefix never beats its parent, so the best set is a tree
    assert logprobs.max() + bonus <= 0
    tree = build(99, logprobs, budget, topk, bonus)
    prefixes = set()
    for node in range(1, len(tree.tokens)):
        path, n = [], node
        while n > 0:
            path.append(tree.tokens[n])
            n = tree.parents[n]
        prefixes.add(tuple(reversed(path)))
        assert tree.parents[node] < node  # topological
        assert tree.depths[node] == tree.depths[tree.parents[node]] + 1
    assert tree.size == min(budget, sum(topk ** d for d in range(1, 5)))
    assert prefixes == _brute_force(logprobs, budget, topk, bonus)


def test_chain_is_the_argmax_path():
    logprobs = torch.randn(6, 12).log_softmax(-1)
    tree = build(0, logprobs, 6, 1)
    assert tree.tokens[1:] == logprobs.argmax(-1).tolist()
    assert tree.parents == [-1, 0, 1, 2, 3, 4, 5]
    assert np.array_equal(tree.visible(), np.tri(7, dtype=bool))


def test_visible_is_ancestor_or_self():
    tree = build(0, torch.randn(3, 5).log_softmax(-1), 10, 3)
    vis = tree.visible()
    for i in range(len(tree.tokens)):
        ancestors = set()
        n = i
        while n >= 0:
            ancestors.add(n)
            n = tree.parents[n]
        assert set(np.flatnonzero(vis[i])) == ancestors


def test_walk_follows_the_choice_and_stops_off_tree():
    tree = build(0, torch.tensor([[0.0, -1, -2], [0.0, -1, -2]]), 5, 2)
    # tokens: depth 1 {0, 1}, depth 2 under the best {0, 1}, ...
    by_prefix = {}
    for n in range(1, len(tree.tokens)):
        by_prefix[(tree.parents[n], tree.tokens[n])] = n
    first = by_prefix[(0, 1)]
    choice = [1] + [2] * tree.size
    assert walk(tree, choice) == [0, first]
    deep = by_prefix[(by_prefix[(0, 0)], 0)]
    choice = [0] * (tree.size + 1)
    assert walk(tree, choice) == [0, by_prefix[(0, 0)], deep]
    assert walk(tree, [2] * (tree.size + 1)) == [0]
