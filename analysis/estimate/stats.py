"""Percentiles that know when they are meaningless; bootstrap intervals within cells; intervals, tests and
detectable effects across repetitions, on the log scale."""

from __future__ import annotations

from math import comb

import numpy as np
from scipy import stats as sps

from ddbench.core.formulas import MIN_TAIL, percentile, printable  # noqa: F401  (one home, shared with the live UI)

QUANTILES = (0.5, 0.9, 0.99)
LEVEL = 0.95


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


# ---- across repetitions: intervals that stay inside their quantity's domain -------------------

POWER = 0.8        # the power a minimum detectable effect is stated at (two-sided, at LEVEL)
MAX_N = 1000       # "n that would resolve it" is not searched past this


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def log_t_interval(values, level: float = LEVEL, floor: float = 0.0) -> tuple[float, float, float]:
    """Geometric mean and Student-t interval of repetition values on the log scale of (x - floor).

    A quantity > floor (throughput, latency, step time: floor 0; a speculative arm's τ: floor 1)
    keeps its interval inside (floor, ∞) however few and spread the repetitions are: a t-interval
    on the raw values of three repetitions can reach below zero."""
    v = _finite(values) - floor
    if len(v) == 0 or (v <= 0).any():
        return float("nan"), float("nan"), float("nan")
    lg = np.log(v)
    m = float(np.exp(lg.mean())) + floor
    if len(v) < 2:
        return m, float("nan"), float("nan")
    half = float(sps.t.ppf(0.5 + level / 2, len(v) - 1) * lg.std(ddof=1) / np.sqrt(len(v)))
    return m, float(np.exp(lg.mean() - half)) + floor, float(np.exp(lg.mean() + half)) + floor


def sign_test(diffs) -> float:
    """Two-sided exact sign test of median 0 over paired differences (ties dropped); nan when none."""
    d = _finite(diffs)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return float("nan")
    k = int(min((d > 0).sum(), (d < 0).sum()))
    # Binomial(n, 1/2) is symmetric: the two-sided p is twice the tail at the rarer sign
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def mde(sd: float, n: int, level: float = LEVEL, power: float = POWER) -> float:
    """Smallest true mean that a two-sided paired t-test at `level` detects with `power`, in the units of sd,
    with n pairs: (t_{1-α/2} + t_power) · sd / √n on n - 1 degrees of freedom."""
    if n < 2 or not np.isfinite(sd):
        return float("nan")
    df = n - 1
    return float((sps.t.ppf(0.5 + level / 2, df) + sps.t.ppf(power, df)) * sd / np.sqrt(n))


def n_to_resolve(effect: float, sd: float, level: float = LEVEL, power: float = POWER) -> int | None:
    """Fewest pairs whose minimum detectable effect is at most |effect|; None past MAX_N (or no effect)."""
    if not (np.isfinite(effect) and np.isfinite(sd)) or effect == 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, MAX_N + 1):
        if mde(sd, n, level, power) <= abs(effect):
            return n
    return None


def _no_ratio() -> dict:
    """A ratio's fields before any is known (no pair, or too few repetitions for an interval)."""
    nan = float("nan")
    return {"pairs": 0, "ratio": nan, "ratio_lo": nan, "ratio_hi": nan, "sign_p": nan, "wins": 0, "sd_x": nan,
            "sd_y": nan, "sd_pair": nan, "mde": nan, "n_to_resolve": None}


