"""Percentiles that know when they are meaningless, bootstrap and Student-t intervals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy import stats as sps

QUANTILES = (0.5, 0.9, 0.99)
LEVEL = 0.95
MIN_TAIL = 10      # a percentile q needs n·(1−q) ≥ 10 samples beyond it


def printable(n: int, q: float) -> bool:
    """n·(1−q) ≥ 10, in exact arithmetic: 100·(1−0.9) is 9.999… in floating point."""
    return n * (1 - Fraction(str(q))) >= MIN_TAIL


def percentile(x: np.ndarray, q: float) -> float:
    """The q-quantile, or NaN when n is too small to print it ('n too small')."""
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.quantile(x, q)) if printable(len(x), q) else float("nan")


def bootstrap_sums(x: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """Column sums of b bootstrap resamples of the rows of x (n × k) -> b × k.

    One resample per replicate serves every column, so ratios of sums (τ = Σ tokens / Σ steps,
    a mean = Σ x / Σ 1) come out paired. Each resample is drawn as row counts (how often each
    row was picked) and applied with one vector-matrix product."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    out = np.empty((b, x.shape[1]))
    for i in range(b):
        out[i] = np.bincount(rng.integers(0, n, size=n, dtype=np.int32), minlength=n) @ x
    return out


def interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates."""
    r = np.asarray(replicates, dtype=float)
    r = r[np.isfinite(r)]
    if len(r) == 0:
        return float("nan"), float("nan")
    a = (1 - level) / 2
    lo, hi = np.quantile(r, [a, 1 - a])
    return float(lo), float(hi)


def bootstrap_mean(x: np.ndarray, b: int = 1000, rng: np.random.Generator | None = None,
                   level: float = LEVEL) -> tuple[float, float]:
    """95% bootstrap interval of the mean of one sample (NaNs dropped)."""
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return float("nan"), float("nan")
    sums = bootstrap_sums(np.column_stack([x, np.ones(len(x))]), b, rng or np.random.default_rng(0))
    return interval(sums[:, 0] / sums[:, 1], level)


def t_interval(values, level: float = LEVEL) -> tuple[float, float, float]:
    """Mean and Student-t interval over repetition means; no interval from one repetition."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    m = float(v.mean())
    if len(v) < 2:
        return m, float("nan"), float("nan")
    half = float(sps.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return m, m - half, m + half
