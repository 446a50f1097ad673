"""The T=0 tau simulation: DDTree construction, acceptance, and the decoding walk."""

import itertools
import math

import numpy as np
import pytest

from refengine.train import tau


def marg(depth: int, k: int, seed: int):
    """Random sorted top-k marginals over a vocabulary of 10 per depth."""
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.permutation(10)[:k] for _ in range(depth)])
    p = rng.dirichlet(np.ones(10), size=depth)
    lp = np.sort(np.log(p), axis=1)[:, ::-1][:, :k]
    return ids, lp.copy()


def expected_acceptance(nodes, ids, lp):
    """Sum over nodes of the product of marginals along the node's prefix (DDTree's objective)."""
    return sum(math.exp(sum(lp[d, r] for d, r in enumerate(path))) for path in nodes)


def paths_of(children, ids):
    # invert {(parent, token): node} into rank paths
    rank = [{int(t): r for r, t in enumerate(row)} for row in ids]
    parent_of = {n: (p, t) for (p, t), n in children.items()}
    out = []
    for n in children.values():
        path, cur = [], n
        while cur:
            p, t = parent_of[cur]
            path.append(t)
            cur = p
        path.reverse()
        out.append(tuple(rank[d][t] for d, t in enumerate(path)))
    return out


@pytest.mark.parametrize("budget,topk,depth", [(1, 1, 3), (3, 1, 3), (5, 2, 3), (7, 3, 2), (6, 4, 2)])
def test_tree_is_the_best_prefix_set(budget, topk, depth):
    ids, lp = marg(depth=depth, k=topk, seed=budget * 10 + topk)
    children = tau.build_tree(ids, lp, budget, topk)
    assert len(children) == budget
    got = expected_acceptance(paths_of(children, ids), ids, lp)
    # brute force over every prefix-closed set of `budget` rank paths
    all_paths = [p for d in range(1, depth + 1) for p in itertools.product(range(topk), repeat=d)]
    best = 0.0
    for subset in itertools.combinations(all_paths, budget):
        s = set(subset)
        if all(p[:-1] in s or len(p) == 1 for p in s):
            best = max(best, expected_acceptance(subset, ids, lp))
    assert got == pytest.approx(best)


def test_chain_is_the_argmax_block():
    ids, lp = marg(depth=5, k=4, seed=3)
    children = tau.build_tree(ids, lp, budget=5, topk=1)
    assert sorted(children) == [(i, int(ids[i, 0])) for i in range(5)]


def test_accepted_follows_the_truth_down_the_tree():
    ids = np.array([[5, 6], [7, 8], [9, 1]])
    lp = np.log(np.array([[0.6, 0.4], [0.7, 0.3], [0.9, 0.1]]))
    children = tau.build_tree(ids, lp, budget=6, topk=2)
    assert tau.accepted(children, np.array([5, 7, 9])) == 3
    assert tau.accepted(children, np.array([6, 7, 3])) >= 1
    assert tau.accepted(children, np.array([2, 7, 9])) == 0


def test_walk_commits_every_token_once():
    rng = np.random.default_rng(0)
    start, new, depth = 4, 40, 7
    seq = rng.integers(0, 10, size=start + new + depth)
    # marginals that are right at the first two slots and wrong after: commits of 3 each
    ids = np.zeros((new, depth, 2), dtype=np.int64)
    for i in range(new):
        pos = start + i
        for d in range(depth):
            ids[i, d] = [seq[pos + 1 + d] if d < 2 else (seq[pos + 1 + d] + 1) % 10, 99]
    lp = np.log(np.full((new, depth, 2), 0.5))
    commits = tau.walk(seq, start, new, ids, lp, budget=depth, topk=1)
    assert sum(commits) == new - 1
    assert commits[:-1] == [3] * (len(commits) - 1)


def test_linear_and_chain_agree_in_the_table():
    ids, lp = marg(depth=15, k=8, seed=1)
    rng = np.random.default_rng(1)
    seq = rng.integers(0, 10, size=100)
    case = {"category": "chat:code", "seq": seq, "start": 10, "new_tokens": 64,
            "ids": np.repeat(ids[None], 90, 0), "logp": np.repeat(lp[None], 90, 0)}
    table = tau.tau_table([case], block_size=16)
    assert table["linear-b16"] == table["chain-b15"]
    assert set(table["linear-b16"]) == {"chat:code", "chat", "all"}
    assert len(table) == 1 + len(tau.BUDGETS) * len(tau.TOPKS)
