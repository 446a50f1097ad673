"""The drafter diagnosis (analysis.headroom): ranks and their buckets, the first mismatch, the rate after a
sibling, and the expected acceptance of chain and tree, each against values worked out by hand."""

import math

import numpy as np
import pytest
import torch

from analysis import headroom as h

torch.set_num_threads(1)

# a hand-made trace: ranks of the target's token at depths 1..3, one row per root
TRACE = np.array([[1, 1, 1], [1, 2, 1], [3, 1, 1], [1, 1, 9], [2, 5, 1], [1, 1, 1]])


def test_ranks_count_the_tokens_scored_higher():
    logits = torch.tensor([[0.1, 3.0, 2.0, -1.0, 0.5],
                           [5.0, 4.0, 3.0, 2.0, 1.0]])
    assert h.ranks(logits, [2, 4]).tolist() == [2, 5]
    assert h.ranks(logits, [1, 0]).tolist() == [1, 1]
    assert h.ranks(logits, [3, 2]).tolist() == [5, 3]
    # batched [N, L, V]; log-softmax does not move a rank
    batch = torch.stack([logits, logits.flip(-1)]).log_softmax(-1)
    assert h.ranks(batch, [[2, 4], [2, 4]]).tolist() == [[2, 5], [2, 1]]


def test_rank_shares_per_depth_and_pooled():
    r = np.array([[1, 2], [1, 5], [3, 1], [1, 12]])
    t = h.rank_shares(r).set_index("depth")
    assert t.loc[1, h.SHARES].tolist() == [0.75, 0.0, 0.25, 0.0, 0.0]
    assert t.loc[2, h.SHARES].tolist() == [0.25, 0.25, 0.0, 0.25, 0.25]
    assert t.loc[0, h.SHARES].tolist() == [4 / 8, 1 / 8, 1 / 8, 1 / 8, 1 / 8]
    assert t["roots"].tolist() == [4, 4, 4]
    # the bucket edges: 4 is in 3-4, 8 in 5-8, 9 beyond
    assert h.shares([4, 8, 9]) == {"rank_1": 0.0, "rank_2": 0.0, "rank_3_4": 1 / 3, "rank_5_8": 1 / 3,
                                   "rank_gt_8": 1 / 3}


def test_first_mismatch_sibling_share():
    # chains break in rows 1-4: first mismatch ranks 2, 3, 9, 2 at depths 2, 1, 3, 1
    k2 = h.first_mismatch(TRACE, 2)
    assert (k2["roots"], k2["whole_chain"], k2["mismatches"], k2["sibling"]) == (6, 2, 4, 2)
    assert k2["sibling_share"] == 0.5
    assert k2["mean_depth"] == pytest.approx(7 / 4)
    assert (k2["rank_2"], k2["rank_3_4"], k2["rank_gt_8"]) == (0.5, 0.25, 0.25)
    assert h.first_mismatch(TRACE, 4)["sibling_share"] == 0.75
    assert h.first_mismatch(TRACE, 16)["sibling_share"] == 1.0
    assert math.isnan(h.first_mismatch(np.ones((3, 4), dtype=int), 8)["sibling_share"])


def test_after_sibling_against_the_spine():
    t = h.after_sibling(TRACE, 4).set_index(["prefix", "depth"])
    cols = ["sibling_n", "sibling_next", "spine_n", "spine_next"]
    # depth 1: siblings in rows 2 (next rank 1) and 4 (next rank 5); spine rows 0, 1, 3, 5, three go on
    assert t.loc[("spine", 1), cols].tolist() == [2, 1, 4, 3]
    # depth 2 on the spine prefix (rows 0, 1, 3, 5): sibling in row 1, goes on; spine rows 0, 3, 5, two go on
    assert t.loc[("spine", 2), cols].tolist() == [1, 1, 3, 2]
    assert t.loc[("spine", 0), cols].tolist() == [3, 2, 7, 5]
    assert t.loc[("spine", 0), "sibling_rate"] == pytest.approx(2 / 3)
    assert t.loc[("spine", 0), "spine_rate"] == pytest.approx(5 / 7)
    # any prefix at depth 2: row 2 (rank 3 at depth 1) joins the spine rows
    assert t.loc[("any", 2), cols].tolist() == [1, 1, 4, 3]
    # top-k 2: only row 4's rank 2 is a sibling at depth 1, and its next is rank 5
    k2 = h.after_sibling(TRACE, 2).set_index(["prefix", "depth"])
    assert k2.loc[("spine", 1), ["sibling_n", "sibling_next", "sibling_rate"]].tolist() == [1, 0, 0.0]
    assert set(t.reset_index()["depth"]) == {0, 1, 2}   # no depth L: nothing follows it


# a toy drafter with known marginals, L = 2 over 4 tokens, ids not in rank order
Q = np.array([[0.2, 0.06, 0.04, 0.7],     # depth 1: token 3 .7, 0 .2, 1 .06, 2 .04
              [0.06, 0.3, 0.6, 0.04]])    # depth 2: token 2 .6, 1 .3, 0 .06, 3 .04


def toy():
    values, ids = torch.tensor(np.log(Q)).topk(4, dim=-1)
    return values.numpy(), ids.numpy()


