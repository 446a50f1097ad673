"""Ratios from the rounds schedule: arm X over arm Y, paired round by round, with a block bootstrap.

In a rounds run (ddbench/core/schedule.py 'rounds', loadtests/rounds.py) every arm serves one unit per round:
C users at once, each sending one request or, in a block (load.unit_s), requests back to back for the
block's seconds, the same prompts for every arm of the round. A unit's throughput is counted in its
steady window: from its first send until the first user's last request ends, while all C users have a
request in flight, over the tokens that arrived inside it (`steady`). At C=1 with one request that is
the whole request. At C>1 a speculative unit's requests end at different times, and the tail in which
fewer than C remain is a batch running below C: counting it would measure a synchronous batch, not
load at C (on the twin, linear / AR at C=8 read 0.81 over whole units against 1.76 over steady
windows). The ratio of X over Y at C is the ratio of the two arms' pooled throughputs, Σ tokens /
Σ window, over the rounds both arms completed.

Its interval comes from the sequence of rounds in time order (repetition, then round). A server drifts
through states of seconds, so consecutive rounds are correlated and an iid bootstrap over rounds would
claim too much. The circular block bootstrap resamples runs of `block` consecutive rounds
with wrap-around, the block chosen from the rounds themselves (block_length: Politis and White's rule with an
AR(1) plug-in, from the rounds' lag-1 autocorrelation read one standard error high), and its sd is corrected for
the covariance that blocks of that length miss. The interval is log-ratio ± t·se on ⌊n / block⌋ - 1 degrees of
freedom, and the minimum detectable effect at 80% power is (t_.975 + t_.8)·se on the same degrees of freedom.
Independent rounds keep their degrees of freedom: blocks of 2 or 3 rounds leave 65-99 of 200 rounds' and 3-5 of
12's, where blocks of ⌈√n⌉ left 12 and 2. On synthetic AR(1) rounds this covers 93-96% at lag-1 autocorrelation
0-0.7, over 12, 30 or 200 rounds (tests/unit/analysis/test_rounds.py).

Round j sends the same prompts in every repetition (loadtests/plan.py), so the prompt set is fixed and
its mix is no source of error: a tree gains more on some prompts than on others, and a bootstrap that
resamples whole rounds would count that spread as noise. A round's prompts are those its users open
with (a block goes on through a sequence fixed by them). When every round's prompts recur (method
'stratified'), the bootstrap resamples each round's share of the log ratio (its linearised influence:
tokens and time of both arms over their totals) less the mean share of the rounds with the same prompts,
scaled by √(m/(m-1)) for m such rounds; the point stays the pooled ratio. Otherwise (method 'pooled')
it resamples the rounds themselves. On the twin at C=1 the prompts made up about 60% of the per-round
variance of tree / DFLASH.

These intervals never mix with the repetition-pair intervals of analysis/estimate/compare.py: each is its own
estimate of the same ratio, and the report prints them side by side.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.estimate import stats
from ddbench.core import formulas as f

BOOTSTRAP = 2000
COLUMNS = ["arm", "baseline", "concurrency", "rounds", "block", "df", "speedup", "speedup_lo", "speedup_hi",
           "verdict", "mde", "lag1", "method"]


UNIT = ["arm", "concurrency", "repetition", "round"]
# the per-request columns units() reads: a caller that slims the requests frame keeps these
READS = UNIT + ["user", "prompt_id", "ok", "warmup", "send_ns", "end_ns", "n_tokens", "steady_frac", "unit_s"]


def _measured(req: pd.DataFrame) -> pd.Series:
    """The measured, finished requests of a rounds run's units."""
    return req["round"].notna() & req["ok"].astype(bool) & ~req["warmup"].astype(bool)


