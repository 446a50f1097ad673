"""Percentile suppression, Student-t and bootstrap intervals: golden values and coverage."""

import math

import numpy as np
import pytest

from analysis import stats


@pytest.mark.parametrize("q, smallest", [(0.5, 20), (0.9, 100), (0.99, 1000)])
def test_percentile_printed_only_when_n_times_tail_reaches_10(q, smallest):
    assert not stats.printable(smallest - 1, q)
    assert stats.printable(smallest, q)   # 100·(1−0.9) is 9.999… in floats; the rule must still print it


def test_percentile_value_and_suppression():
    x = np.arange(1, 21, dtype=float)          # 20 samples: median printable, p90 not
    assert stats.percentile(x, 0.5) == 10.5
    assert math.isnan(stats.percentile(x, 0.9))
    assert stats.percentile(np.arange(100.0), 0.9) == pytest.approx(89.1)


def test_t_interval_golden():
    mean, lo, hi = stats.t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)   # t(0.975, 2) · s / √n
    assert mean == 2.0
    assert lo == pytest.approx(2 - half) and hi == pytest.approx(2 + half)


def test_t_interval_needs_two_repetitions():
    mean, lo, hi = stats.t_interval([5.0])
    assert mean == 5.0 and math.isnan(lo) and math.isnan(hi)


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


def test_t_interval_coverage_over_three_repetitions():
    rng = np.random.default_rng(11)
    trials = 3000
    hits = sum(lo <= 10 <= hi for _, lo, hi in (stats.t_interval(rng.normal(10, 3, size=3)) for _ in range(trials)))
    assert 0.93 <= hits / trials <= 0.97
