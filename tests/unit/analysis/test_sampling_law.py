"""Lossless at T > 0 (analysis.sampling_law): the exact law on a target whose law is worked out by hand, the bins,
the G-test and its power against scipy and a simulation, the plans of a profile's arms, and on a small toy pair
the real engine passing while a planted bug (a draft accepted without sampling) fails."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from analysis import sampling_law as sl
from ddbench.core.profile import Sampling, load_profile
from refengine.plan import Plan

torch.set_num_threads(1)

# a target whose next token depends on the last one only: row t is the law after token t
M = [[0.5, 0.3, 0.2, 0.0],
     [0.1, 0.6, 0.3, 0.0],
     [0.25, 0.25, 0.25, 0.25],
     [0.0, 0.0, 0.0, 1.0]]


class Markov:
    def __init__(self, m):
        self.logm = torch.tensor(m).log()

    def __call__(self, ids, positions, **kw):
        return self.logm[ids], None


def approx(d: dict) -> dict:
    return {k: pytest.approx(v, abs=1e-6) for k, v in d.items()}


def test_law_is_the_product_of_the_next_token_laws():
    t = Markov(M)
    # after token 2 every first token has 1/4, then row t1 of M
    want = {(a, b): 0.25 * M[a][b] for a in range(4) for b in range(4) if M[a][b]}
    assert sl.law(t, [2], sl.ref_sampling(Sampling(temperature=1.0)), 2) == approx(want)
    # top-k 2 after token 0: tokens 0, 1 renormalised (5/8, 3/8); then top-2 of row 0 (5/8, 3/8), of row 1 (2/3, 1/3)
    top2 = {(0, 0): 5 / 8 * 5 / 8, (0, 1): 5 / 8 * 3 / 8, (1, 1): 3 / 8 * 2 / 3, (1, 2): 3 / 8 * 1 / 3}
    assert sl.law(t, [0], sl.ref_sampling(Sampling(temperature=1.0, top_k=2)), 2) == approx(top2)
    # top-p 0.7 after token 0: 0.5 + 0.3 reach it, 0.2 is dropped (the same two tokens)
    top_p = sl.ref_sampling(Sampling(temperature=1.0, top_p=0.7))
    assert sl.law(t, [0], top_p, 1) == approx({(0,): 5 / 8, (1,): 3 / 8})
    # T = 0.5 squares the probabilities: 25 : 9 : 4
    assert sl.law(t, [0], sl.ref_sampling(Sampling(temperature=0.5)), 1) == approx(
        {(0,): 25 / 38, (1,): 9 / 38, (2,): 4 / 38})


def test_law_stops_at_a_stop_token_and_keeps_only_what_clears_the_floor():
    t, s = Markov(M), sl.ref_sampling(Sampling(temperature=1.0))
    stopped = sl.law(t, [2], s, 2, stop_ids={3})
    assert stopped[(3,)] == pytest.approx(0.25) and (3, 3) not in stopped
    assert sum(stopped.values()) == pytest.approx(1.0)
    # every outcome of probability >= 0.1, exactly; nothing below it
    assert sl.law(t, [2], s, 2, floor=0.1) == approx({(0, 0): 0.125, (1, 1): 0.15, (3, 3): 0.25})


def test_outcome_probs_and_the_impossible_outcomes():
    t, s = Markov(M), sl.ref_sampling(Sampling(temperature=1.0, top_k=2))
    assert sl.outcome_probs(t, [0], [(0, 1), (1, 2), (1, 0)], s) == pytest.approx([15 / 64, 1 / 8, 0.0])
    p = sl.law(t, [0], s, 2, floor=0.2)
    counts = {(0, 0): 5, (0, 1): 3, (1, 2): 2, (1, 0): 1, (0,): 1, (2, 1): 1}
    # (1, 0): token 0 is outside row 1's top 2; (0,): an early end with no stop token; (2, 1): 2 is not in the top 2
    assert sorted(sl.unlikely(t, [0], counts, p, s, 2, ())) == [(0,), (1, 0), (2, 1)]


def test_binning_gives_small_outcomes_one_bin():
    p = {("a",): 0.5, ("b",): 0.3, ("c",): 0.12, ("d",): 0.03}
    index, rest, q = sl.binning(p, 100)         # expected 50, 30, 12, then 3 for d and 5 more unlisted: 'other' 8
    assert index == {("a",): 0, ("b",): 1, ("c",): 2} and rest == 3
    np.testing.assert_allclose(q, [0.5, 0.3, 0.12, 0.08])
    index, rest, q = sl.binning({("a",): 0.6, ("b",): 0.37, ("c",): 0.02}, 100)
    assert index == {("a",): 0, ("b",): 1} and rest == 1       # 'other' (3 expected) joins b, the least likely
    np.testing.assert_allclose(q, [0.6, 0.4])
    assert sl.binning({("a",): 0.999}, 100)[2].tolist() == [1.0]   # all in one bin: df 0


def test_g_test_is_scipys_log_likelihood_ratio():
    obs, p = [30, 14, 34, 45, 27], np.array([0.2, 0.15, 0.25, 0.25, 0.15])
    g, df = sl.g_test(obs, p)
    ref = stats.power_divergence(obs, p * sum(obs), lambda_="log-likelihood")
    assert g == pytest.approx(ref.statistic) and df == 4
    assert sl.p_value(g, df) == pytest.approx(ref.pvalue)
    assert sl.g_test([3, 0, 1], [0.5, 0.5, 0.0])[0] == math.inf   # a draw where the law has none
    assert sl.p_value(0.0, 0) == 1.0
    assert [sl.verdict(0.2, 0.01, 3, 0), sl.verdict(0.001, 0.01, 3, 0), sl.verdict(0.9, 0.01, 3, 1),
            sl.verdict(1.0, 0.01, 0, 0)] == ["pass", "fail", "fail", "n/a"]


@pytest.mark.parametrize("n, df, alpha", [(1200, 70, 0.0125), (400, 4, 0.05), (2000, 20, 0.01)])
def test_detectable_w_has_the_power_it_claims(n, df, alpha):
    w = sl.detectable_w(n, df, alpha)
    crit = stats.chi2.isf(alpha, df)
    assert stats.ncx2.sf(crit, df, n * w * w) == pytest.approx(0.8, abs=1e-6)
    assert sl.detectable_w(2 * n, df, alpha) < w < sl.detectable_w(n, df + 10, alpha)
    assert sl.detectable_w(n, 0, alpha) == math.inf


def test_power_holds_in_simulation():
    """Moving detectable_shift between the two likeliest of six outcomes is rejected about 80% of the time."""
    n, alpha, q = 1000, 0.01, np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    w = sl.detectable_w(n, len(q) - 1, alpha)
    d = sl.shift(w, [q])
    moved = q + np.array([-d, d, 0, 0, 0, 0])
    assert math.sqrt(((moved - q) ** 2 / q).sum()) == pytest.approx(w)     # Cohen's w of that move
    draws = np.random.default_rng(0).multinomial(n, moved, size=4000)
    rejected = np.mean([sl.p_value(*sl.g_test(o, q)) < alpha for o in draws])
    assert rejected == pytest.approx(0.8, abs=0.03)
    null = np.random.default_rng(1).multinomial(n, q, size=4000)
    assert np.mean([sl.p_value(*sl.g_test(o, q)) < alpha for o in null]) == pytest.approx(alpha, abs=0.006)


def test_plans_and_rows_of_a_profile():
    p = load_profile("cpu-tiny")
    for arm in p.arms:
        got, want = sl.plan(arm), Plan.parse(arm.id)
        assert (got.kind, got.budget, got.topk, got.depth_bonus) == (want.kind, want.budget, want.topk, 0.0)
    assert sl.rows(p) == []                      # T = 0 only: nothing to check here
    swept = [Sampling(), Sampling(temperature=0.7, top_p=0.95)]
    rows = sl.rows(p.model_copy(update={"workload": p.workload.model_copy(update={"sampling": swept})}))
    assert [(r.arm, r.planted) for r in rows] == [("ar", False), ("linear-b16", False), ("chain-b15", False),
                                                  ("tree-b15-k8", False), ("tree-b15-k8", True)]
    assert {r.sampling.label for r in rows} == {"t0.7-p0.95"}


# -- the engine: a toy pair that accepts drafts ----------------------------------------------

@pytest.fixture(scope="module")
def soft_echo():
    """tests/unit/refengine's soft echo pair: T=1 spreads over several tokens, drafts are often accepted."""
    from refengine.pair import echo_pair
    return echo_pair(seed=0, mix=0.5, noise=2.0, sharpness=0.12)