def steady(req: pd.DataFrame, chunks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per request of a rounds run (req: per_request()'s rows, chunks: ingest's): the share of its tokens that
    arrived inside its unit's steady window, and that window's length in seconds (first send of the unit's
    measured, finished requests to the earliest among its users' last ends). A chunk's tokens are the server's
    count where every chunk of the request has one, else its share of the text's characters (at T=0 every arm
    writes the same text, so the same share of it stands for the same tokens in each arm). 1 and NaN outside
    rounds."""
    n = len(req)
    frac, window = np.ones(n), np.full(n, np.nan)
    if "round" not in req or req["round"].isna().all():
        return frac, window
    live = _measured(req).to_numpy()
    rows = np.flatnonzero(live)
    sub = _with_users(req.iloc[rows])
    last = sub.groupby(UNIT + ["user"], observed=True)["end_ns"].transform("max")
    start = sub.groupby(UNIT, observed=True)["send_ns"].transform("min").to_numpy(float)
    end = last.groupby([sub[c] for c in UNIT], observed=True).transform("min").to_numpy(float)
    window[rows] = f.window_s(start, end)
    close = np.full(n, np.nan)
    close[rows] = end
    if len(chunks):
        r = chunks["req"].to_numpy()
        tok = chunks["tokens"].to_numpy(dtype=float)
        counted = np.bincount(r, weights=~np.isnan(tok), minlength=n) == np.bincount(r, minlength=n)
        weight = np.where(counted[r], np.nan_to_num(tok), chunks["chars"].to_numpy(dtype=float))
        inside = chunks["t_ns"].to_numpy(dtype=float) <= close[r]
        total = np.bincount(r, weights=weight, minlength=n)
        got = np.bincount(r, weights=weight * inside, minlength=n)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(live & (total > 0), got / total, 1.0)
    return frac, window


def _with_users(r: pd.DataFrame) -> pd.DataFrame:
    """r with a user for every request: records without one count as a user each (one request per user)."""
    user = r["user"] if "user" in r else pd.Series(np.nan, index=r.index)
    own = pd.Series(-1 - np.arange(len(r)), index=r.index, dtype=float)
    return r.assign(user=user.astype(float).fillna(own))


def units(req: pd.DataFrame) -> pd.DataFrame:
    """One row per (arm, C, repetition, round) of the measured, finished requests of a rounds run: the tokens
    inside its steady window and the window's length in seconds (req: with steady()'s `steady_frac` and
    `unit_s`), and its prompts (the sorted ids its users opened with, '|'-joined; '' where the records carry
    none). Empty for a run of whole cells."""
    if "round" not in req or req["round"].isna().all():
        return pd.DataFrame(columns=["arm", "concurrency", "repetition", "round", "tokens", "unit_s", "requests",
                                     "prompts"])
    r = req[_measured(req)]
    if "prompt_id" not in r:
        r = r.assign(prompt_id="")
    r = _with_users(r)
    opening = r["send_ns"] == r.groupby(UNIT + ["user"], observed=True)["send_ns"].transform("min")
    r = r.assign(steady_tokens=r["n_tokens"] * r["steady_frac"], opening=r["prompt_id"].where(opening))
    g = r.groupby(UNIT, observed=True)
    out = g.agg(tokens=("steady_tokens", "sum"), unit_s=("unit_s", "first"), requests=("n_tokens", "size"),
                prompts=("opening", lambda p: "|".join(sorted(map(str, p.dropna()))))).reset_index()
    out["arm"] = out["arm"].astype(str)
    return out


def circular_block_sums(x: np.ndarray, block: int, b: int, rng: np.random.Generator) -> np.ndarray:
    """Column sums of b circular-block-bootstrap resamples of the rows of x (n × k, rows in time order)."""
    n = len(x)
    wrapped = np.vstack([x, x[:block - 1]]) if block > 1 else x
    cum = np.vstack([np.zeros(x.shape[1]), np.cumsum(wrapped, axis=0)])
    blocks = cum[np.arange(n) + block] - cum[np.arange(n)]       # the n blocks, one starting at each row
    starts = rng.integers(0, n, size=(b, -(-n // block)))
    return blocks[starts].sum(axis=1) * (n / (starts.shape[1] * block))


def paired(ux: pd.DataFrame, uy: pd.DataFrame, b: int = BOOTSTRAP, seed: int = 0) -> dict:
    """X over Y from the rounds both completed (matched on repetition and round, in time order)."""
    both = ux.merge(uy, on=["repetition", "round"], suffixes=("_x", "_y")).sort_values(["repetition", "round"])
    both = both[(both["unit_s_x"] > 0) & (both["unit_s_y"] > 0)]
    n = len(both)
    out: dict = dict.fromkeys(COLUMNS[3:], float("nan")) | {"rounds": n}
    if n < 4:
        out["verdict"] = "no interval"
        return out
    x = both[["tokens_x", "unit_s_x", "tokens_y", "unit_s_y"]].to_numpy(dtype=float)
    point = np.log((x[:, 0].sum() / x[:, 1].sum()) / (x[:, 2].sum() / x[:, 3].sum()))
    e = prompt_residuals(x, both["prompts_x"].to_numpy()) if "prompts_x" in both else None
    block, rho = block_length(_shares(x) if e is None else e)
    if e is None:
        sums = circular_block_sums(x, block, b, np.random.default_rng(seed))
        se = float(np.std(np.log((sums[:, 0] / sums[:, 1]) / (sums[:, 2] / sums[:, 3])), ddof=1))
    else:
        se = float(np.std(circular_block_sums(e[:, None], block, b, np.random.default_rng(seed))[:, 0], ddof=1))
    # blocks of b miss the covariance across their edges: for AR(1) the bootstrap variance is the long-run one
    # times 1 - (2ρ / (1 - ρ²)) / b
    if block > 1:
        se /= np.sqrt(max(1 - 2 * rho / (1 - rho ** 2) / block, 0.25))
    df = max(n // block - 1, 1)
    t = sps.t.ppf(0.5 + stats.LEVEL / 2, df)
    d = np.log(x[:, 0] / x[:, 1]) - np.log(x[:, 2] / x[:, 3]) if e is None else e
    lag1 = float(np.corrcoef(d[:-1], d[1:])[0, 1]) if n > 2 and np.std(d) > 0 else float("nan")
    lo, hi = np.exp(point - t * se), np.exp(point + t * se)
    out.update(block=block, df=df, speedup=float(np.exp(point)), speedup_lo=float(lo), speedup_hi=float(hi),
               verdict="faster" if lo > 1 else "slower" if hi < 1 else "within noise",
               mde=float(np.expm1((t + sps.t.ppf(stats.POWER, df)) * se)), lag1=lag1,
               method="pooled" if e is None else "stratified")
    return out


def _shares(x: np.ndarray) -> np.ndarray:
    """Each round's share of the pooled log ratio (its linearised influence)."""
    return x[:, 0] / x[:, 0].sum() - x[:, 1] / x[:, 1].sum() - x[:, 2] / x[:, 2].sum() + x[:, 3] / x[:, 3].sum()


