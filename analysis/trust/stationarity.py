"""Whether each ratio held still over the run: a step or a trend in its repetition pairs.

A ratio's interval comes from its repetition pairs (analysis.estimate.stats.paired_log_ratio), as if every pair drew
from one distribution. When one arm slows down or speeds up partway through a run (a server degrading, one
GPU throttling, a neighbour arriving), the pairs after the change differ from those before it: the interval
only widens, and the ratio reported depends on when it was measured. So, per compared pair of arms at a
concurrency (and sampling setting, which the measured arm ids carry), with the pairs put in run order (the
cells' start and end times; else the manifest's schedule.ran, then schedule.planned; else repetition
numbers):

    step    the second half of the pairs against the first (the middle pair of an odd count left out):
            shift = exp(mean d₂ − mean d₁) − 1 of the per-pair log ratios d, with Welch's t-test (step_p);
    trend   Spearman's rank correlation rho of d with the pairs' order (rho_p: exact over all orders up to
            EXACT_MAX pairs, the t approximation above).

p = min(1, 2 min(step_p, rho_p)) (either test may find it), Holm-adjusted over the run's ratios (p_holm), since
a run compares a dozen ratios or more and noise alone would otherwise fail one of them in most runs. The
check (analysis.trust.checks) fails a ratio whose shift is larger than its own minimum detectable effect and whose
p_holm is below 1 − LEVEL; it names the arm that moved: each arm's own throughput over the same repetitions,
second half against first (arm_shift, baseline_shift), set against the run's common shift over them (the median
of every arm's own shift at that C, common_shift), the larger of the two departures in size. Without that, a
drift that speeds every arm up would name whichever arm of the pair drifted most, not the one that fell behind.
A shift beyond noise that moves both arms alike leaves the ratio alone and is the drift check's business
(analysis.trust.stability).
Fewer than MIN_PAIRS pairs cannot be split and ranked: the row says so (note) and the check is n/a.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.estimate.metrics import mid_unix
from analysis.estimate.stats import LEVEL

MIN_PAIRS = 4
EXACT_MAX = 8      # 8! = 40320 orders: the exact rank-correlation p-value up to here
COLUMNS = ["arm", "baseline", "concurrency", "pairs", "order", "shift", "mde", "step_p", "rho", "rho_p", "p",
           "p_holm", "ratios", "arm_shift", "baseline_shift", "common_shift", "moved", "first_reps", "second_reps",
           "note"]


def positions(cells: pd.DataFrame, schedule: dict | None = None) -> tuple[pd.Series, str]:
    """Each cell's place in the run (a number that sorts in run order), and where it comes from."""
    times = [c for c in ("started_unix", "ended_unix") if c in cells]
    if len(cells) and len(times) == 2 and cells[times].notna().all().all():
        return mid_unix(cells), "cell start and end times"
    keys = list(zip(cells["arm"].astype(str), cells["concurrency"].astype(int), cells["repetition"].astype(int),
                    strict=True))
    schedule = schedule or {}
    ran = {(str(r.get("arm")), int(r.get("concurrency", -1)), int(r.get("repetition", -1))): r
           for r in schedule.get("ran") or [] if isinstance(r, dict)}
    if keys and all(k in ran and ran[k].get("started_unix") is not None for k in keys):
        return pd.Series([float(ran[k]["started_unix"]) for k in keys], index=cells.index), \
            "the manifest's schedule.ran start times"
    if keys and all(k in ran for k in keys):
        order = {k: i for i, k in enumerate(ran)}
        return pd.Series([float(order[k]) for k in keys], index=cells.index), "the manifest's schedule.ran order"
    planned = {tuple(c): i for i, c in enumerate(tuple(x) for x in schedule.get("planned") or [])}
    if keys and all(k in planned for k in keys):
        return pd.Series([float(planned[k]) for k in keys], index=cells.index), \
            "the manifest's schedule.planned order"
    return cells["repetition"].astype(float), "repetition numbers (no times or schedule recorded)"


