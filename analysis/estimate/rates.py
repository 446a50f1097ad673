"""An open-loop rate sweep read across its rates: where each arm saturates, and up to which offered rate each
speculative arm still beats AR.

Each arm ran at each offered rate as its own measured arm (`<arm>@q<rate>`, ddbench/core/profile.py). Below its
capacity a server completes requests as fast as they arrive, so output throughput is the same for every arm and
says nothing; the arms differ in how long each request takes. So:
- an arm is *saturated* at a rate where it completed requests at under 95% of the rate they arrived at
  (docs/metrics.md); past it the queue grows and every latency is the queue's;
- a speculative arm *beats* AR at a rate where its mean TPOT is lower than AR's, the ratio's 95% interval from
  the repetition pairs above 1 (analysis/estimate/compare.py), and it is not saturated there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SATURATED = 0.95   # achieved / arrival rate below this: the server no longer keeps up

COLUMNS = ["arm", "base", "kind", "offered_rate", "arrival_rate", "achieved_rate", "served", "saturated", "throughput",
           "ttft_mean", "ttft_mean_t_lo", "ttft_mean_t_hi", "tpot_mean", "tpot_mean_t_lo", "tpot_mean_t_hi"]
WINS = ["arm", "baseline", "highest_rate", "tpot_ratio", "tpot_ratio_lo", "tpot_ratio_hi", "saturates_at",
        "baseline_saturates_at", "rates"]


def table(summary: pd.DataFrame, servers: dict[str, str]) -> pd.DataFrame:
    """One row per (measured arm, C) of an open-loop run: its base arm (servers: measured arm -> base), offered,
    arrival and achieved rates, the share served and whether it saturated, and its latencies. Empty for closed
    loop."""
    if summary.empty or "offered_rate" not in summary or summary["offered_rate"].isna().all():
        return pd.DataFrame(columns=COLUMNS)
    s = summary[summary["offered_rate"].notna()].copy()
    s["base"] = s["arm"].map(servers).fillna(s["arm"])
    s["served"] = s["achieved_rate"] / s["arrival_rate"]
    s["saturated"] = s["served"] < SATURATED
    return s[COLUMNS].sort_values(["base", "offered_rate"], ignore_index=True)


def first_saturated(rows: pd.DataFrame) -> float:
    """The lowest offered rate at which these rows (one arm's) saturated; NaN where none did."""
    sat = rows.loc[rows["saturated"].astype(bool), "offered_rate"]
    return float(sat.min()) if len(sat) else float("nan")


def wins(rates: pd.DataFrame, speedups: pd.DataFrame) -> pd.DataFrame:
    """Per speculative base arm against AR: the highest offered rate at which it beat AR (TPOT ratio AR / arm
    resolved above 1, the arm not saturated), with that ratio, and the lowest rate at which each saturated."""
    if rates.empty or speedups.empty:
        return pd.DataFrame(columns=WINS)
    base = dict(zip(rates["arm"], rates["base"], strict=True))
    rate = dict(zip(rates["arm"], rates["offered_rate"], strict=True))
    sat = dict(zip(rates["arm"], rates["saturated"].astype(bool), strict=True))
    s = speedups[(speedups.get("baseline_kind") == "ar") & speedups["arm"].isin(base)].copy()
    if s.empty:
        return pd.DataFrame(columns=WINS)
    s["base"], s["bbase"] = s["arm"].map(base), s["baseline"].map(base)
    s["rate"] = s["arm"].map(rate)
    rows = []
    for (arm, ref), g in s.groupby(["base", "bbase"], sort=False):
        won = g[(g["tpot_ratio_lo"] > 1) & ~g["arm"].map(sat)]
        top = won.loc[won["rate"].idxmax()] if len(won) else pd.Series(np.nan, index=won.columns)
        rows.append({"arm": arm, "baseline": ref, "highest_rate": float(top["rate"]),
                     **{k: top[k] for k in ("tpot_ratio", "tpot_ratio_lo", "tpot_ratio_hi")},
                     "saturates_at": first_saturated(rates[rates["base"] == arm]),
                     "baseline_saturates_at": first_saturated(rates[rates["base"] == ref]),
                     "rates": len(g)})
    return pd.DataFrame(rows, columns=WINS)