def block_length(d: np.ndarray) -> tuple[int, float]:
    """The circular block bootstrap's block for the per-round series d, in time order, and the lag-1
    autocorrelation ρ it assumes: Politis and White's rule with an AR(1) plug-in, b = (6ρ² / (1 − ρ²)²)^⅓ n^⅓.
    ρ is the series' own lag-1 autocorrelation, corrected for its small-sample bias (+ (1 + 3ρ) / n) and taken
    one standard error (1 / √n) high, in [0, 0.9]: an estimate from a few rounds is noisy, and a ρ read low
    would shrink the blocks and the interval with them."""
    n = len(d)
    c = d - d.mean()
    ss = float(np.dot(c, c))
    rho = float(np.dot(c[:-1], c[1:])) / ss if ss > 0 else 0.0
    rho = min(max(rho + (1 + 3 * rho) / n + 1 / np.sqrt(n), 0.0), 0.9)
    b = (6 * rho ** 2 / (1 - rho ** 2) ** 2) ** (1 / 3) * n ** (1 / 3)
    return int(min(max(np.ceil(b), 1), max(n // 2, 1))), rho


def prompt_residuals(x: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
    """Each round's share of the pooled log ratio (x: tokens and seconds of X, then of Y, one row per round)
    less the mean share of the rounds with its prompts, scaled by √(m/(m-1)); None unless every round's
    prompts recur and some prompts are known."""
    _, idx, m = np.unique(keys, return_inverse=True, return_counts=True)
    if (keys == "").any() or (m < 2).any():
        return None
    z = _shares(x)
    means = np.bincount(idx, weights=z) / m
    return (z - means[idx]) * np.sqrt(m / (m - 1))[idx]


def ratios(req: pd.DataFrame, speedups: pd.DataFrame, b: int = BOOTSTRAP, seed: int = 0) -> pd.DataFrame:
    """The rounds estimate of every (arm, baseline, C) the speedups table compares; empty for a run of cells."""
    u = units(req)
    if u.empty or speedups.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for r in speedups[["arm", "baseline", "concurrency"]].drop_duplicates().itertuples(index=False):
        ux = u[(u["arm"] == r.arm) & (u["concurrency"] == r.concurrency)]
        uy = u[(u["arm"] == r.baseline) & (u["concurrency"] == r.concurrency)]
        if len(ux) and len(uy):
            rows.append({"arm": r.arm, "baseline": r.baseline, "concurrency": int(r.concurrency),
                         **paired(ux, uy, b, seed)})
    return pd.DataFrame(rows, columns=COLUMNS)
