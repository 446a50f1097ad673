"""Percentile suppression, Student-t and bootstrap intervals: golden values and coverage."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from analysis.estimate import stats


@pytest.mark.parametrize("q, smallest", [(0.5, 20), (0.9, 100), (0.99, 1000)])
def test_percentile_printed_only_when_n_times_tail_reaches_10(q, smallest):
    assert not stats.printable(smallest - 1, q)
    assert stats.printable(smallest, q)   # 100·(1−0.9) is 9.999… in floats; the rule must still print it


def test_percentile_value_and_suppression():
    x = np.arange(1, 21, dtype=float)          # 20 samples: median printable, p90 not
    assert stats.percentile(x, 0.5) == 10.5
    assert math.isnan(stats.percentile(x, 0.9))
    assert stats.percentile(np.arange(100.0), 0.9) == pytest.approx(89.1)


def test_bootstrap_sums_draw_n_rows_per_replicate():
    x = np.column_stack([np.ones(37), np.arange(37.0)])
    s = stats.bootstrap_sums(x, 250, np.random.default_rng(1))
    assert s.shape == (250, 2)
    assert (s[:, 0] == 37).all()
    assert s[:, 1].min() >= 0 and s[:, 1].max() <= 36 * 37
    assert s[:, 1].std() > 0


def test_bootstrap_mean_interval_covers_the_true_mean_about_95_percent():
    rng = np.random.default_rng(7)
    hits, trials = 0, 300
    for _ in range(trials):
        x = rng.exponential(2.0, size=150)
        lo, hi = stats.bootstrap_mean(x, 400, rng)
        hits += lo <= 2.0 <= hi
    assert 0.90 <= hits / trials <= 0.99


def test_bootstrap_ratio_of_sums_interval_covers_about_95_percent():
    # τ-like: tokens / steps with steps random; true ratio E[tokens]/E[steps] = 12 / 4 = 3
    rng = np.random.default_rng(3)
    hits, trials = 0, 300
    for _ in range(trials):
        steps = rng.integers(1, 8, size=120).astype(float)
        tokens = 3 * steps + rng.normal(0, 2, size=120)
        reps = stats.bootstrap_sums(np.column_stack([tokens, steps]), 400, rng)
        lo, hi = stats.interval(reps[:, 0] / reps[:, 1])
        hits += lo <= 3.0 <= hi
    assert 0.90 <= hits / trials <= 0.99


def test_log_t_interval_golden():
    mean, lo, hi = stats.log_t_interval([1.0, math.e, math.e ** 2])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)   # t(0.975, 2) · sd(log x) / √n, on logs 0, 1, 2
    assert mean == pytest.approx(math.e)
    assert lo == pytest.approx(math.exp(1 - half)) and hi == pytest.approx(math.exp(1 + half))


def test_log_t_interval_needs_two_repetitions():
    mean, lo, hi = stats.log_t_interval([5.0])
    assert mean == pytest.approx(5.0) and math.isnan(lo) and math.isnan(hi)


def test_log_t_interval_coverage_over_three_repetitions():
    rng = np.random.default_rng(11)
    trials = 3000
    hits = sum(lo <= 10 <= hi for _, lo, hi in
               (stats.log_t_interval(10 * np.exp(rng.normal(0, 0.2, size=3))) for _ in range(trials)))
    assert 0.93 <= hits / trials <= 0.97


# the domain rule: h200-tiny printed a TTFT mean of 27.0 ms with a raw t-interval of -10.2 to 64.3 ms
@pytest.mark.parametrize("values", [[0.005, 0.012, 0.064], [0.001, 0.090, 0.0005], [3.0, 3.0, 300.0]])
def test_no_interval_leaves_the_positive_axis(values):
    mean, lo, hi = stats.log_t_interval(values)
    assert 0 < lo < mean < hi


@pytest.mark.parametrize("n", [2, 3, 6])
def test_tau_interval_stays_at_or_above_one(n):
    rng = np.random.default_rng(n)
    taus = 1 + rng.exponential(0.05, size=n)      # near 1, widely spread: a raw t-interval crosses 1
    mean, lo, hi = stats.log_t_interval(taus, floor=1.0)
    assert 1 < lo < mean < hi


@pytest.mark.parametrize("n", [2, 3, 6])
def test_paired_ratio_with_n_repetitions(n):
    # arm y drifts (its repetitions spread ±10%), arm x is y × 1.05 in every pair: pairing removes the spread
    y = 100 * np.exp(np.linspace(-0.1, 0.1, n))
    x = 1.05 * y * np.exp(np.resize([0.01, -0.01], n))
    r = stats.paired_log_ratio(x, y)
    assert r["pairs"] == n
    assert r["ratio"] == pytest.approx(1.05 * math.exp(np.resize([0.01, -0.01], n).mean()))
    assert 0 < r["ratio_lo"] < r["ratio"] < r["ratio_hi"]
    d = np.log(x / y)
    half = stats.sps.t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n)
    assert r["ratio_lo"] == pytest.approx(math.exp(d.mean() - half))
    assert r["sd_y"] == pytest.approx(np.log(y).std(ddof=1))      # each side's noise: its repetitions' spread
    assert r["sd_pair"] == pytest.approx(d.std(ddof=1))
    assert r["sd_pair"] < r["sd_y"]
    assert r["wins"] == n
    assert r["mde"] == pytest.approx(math.exp(stats.mde(d.std(ddof=1), n)) - 1)


def test_unpaired_ratio_ignores_order():
    x, y = [105, 110, 100], [100, 95, 102, 98]
    r = stats.unpaired_log_ratio(x, y)
    assert r["pairs"] == 0 and math.isnan(r["sign_p"])
    assert r["ratio"] == pytest.approx(math.exp(np.log(x).mean() - np.log(y).mean()))
    assert 0 < r["ratio_lo"] < r["ratio"] < r["ratio_hi"]
    again = stats.unpaired_log_ratio(x[::-1], y[::-1])
    assert [again[k] for k in ("ratio", "ratio_lo", "ratio_hi")] == pytest.approx([r[k] for k in ("ratio", "ratio_lo",
                                                                                               "ratio_hi")])


@pytest.mark.parametrize("diffs", [[1, 1, 1, 1, 1, 1], [1, -1, 1, 1, -1, 1, 1], [-2, -1, -3], [1, 0, -1, 1],
                                   list(np.random.default_rng(3).normal(0.2, 1, size=25))])
def test_sign_test_against_scipy(diffs):
    d = np.asarray(diffs, dtype=float)
    d = d[d != 0]
    want = stats.sps.binomtest(int((d > 0).sum()), len(d), 0.5, alternative="two-sided").pvalue
    assert stats.sign_test(diffs) == pytest.approx(want, rel=1e-12)


def test_mde_and_n_to_resolve():
    # (t(0.975, 5) + t(0.8, 5)) · 0.03 / √6
    want = (stats.sps.t.ppf(0.975, 5) + stats.sps.t.ppf(0.8, 5)) * 0.03 / math.sqrt(6)
    assert stats.mde(0.03, 6) == pytest.approx(want)
    n = stats.n_to_resolve(0.02, 0.03)
    assert stats.mde(0.03, n) <= 0.02 < stats.mde(0.03, n - 1)
    assert stats.n_to_resolve(0.0, 0.03) is None
    assert stats.n_to_resolve(1e-6, 0.5) is None            # past MAX_N


def test_a_between_run_sd_widens_an_interval_in_quadrature_on_the_log_scale():
    lo, hi = stats.with_between_sd(1.5, 1.4, 1.5 ** 2 / 1.4, 0.05)
    half = np.hypot(np.log(1.5 / 1.4), sps.norm.ppf(0.975) * np.log(1.05))
    assert (lo, hi) == pytest.approx((1.5 * np.exp(-half), 1.5 * np.exp(half)))
    assert np.log(hi / 1.5) == pytest.approx(np.log(1.5 / lo))       # still symmetric about the ratio
    # none to add, or nothing known: the repetitions' interval as it was
    for sd in (0.0, float("nan")):
        assert stats.with_between_sd(1.5, 1.4, 1.6, sd) == (1.4, 1.6)
    assert all(math.isnan(x) for x in stats.with_between_sd(1.5, float("nan"), float("nan"), 0.05))


@pytest.mark.parametrize("sd", [0.01, 0.3, 2.0])
def test_a_widened_interval_stays_on_the_positive_axis(sd):
    lo, hi = stats.with_between_sd(0.9, 0.5, 1.62, sd)
    assert 0 < lo < 0.5 and hi > 1.62