def paired_log_ratio(x, y, level: float = LEVEL) -> dict:
    """X/Y from repetition pairs (x_i, y_i adjacent in time): everything on the log scale.

    ratio = exp(mean log(x_i / y_i)) with a t-interval over the pairs (never below zero), the exact
    sign test over the pairs, the noise sd of each side (sd of log x_i, of log y_i: the relative
    spread of its repetitions), the sd of the pair differences, and the minimum detectable effect
    at this n (as a ratio's distance from 1)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[keep]), np.log(y[keep])
    d = lx - ly
    n = len(d)
    out = {**_no_ratio(), "pairs": n, "sign_p": sign_test(d), "wins": int((d > 0).sum())}
    if n == 0:
        return out
    out["ratio"] = float(np.exp(d.mean()))
    if n < 2:
        return out
    sd = float(d.std(ddof=1))
    half = float(sps.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n))
    out.update(ratio_lo=float(np.exp(d.mean() - half)), ratio_hi=float(np.exp(d.mean() + half)),
               sd_x=float(lx.std(ddof=1)), sd_y=float(ly.std(ddof=1)), sd_pair=sd,
               mde=float(np.exp(mde(sd, n, level)) - 1), n_to_resolve=n_to_resolve(float(d.mean()), sd, level))
    return out


def with_between_sd(ratio: float, lo: float, hi: float, between_sd: float, level: float = LEVEL) -> tuple[float, float]:
    """A ratio's interval over repetitions widened by a between-run sd (as a ratio's distance from 1): on the
    log scale, half-widths add in quadrature, the repetitions' t half-width and z × log(1 + sd). A run is one
    draw of the host's state, so the ratio it measures is off the host's by that sd beside its own noise."""
    if not all(np.isfinite(v) and v > 0 for v in (ratio, lo, hi)) or not np.isfinite(between_sd) or between_sd <= 0:
        return lo, hi
    half = float(np.hypot(np.log(hi / ratio), sps.norm.ppf(0.5 + level / 2) * np.log1p(between_sd)))
    return float(ratio * np.exp(-half)), float(ratio * np.exp(half))


def unpaired_log_ratio(x, y, level: float = LEVEL) -> dict:
    """X/Y from two independent sets of repetitions (different runs: no pair is adjacent in time):
    ratio of geometric means with a Welch t-interval on the log scale."""
    lx, ly = np.log(_finite(x)[_finite(x) > 0]), np.log(_finite(y)[_finite(y) > 0])
    out = _no_ratio()
    if len(lx) == 0 or len(ly) == 0:
        return out
    out["ratio"] = float(np.exp(lx.mean() - ly.mean()))
    if len(lx) < 2 or len(ly) < 2:
        return out
    vx, vy = lx.var(ddof=1) / len(lx), ly.var(ddof=1) / len(ly)
    se = np.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(lx) - 1) + vy ** 2 / (len(ly) - 1)) if se > 0 else len(lx) + len(ly) - 2
    half = float(sps.t.ppf(0.5 + level / 2, df) * se)
    d = lx.mean() - ly.mean()
    out.update(ratio_lo=float(np.exp(d - half)), ratio_hi=float(np.exp(d + half)),
               sd_x=float(lx.std(ddof=1)), sd_y=float(ly.std(ddof=1)))
    return out


def between_runs(samples, level: float = LEVEL) -> dict:
    """Whether k runs' log ratios differ beyond their own repetitions' noise, and by how much.

    Each run i gives the mean m_i of its n_i per-repetition log ratios and that mean's variance
    v_i = s_i² / n_i. Cochran's Q = Σ w_i (m_i - m_w)², w_i = 1 / v_i, is χ²(k - 1) when the runs
    share one true ratio: its p-value tests for a run effect. The DerSimonian-Laird τ² estimates
    that effect's variance (τ, as a ratio's distance from 1, is the between-run sd); I² is the share
    of the spread it explains. The pooled ratio weighs runs by 1 / (v_i + τ²), with a
    Hartung-Knapp interval on k - 1 degrees of freedom (its scale held at >= 1, so that it is
    never narrower than the runs' own noise says)."""
    runs = [np.log(x[x > 0]) for x in map(_finite, samples)]
    runs = [r for r in runs if len(r) >= 2]
    nan = float("nan")
    out = {"runs": len(runs), "q": nan, "q_p": nan, "i2": nan, "between_sd": nan, "pooled": nan,
           "pooled_lo": nan, "pooled_hi": nan}
    if len(runs) < 2:
        return out
    m = np.array([r.mean() for r in runs])
    v = np.array([r.var(ddof=1) / len(r) for r in runs])
    if (v <= 0).any():
        return out
    k, w = len(m), 1 / v
    q = float((w * (m - (w * m).sum() / w.sum()) ** 2).sum())
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - (w ** 2).sum() / w.sum()))
    ws = 1 / (v + tau2)
    mu = float((ws * m).sum() / ws.sum())
    scale = max(1.0, float((ws * (m - mu) ** 2).sum() / (k - 1)))
    half = float(sps.t.ppf(0.5 + level / 2, k - 1) * np.sqrt(scale / ws.sum()))
    out.update(q=q, q_p=float(sps.chi2.sf(q, k - 1)), i2=max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0,
               between_sd=float(np.exp(np.sqrt(tau2)) - 1), pooled=float(np.exp(mu)),
               pooled_lo=float(np.exp(mu - half)), pooled_hi=float(np.exp(mu + half)))
    return out