@pytest.fixture(scope="module")
def toy_table(soft_echo):
    target, drafter = soft_echo
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 255, (6,), generator=gen).tolist() for _ in range(6)]
    s = Sampling(temperature=1.0)
    rows = [sl.Row("ar", "ar", Plan("ar"), s)]
    rows += [sl.Row(a, Plan.parse(a).kind, Plan.parse(a), s, bug) for a in ("linear-b16", "tree-b15-k8")
             for bug in (False, True)]
    return sl.check(target, drafter, prompts, rows, draws=300, n_prompts=2, k=3)


def test_the_engine_passes_and_the_planted_bug_fails(toy_table):
    t = toy_table.set_index(["arm", "planted"])
    real = t.xs(False, level="planted")
    assert (real["verdict"] == "pass").all(), real[["p_value", "alpha"]]
    assert (real["impossible"] == 0).all()
    bug = t.xs(True, level="planted")
    assert (bug["verdict"] == "fail").all() and (bug["p_value"] < 1e-6).all()
    # the test exercised the walk: most first steps accepted a draft
    assert (real.loc[["linear-b16", "tree-b15-k8"], "accepted_share"] > 0.3).all()
    assert (t["draws"] == 300).all() and (t["df"] > 0).all() and np.allclose(t["alpha"], 0.05 / 3)
    assert np.isfinite(t["detectable_w"]).all() and (t["detectable_shift"] < 0.2).all()


def test_planted_bug_is_undone(soft_echo):
    from refengine import ddtree, linear
    from refengine.engine import Engine
    from refengine.sampling import pick_rows
    engine = Engine(*soft_echo, capacity=64)
    with sl.planted(engine):
        assert ddtree.pick_rows is not pick_rows and linear.pick_rows is not pick_rows
        assert "verify" in vars(engine)
    assert ddtree.pick_rows is pick_rows and linear.pick_rows is pick_rows and "verify" not in vars(engine)
