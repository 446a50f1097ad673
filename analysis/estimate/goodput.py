"""Goodput under the profile's SLO: the requests that met every objective, per second of the cell's window.

A measured request meets the SLO when it finished ok and its TTFT, TPOT (after the first token) and
end-to-end latency are each within the profile's slo.ttft_ms, tpot_ms and e2e_ms (any subset). Per cell,
over the measured requests that throughput counts (finished inside the cell's window), plus its failed
ones, which miss: slo_share = met / all; goodput = met requests / window (req/s); goodput_tokens = their
output tokens / window (tok/s). This is vLLM's `--goodput` (requests meeting every SLO over the run's
duration), with the cell's measured window as the duration and the same TPOT.

Arm X over Y at one C: the goodput ratio per repetition pair, as throughput's (compare.ratio_stats). A cell
where no request met the SLO has goodput 0 and no log ratio: then the pair's ratio is not given, and the
table says why rather than drop the cell. Speculation trades a longer prefill and a verify per step for
fewer steps, so an arm that wins on throughput can lose here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.estimate import compare
from ddbench.core.profile import Slo

CELL_COLUMNS = ["arm", "concurrency", "repetition", "slo_requests", "slo_met", "slo_share", "goodput",
                "goodput_tokens"]
RATIO_COLUMNS = ["arm", "baseline", "concurrency", "goodput_ratio", "goodput_ratio_lo", "goodput_ratio_hi",
                 "goodput_verdict", "goodput_pairs"]


def met(req: pd.DataFrame, slo: Slo) -> np.ndarray:
    """Which requests met every objective (a failed request meets none)."""
    ok = req["ok"].to_numpy(dtype=bool).copy()
    for limit, col in ((slo.ttft_ms, "ttft_s"), (slo.tpot_ms, "tpot_s"), (slo.e2e_ms, "e2e_s")):
        if limit is not None:
            x = req[col].to_numpy(dtype=float)
            # TPOT of a one-token answer is undefined: it cannot miss a per-token objective
            ok &= (x <= limit / 1e3) | (np.isnan(x) & (col == "tpot_s"))
    return ok


def resolve(slo: Slo | None, req: pd.DataFrame, profile) -> tuple[Slo | None, str]:
    """The profile's SLO in milliseconds, and how it was set: as given, or (ttft_x_ar, tpot_x_ar) as multiples of
    AR's median TTFT and TPOT over its measured ok requests at the run's lowest C (the first deployable AR arm
    measured there). None when it is relative and AR has no such request: nothing to measure against."""
    if slo is None or not slo.relative:
        return slo, slo.text if slo else ""
    ar = [x.id for x in profile.arms if x.kind == "ar" and not x.ablation]
    r = req[req["arm"].isin(ar) & req["ok"].astype(bool) & ~req["warmup"].astype(bool)]
    if r.empty:
        return None, f"{slo.text}, but no AR request finished to set it by: no goodput"
    c = int(r["concurrency"].min())
    at = r[r["concurrency"] == c]
    arm = next(x for x in ar if (at["arm"] == x).any())
    at = at[at["arm"] == arm]
    ttft, tpot = (1e3 * float(np.nanmedian(at[col].to_numpy(dtype=float))) for col in ("ttft_s", "tpot_s"))
    out = slo.against(ttft, tpot)
    bounds = (("TTFT", out.ttft_ms, slo.ttft_x_ar, ttft), ("TPOT", out.tpot_ms, slo.tpot_x_ar, tpot),
              ("E2E", out.e2e_ms, None, None))
    return out, ", ".join(f"{name} <= {_ms(v)} ms" + (f" ({x:g}x {arm}'s median {_ms(m)} ms at C={c})" if x else "")
                          for name, v, x, m in bounds if v is not None)


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def per_cell(req: pd.DataFrame, cells: pd.DataFrame, slo: Slo | None) -> pd.DataFrame:
    """One row per ok cell; empty without an SLO."""
    if slo is None or cells.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    r = req[~req["warmup"].astype(bool)]
    counted = r[(r["in_window"].astype(bool) & r["ok"].astype(bool)) | ~r["ok"].astype(bool)]
    ok = met(counted, slo)
    hit = counted.assign(_met=ok, _tok=np.where(ok, np.nan_to_num(counted["n_tokens"].to_numpy(dtype=float)), 0.0))
    sums = hit.groupby(["arm", "concurrency", "repetition"], observed=True).agg(
        slo_requests=("_met", "size"), slo_met=("_met", "sum"), met_tokens=("_tok", "sum")).reset_index()
    sums["arm"] = sums["arm"].astype(str)
    done = cells[cells["status"] == "ok"][["arm", "concurrency", "repetition", "window_s"]]
    out = done.merge(sums, on=["arm", "concurrency", "repetition"], how="left").fillna(
        {"slo_requests": 0, "slo_met": 0, "met_tokens": 0.0})
    w = out["window_s"].astype(float)
    out["slo_share"] = out["slo_met"] / out["slo_requests"].where(out["slo_requests"] > 0)
    out["goodput"] = out["slo_met"] / w.where(w > 0)
    out["goodput_tokens"] = out["met_tokens"] / w.where(w > 0)
    return out[CELL_COLUMNS]


def ratios(good: pd.DataFrame, speedups: pd.DataFrame) -> pd.DataFrame:
    """Goodput of X over Y for every (arm, baseline, C) the speedups table compares, paired by repetition."""
    if good.empty or speedups.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    rows = []
    for s in speedups[["arm", "baseline", "concurrency"]].drop_duplicates().itertuples(index=False):
        x = good[(good["arm"] == s.arm) & (good["concurrency"] == s.concurrency)]
        y = good[(good["arm"] == s.baseline) & (good["concurrency"] == s.concurrency)]
        both = x.merge(y, on="repetition", suffixes=("_x", "_y"))
        row = {"arm": s.arm, "baseline": s.baseline, "concurrency": int(s.concurrency), "goodput_pairs": len(both)}
        if len(both) and ((both["goodput_x"] <= 0) | (both["goodput_y"] <= 0)).any():
            rows.append({**row, "goodput_ratio": np.nan, "goodput_ratio_lo": np.nan, "goodput_ratio_hi": np.nan,
                         "goodput_verdict": "a cell met no SLO: no ratio"})
            continue
        r = compare.ratio_stats(x, y, "goodput", paired=True)
        rows.append({**row, "goodput_ratio": r["ratio"], "goodput_ratio_lo": r["ratio_lo"],
                     "goodput_ratio_hi": r["ratio_hi"], "goodput_verdict": r["verdict"]})
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


def summary(good: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, C): the pooled share of requests that met the SLO and the goodput over all its ok cells."""
    if good.empty:
        return pd.DataFrame(columns=["arm", "concurrency", "slo_share", "goodput", "goodput_tokens"])
    g = good.groupby(["arm", "concurrency"], sort=True)
    return pd.DataFrame({"slo_share": g["slo_met"].sum() / g["slo_requests"].sum(),
                         "goodput": g["goodput"].mean(), "goodput_tokens": g["goodput_tokens"].mean()}).reset_index()