def test_best_tree_by_hand():
    values, ids = toy()
    # prefixes by probability: 3 .7, 3-2 .42, 3-1 .21, 0 .2, 0-2 .12, 0-1 .06 (top-k 2 at each depth)
    tree = h.grow(values, ids, budget=3, topk=2)
    assert (tree.tokens, tree.parents, tree.depths) == ([-1, 3, 2, 1], [-1, 0, 1, 1], [0, 1, 2, 2])
    assert h.expected_acceptance(values, ids, 3, 2) == pytest.approx(0.7 + 0.42 + 0.21)
    assert h.expected_acceptance(values, ids, 4, 2) == pytest.approx(0.7 + 0.42 + 0.21 + 0.2)
    assert h.expected_acceptance(values, ids, 6, 2) == pytest.approx((0.7 + 0.2) * (1 + 0.6 + 0.3))
    assert h.expected_acceptance(values, ids, 100, 2) == pytest.approx(1.71)   # no more nodes at top-k 2
    assert h.chain_expected(values) == pytest.approx(0.7 + 0.7 * 0.6)
    # the chain is build's tree of top-k 1 and budget L
    assert h.expected_acceptance(values, ids, 2, 1) == pytest.approx(h.chain_expected(values))
    # budget 1: the single best node
    assert h.expected_acceptance(values, ids, 1, 2) == pytest.approx(0.7)


def test_accepted_walks_the_targets_path():
    values, ids = toy()
    assert h.accepted(h.grow(values, ids, 3, 2), [3, 1]) == 2       # 3, then the sibling 1
    assert h.chain_accepted(h.ranks(torch.tensor(np.log(Q)), [3, 1])) == 1
    assert h.accepted(h.grow(values, ids, 3, 2), [0, 2]) == 0       # token 0 not in the 3-node tree
    assert h.accepted(h.grow(values, ids, 4, 2), [0, 2]) == 1       # the 4th node is 0, childless
    assert h.accepted(h.grow(values, ids, 6, 2), [0, 2]) == 2
    assert h.chain_accepted([1, 1, 3, 1]) == 2
    assert h.chain_accepted([1, 1]) == 2


def test_headroom_means_and_ratios():
    t = h.headroom([1.0, 2.0], [0, 3], {(15, 8): [1.5, 5.0]}, {(15, 8): [1, 4]}).iloc[0]
    assert (t["budget"], t["topk"], t["roots"]) == (15, 8, 2)
    assert (t["chain_expected"], t["tree_expected"]) == (1.5, 3.25)
    assert t["ratio_mean"] == pytest.approx((1.5 + 2.5) / 2)
    assert t["ratio_of_means"] == pytest.approx(3.25 / 1.5)
    assert (t["chain_accepted"], t["tree_accepted"], t["accepted_ratio"]) == (1.5, 2.5, pytest.approx(2.5 / 1.5))


def test_draft_blocks_match_the_engine():
    """The batched, masked drafter forward gives each root what Engine.draft gives it after a prefill."""
    from refengine.engine import Engine
    from refengine.pair import random_pair
    from refengine.request import Request
    from refengine.sampling import Sampling
    target, drafter = random_pair(seed=3, block_size=5, std=0.3)
    seq = torch.randint(0, 500, (24,), generator=torch.Generator().manual_seed(0)).tolist()
    roots = [4, 11, 19]
    got = h.draft_blocks(target, drafter, seq, roots)
    assert got.shape == (3, 4, 512)
    with torch.inference_mode():
        for i, p in enumerate(roots):
            engine = Engine(target, drafter, capacity=64)
            req = Request(seq[:p], Sampling(), 8, frozenset())
            engine.prefill(req, True, row=0)
            req.tokens = [seq[p]]           # the root: the token at position p, whatever prefill picked
            want = engine.draft([req], 4).float().log_softmax(-1)[0]
            torch.testing.assert_close(got[i], want, atol=2e-5, rtol=1e-5)
    assert not torch.allclose(got[0], got[1])   # roots see different contexts


def test_measure_on_a_random_pair():
    from refengine.pair import random_pair
    target, drafter = random_pair(seed=1, block_size=4, std=0.3)
    gen = torch.Generator().manual_seed(1)
    prompts = [(torch.randint(0, 500, (6,), generator=gen).tolist(), 10) for _ in range(2)]
    out = h.measure(target, drafter, prompts, [(3, 2), (9, 3)], stride=1)
    assert out["setup"].iloc[0][["prompts", "roots", "depth"]].tolist() == [2, 20, 3]
    ranks = out["ranks"]
    assert ranks["depth"].tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(ranks[h.SHARES].sum(axis=1), 1.0)
    assert out["first_mismatch"]["topk"].tolist() == [2, 3]
    t = out["headroom"].set_index("budget")
    assert t["roots"].tolist() == [20, 20]
    assert (t["tree_expected"] >= t["chain_expected"] - 1e-12).all()     # budget >= L: the chain is a subtree
    assert t.loc[9, "tree_expected"] >= t.loc[3, "tree_expected"]
    assert (t["tree_expected"] <= t.index).all()
    # every 3rd root of each prompt's 10: 4 each
    assert h.measure(target, drafter, prompts, [(3, 2)], stride=3)["setup"].iloc[0]["roots"] == 8


def test_spread_and_trees():
    from types import SimpleNamespace as NS
    ps = [NS(id=f"{c}{i}", category=c) for c in "abc" for i in range(3)]
    assert [p.id for p in h.spread(ps, 4)] == ["a0", "a1", "b0", "c0"]
    assert len(h.spread(ps, None)) == 9
    arms = [NS(kind="ar", tree_budget=None, tree_topk=None), NS(kind="chain", tree_budget=15, tree_topk=1),
            NS(kind="tree", tree_budget=15, tree_topk=8)]
    prof = NS(arms=arms)
    assert h.run_trees(prof, None, None) == [(15, 8)]
    assert h.run_trees(prof, [15, 31, 63], None) == [(15, 8), (31, 8), (63, 8)]
    assert h.run_trees(prof, None, 4) == [(15, 4)]
    assert h.run_trees(NS(arms=arms[:2]), None, None) == list(h.DEFAULT_TREES)
