"""Ratios from the rounds schedule: pooled throughput ratio over matched rounds, and a circular block bootstrap
whose interval covers at its stated level on synthetic rounds with known autocorrelation."""

import numpy as np
import pandas as pd
import pytest

from analysis.estimate import rounds


def ar1(rng, n, phi, sd):
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    e = rng.normal(0, sd * np.sqrt(1 - phi ** 2), n)
    for k in range(1, n):
        x[k] = phi * x[k - 1] + e[k]
    return x


def unit_frame(arm, unit_s, tokens=512.0, reps=1):
    n = len(unit_s)
    return pd.DataFrame({"arm": arm, "concurrency": 1, "repetition": np.repeat(np.arange(1, reps + 1), n // reps),
                         "round": np.tile(np.arange(n // reps), reps), "tokens": tokens, "unit_s": unit_s,
                         "requests": 1})


def coverage(phi, n, draws=1000, seed=7):
    # each server drifts through its own states (AR(1) on the log scale, sd 12%); the true ratio of pooled
    # throughputs is 1.25 (x's units take 0.8 of y's time)
    rng = np.random.default_rng(seed)
    hits, dfs = 0, []
    for i in range(draws):
        r = rounds.paired(unit_frame("x", 0.8 * np.exp(ar1(rng, n, phi, 0.12))),
                          unit_frame("y", np.exp(ar1(rng, n, phi, 0.12))), b=400, seed=i)
        hits += r["speedup_lo"] <= 1.25 <= r["speedup_hi"]
        dfs.append(r["df"])
    return hits / draws, float(np.median(dfs))


@pytest.mark.parametrize("phi", [0.0, 0.3, 0.5, 0.7])
def test_the_block_bootstrap_interval_covers_the_true_ratio(phi):
    # 200 rounds; lag-1 0.5-0.6 is what a pilot on the twin measured
    hit, _ = coverage(phi, 200)
    assert 0.93 <= hit <= 0.97
    assert "93-96% at lag-1 autocorrelation\n0-0.7" in rounds.__doc__


@pytest.mark.parametrize("phi, n", [(0.3, 12), (0.7, 12), (0.3, 30), (0.7, 30)])
def test_a_few_rounds_still_cover(phi, n):
    # where the lag-1 estimate is noisiest: read low, it would shrink the blocks and the interval
    hit, _ = coverage(phi, n, draws=600)
    assert hit >= 0.925


def test_independent_rounds_keep_their_degrees_of_freedom():
    # blocks of ⌈√n⌉ left 12 of 200 rounds' degrees of freedom, and 2 of 12
    assert coverage(0.0, 200, draws=100)[1] >= 65
    assert coverage(0.0, 12, draws=100)[1] >= 3
    assert rounds.block_length(np.random.default_rng(0).normal(size=200))[0] <= 3
    # and drifting ones give theirs up: a block spans the states
    assert rounds.block_length(ar1(np.random.default_rng(0), 200, 0.7, 1.0))[0] >= 10


def test_stopping_on_precision_keeps_the_interval_s_coverage():
    # load.resolve (ddbench/resolve.py) ends a level's stretches once its MDE reaches the target
    # add stretches of 8 rounds (AR(1) servers, the true ratio 1.25) until the MDE reaches 6%, or 20 stretches:
    # the stop reads the MDE alone, never the ratio, and the final interval still covers
    for phi in (0.0, 0.3):
        rng = np.random.default_rng(5)
        hits, stopped = 0, 0
        for i in range(300):
            xs, ys = 0.8 * np.exp(ar1(rng, 160, phi, 0.12)), np.exp(ar1(rng, 160, phi, 0.12))
            for m in range(24, 161, 8):
                r = rounds.paired(unit_frame("x", xs[:m]), unit_frame("y", ys[:m]), b=300, seed=i)
                if r["mde"] <= 0.06:
                    stopped += 1
                    break
            hits += r["speedup_lo"] <= 1.25 <= r["speedup_hi"]
        assert hits / 300 >= 0.93, phi
        assert stopped / 300 > 0.8, phi    # most draws stopped early: the test is of the stopping


def test_rounds_pair_on_repetition_and_round_and_pool_tokens_over_time():
    x = unit_frame("x", np.array([1.0, 2.0, 1.0, 2.0]), reps=2)
    y = unit_frame("y", np.array([2.0, 2.0, 2.0, 2.0, 9.0]), reps=1).iloc[:4]
    y["repetition"], y["round"] = [1, 1, 2, 2], [0, 1, 0, 1]
    r = rounds.paired(x, y, b=200)
    assert r["rounds"] == 4
    assert r["speedup"] == pytest.approx((4 * 512 / 6.0) / (4 * 512 / 8.0))
    # fewer than 4 matched rounds: no interval
    assert rounds.paired(x.iloc[:3], y.iloc[:3])["verdict"] == "no interval"


def with_steady(req, chunks):
    frac, window = rounds.steady(req, chunks)
    return req.assign(steady_frac=frac, unit_s=window)


def test_units_come_from_measured_finished_requests_of_a_rounds_run():
    req = pd.DataFrame({"arm": ["a", "a", "a", "b"], "concurrency": 2, "repetition": 1, "round": [0, 0, 1, 0],
                        "ok": [True, True, True, False], "warmup": [False, False, True, False],
                        "n_tokens": [10.0, 12.0, 5.0, 7.0], "send_ns": [0, 1e8, 0, 0],
                        "end_ns": [1e9, 2e9, 1e9, 1e9]})
    # request 1's text: a third of its characters before the first request of its unit ended at 1 s
    chunks = pd.DataFrame({"req": [0, 1, 1, 1], "t_ns": [9e8, 5e8, 1.5e9, 2e9], "tokens": np.nan,
                           "chars": [30, 4, 4, 4]})
    u = rounds.units(with_steady(req, chunks))
    assert len(u) == 1 and u.iloc[0]["unit_s"] == pytest.approx(1.0)
    assert u.iloc[0]["tokens"] == pytest.approx(10 + 12 / 3)
    assert rounds.units(req.drop(columns=["round"])).empty   # a run of whole cells


def test_the_steady_window_counts_the_server_s_tokens_where_each_chunk_has_them():
    req = pd.DataFrame({"arm": "a", "concurrency": 2, "repetition": 1, "round": [0, 0], "ok": True,
                        "warmup": False, "n_tokens": [4.0, 10.0], "send_ns": [0, 0], "end_ns": [1e9, 3e9]})
    chunks = pd.DataFrame({"req": [0, 1, 1], "t_ns": [1e9, 1e9, 3e9], "tokens": [4.0, 7.0, 3.0],
                           "chars": [1, 1, 50]})
    frac, window = rounds.steady(req, chunks)
    assert frac == pytest.approx([1.0, 0.7]) and window == pytest.approx([1.0, 1.0])


def test_at_one_request_a_unit_the_steady_window_is_the_whole_request():
    req = pd.DataFrame({"arm": "a", "concurrency": 1, "repetition": 1, "round": [0, 1], "ok": True,
                        "warmup": False, "n_tokens": [4.0, 6.0], "send_ns": [0, 2e9], "end_ns": [1e9, 5e9]})
    chunks = pd.DataFrame({"req": [0, 1, 1], "t_ns": [1e9, 3e9, 5e9], "tokens": np.nan, "chars": [3, 3, 3]})
    frac, window = rounds.steady(req, chunks)
    assert frac == pytest.approx([1.0, 1.0]) and window == pytest.approx([1.0, 3.0])
    # a run of whole cells has no units: every token counts, and no window is set
    frac, window = rounds.steady(req.drop(columns=["round"]), chunks)
    assert (frac == 1).all() and np.isnan(window).all()


def prompt_frame(arm, unit_s, tokens, reps):
    """Rounds whose prompts recur: round j sends prompt j in every repetition, as the rounds schedule does."""
    k = len(tokens)
    return pd.DataFrame({"arm": arm, "concurrency": 1, "repetition": np.repeat(np.arange(1, reps + 1), k),
                         "round": np.tile(np.arange(k), reps), "tokens": np.tile(tokens, reps), "unit_s": unit_s,
                         "requests": 1, "prompts": np.tile([f"p{i}" for i in range(k)], reps)})


def prompt_effect_draws(k, reps, draws=1000):
    # prompts differ in length and in x's gain over y (sd 20%); the servers drift as AR(1), lag-1 0.3, sd 12%
    rng = np.random.default_rng(3)
    tokens = rng.integers(64, 512, k).astype(float)
    base_y = tokens / 100
    base_x = base_y / (1.25 * np.exp(rng.normal(0, 0.2, k)))
    true = base_y.sum() / base_x.sum()
    for i in range(draws):
        x = prompt_frame("x", np.tile(base_x, reps) * np.exp(ar1(rng, k * reps, 0.3, 0.12)), tokens, reps)
        y = prompt_frame("y", np.tile(base_y, reps) * np.exp(ar1(rng, k * reps, 0.3, 0.12)), tokens, reps)
        yield true, rounds.paired(x, y, b=400, seed=i), rounds.paired(x.drop(columns="prompts"),
                                                                       y.drop(columns="prompts"), b=400, seed=i)


@pytest.mark.parametrize("k, reps", [(10, 20), (7, 3)])
def test_the_prompt_stratified_interval_covers_and_is_no_wider_than_the_pooled_one(k, reps):
    hits, pooled_hits, mde, pooled_mde = 0, 0, [], []
    for true, s, p in prompt_effect_draws(k, reps):
        assert s["method"] == "stratified" and p["method"] == "pooled"
        hits += s["speedup_lo"] <= true <= s["speedup_hi"]
        pooled_hits += p["speedup_lo"] <= true <= p["speedup_hi"]
        mde.append(s["mde"])
        pooled_mde.append(p["mde"])
    assert 0.93 <= hits / 1000 <= 0.97
    if reps == 3:
        # 21 rounds: blocks of 5 cut the prompt cycle, so the pooled bootstrap counts the prompt mix as noise
        assert pooled_hits / 1000 > 0.98
        assert np.median(mde) < 0.8 * np.median(pooled_mde)


def test_rounds_whose_prompts_do_not_recur_fall_back_to_the_pooled_bootstrap():
    x = unit_frame("x", np.linspace(1, 2, 8), reps=2).assign(prompts=[f"p{i}" for i in range(8)])
    y = unit_frame("y", np.linspace(2, 1, 8), reps=2).assign(prompts=[f"p{i}" for i in range(8)])
    assert rounds.paired(x, y, b=200)["method"] == "pooled"
    x["prompts"] = y["prompts"] = ["a", "b", "c", "d"] * 2
    assert rounds.paired(x, y, b=200)["method"] == "stratified"
    # the point is the pooled ratio either way
    assert rounds.paired(x, y, b=200)["speedup"] == pytest.approx((8 * 512 / 12.0) / (8 * 512 / 12.0))


def test_a_round_s_prompts_name_the_unit():
    req = pd.DataFrame({"arm": "a", "concurrency": 2, "repetition": 1, "round": [0, 0], "ok": True, "warmup": False,
                        "n_tokens": [10.0, 12.0], "send_ns": [0, 0], "end_ns": [1e9, 2e9],
                        "prompt_id": pd.Categorical(["q2", "q1"])})
    chunks = pd.DataFrame({"req": [0, 1], "t_ns": [1e9, 2e9], "tokens": np.nan, "chars": [1, 1]})
    assert rounds.units(with_steady(req, chunks)).iloc[0]["prompts"] == "q1|q2"


def test_in_a_block_the_steady_window_runs_to_the_first_user_s_last_end():
    # a block of two users sending back to back: user 0 ends its last request at 2.5 s, user 1 at 4 s, so all
    # both are in flight until 2.5 s; user 1's last request (2-4 s) has half its characters inside by then
    req = pd.DataFrame({"arm": "a", "concurrency": 2, "repetition": 1, "round": 0, "ok": True, "warmup": False,
                        "user": [0, 0, 1, 1], "n_tokens": [8.0, 8.0, 8.0, 8.0], "send_ns": [0, 1e9, 0, 2e9],
                        "end_ns": [1e9, 2.5e9, 2e9, 4e9], "prompt_id": ["p0", "p2", "p1", "p3"]})
    chunks = pd.DataFrame({"req": [0, 1, 2, 3, 3], "t_ns": [1e9, 2.5e9, 2e9, 2.4e9, 4e9], "tokens": np.nan,
                           "chars": [4, 4, 4, 2, 2]})
    frac, window = rounds.steady(req, chunks)
    assert window == pytest.approx([2.5] * 4) and frac == pytest.approx([1, 1, 1, 0.5])
    u = rounds.units(req.assign(steady_frac=frac, unit_s=window))
    assert u.iloc[0]["tokens"] == pytest.approx(28) and u.iloc[0]["requests"] == 4
    # the round is named by the prompts its users opened with, whatever each went on to
    assert u.iloc[0]["prompts"] == "p0|p1"


def test_the_analysis_keeps_every_column_the_rounds_estimate_reads():
    # without its users a block's round is named by every prompt it sent, which differ between repetitions,
    # and the prompt-stratified bootstrap silently falls back to the pooled one
    from analysis import analyze
    assert set(rounds.READS) <= set(analyze.SLIM)