@cache
def _orders(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


def spearman(d: np.ndarray) -> tuple[float, float]:
    """Spearman's rho of d with its order 0..n-1 and the two-sided p-value: exact (every order of the ranks
    equally likely) up to EXACT_MAX values, else the t approximation."""
    n = len(d)
    if n < 3 or np.ptp(d) == 0:
        return float("nan"), float("nan")
    ranks = sps.rankdata(d)
    order = np.arange(n, dtype=float)
    rho = float(np.corrcoef(order, ranks)[0, 1])
    if n > EXACT_MAX:
        return rho, float(sps.spearmanr(order, d)[1])
    perm = ranks[_orders(n)]
    pc, oc = perm - perm.mean(axis=1, keepdims=True), order - order.mean()
    all_rho = (pc @ oc) / (np.sqrt((pc ** 2).sum(axis=1)) * np.sqrt((oc ** 2).sum()))
    return rho, float(np.mean(np.abs(all_rho) >= abs(rho) - 1e-12))


def _step_p(first: np.ndarray, second: np.ndarray) -> float:
    """Welch's t-test of the halves; two halves without spread are a step when their means differ."""
    if np.ptp(first) == 0 and np.ptp(second) == 0:
        return 0.0 if first.mean() != second.mean() else 1.0
    return float(sps.ttest_ind(second, first, equal_var=False).pvalue)


def _halves(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = len(v) // 2
    return v[:h], v[len(v) - h:]


def _shift(v: np.ndarray) -> float:
    """Second half against first, of log values, as a ratio's distance from 1."""
    a, b = _halves(v)
    return float(np.exp(b.mean() - a.mean()) - 1)


def common_shift(cells: pd.DataFrame, first: list[int], second: list[int]) -> float:
    """The median over arms of each arm's own throughput shift from the first repetitions to the second (the
    geometric means of its ok cells in each): what the whole run did over the same stretch of time."""
    shifts = []
    for _, g in cells.groupby("arm", observed=True):
        a = np.log(g.loc[g["repetition"].isin(first), "throughput"].to_numpy(float))
        b = np.log(g.loc[g["repetition"].isin(second), "throughput"].to_numpy(float))
        if len(a) and len(b):
            shifts.append(np.exp(b.mean() - a.mean()) - 1)
    return float(np.median(shifts)) if shifts else 0.0


def holm(p: pd.Series) -> pd.Series:
    """Holm's step-down adjustment over the finite p-values (the others stay nan)."""
    out = pd.Series(np.nan, index=p.index, dtype=float)
    finite = p[np.isfinite(p.astype(float))].astype(float).sort_values(kind="stable")
    m, running = len(finite), 0.0
    for i, (idx, v) in enumerate(finite.items()):
        running = max(running, min(1.0, (m - i) * v))
        out[idx] = running
    return out


def stationarity(cells: pd.DataFrame, speedups: pd.DataFrame, schedule: dict | None = None) -> pd.DataFrame:
    """Per ratio compared within the run (speedups, paired), its pairs' step and trend over the run."""
    if speedups is None or speedups.empty:
        return pd.DataFrame(columns=COLUMNS)
    ok = cells[(cells["status"] == "ok") & cells["throughput"].gt(0)].copy()
    ok["_pos"], source = positions(ok, schedule)
    rows = []
    for s in speedups.itertuples():
        if "paired" in speedups and not bool(s.paired):
            continue
        c = int(s.concurrency)
        x = ok[(ok["arm"] == s.arm) & (ok["concurrency"] == c)]
        y = ok[(ok["arm"] == s.baseline) & (ok["concurrency"] == c)]
        both = x[["repetition", "throughput", "_pos"]].merge(y[["repetition", "throughput", "_pos"]],
                                                            on="repetition", suffixes=("_x", "_y"))
        both["_at"] = (both["_pos_x"] + both["_pos_y"]) / 2
        both = both.sort_values(["_at", "repetition"], kind="stable")
        lx, ly = np.log(both["throughput_x"].to_numpy(float)), np.log(both["throughput_y"].to_numpy(float))
        d, n = lx - ly, len(both)
        row = {"arm": s.arm, "baseline": s.baseline, "concurrency": c, "pairs": n, "order": source,
               "mde": float(s.mde) if np.isfinite(s.mde) else np.nan}
        if n < MIN_PAIRS:
            rows.append({**row, "note": f"{n} repetition pair(s) finished ok; {MIN_PAIRS} are needed to set a "
                                        f"first half against a second and rank them in run order"})
            continue
        first, second = _halves(d)
        rho, rho_p = spearman(d)
        step_p = _step_p(first, second)
        tests = [p for p in (step_p, rho_p) if np.isfinite(p)]
        reps = both["repetition"].astype(int).tolist()
        ax, bx = _shift(lx), _shift(ly)
        common = common_shift(ok[ok["concurrency"] == c], reps[:n // 2], reps[n - n // 2:])
        off_x, off_y = (abs(np.log1p(v) - np.log1p(common)) for v in (ax, bx))   # departures from the run's
        row.update(shift=_shift(d), step_p=step_p, rho=rho, rho_p=rho_p,
                   p=min(1.0, 2 * min(tests)) if tests else np.nan, arm_shift=ax, baseline_shift=bx,
                   common_shift=common, moved=s.arm if off_x >= off_y else s.baseline,
                   first_reps=" ".join(map(str, reps[:n // 2])), second_reps=" ".join(map(str, reps[n - n // 2:])),
                   note="")
        rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["p_holm"] = holm(out["p"])
    out["ratios"] = int(out["p"].notna().sum())
    return out


def shifted(row) -> bool:
    """The check's rule: a shift larger than the ratio's MDE, and beyond noise over the run's ratios."""
    return bool(np.isfinite(row["shift"]) and np.isfinite(row["mde"]) and np.isfinite(row["p_holm"])
                and abs(np.log1p(row["shift"])) > np.log1p(row["mde"]) and row["p_holm"] < 1 - LEVEL)
