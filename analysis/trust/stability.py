"""Whether the host held still: drift over the run from its repeated cells, and GPU state per cell.

Drift. Every (arm, C) repeats through the run, so each is its own control: the log of a cell's
throughput, less its (arm, C)'s mean, regressed on the cell's time, less its (arm, C)'s mean
time, gives one drift rate for the run (log units per second) with a t-interval. A linear drift
d adds d × Δt to the log of a ratio whose paired cells ran Δt apart on average: interleaved
cells (Δt ≈ 0, order alternated) cancel it; arm-major cells (Δt = an arm's whole span) do not.
The drift check fails when what drift could add to any compared ratio (its interval's far end
× that ratio's Δt) reaches the smallest effect the report claims.

GPU state. A cell whose median SM clock leaves the run's own band (the median over cells
± CLOCK_BAND), or whose mean power leaves its (arm, C)'s band (the median over repetitions
± POWER_BAND: power follows the work, so only like cells compare), is flagged, with the
comparisons that use it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.estimate.metrics import mid_unix
from analysis.estimate.stats import LEVEL
from ddbench.core.results import STABLE, WARMUP

CLOCK_BAND = 0.05
POWER_BAND = 0.15
# other work on the host during a cell, as a share of its cores: a quiet machine shows 0.00-0.05 core (its
# daemons); a test suite or a build beside the sweep shows 0.5-1 core, and on 2 cores moves arms' ratios by
# several percent. What contends is the share of the machine: 0.2 core on 2 cores, 1.6 on the H200's 16.
FOREIGN_SHARE = 0.1
HOST_COLUMNS = ["arm", "concurrency", "repetition", "foreign_cores", "limit", "samples", "busy", "comparisons"]


def foreign_limit(cores: int | None) -> float:
    """Cores of other work above which a cell is flagged; a host of unknown size is taken as 2 cores, the
    smallest ddbench runs on, so that the flag errs towards firing."""
    return round(FOREIGN_SHARE * (cores or 2), 3)
DRIFT_COLUMNS = ["cells", "groups", "span_s", "over_run", "over_run_lo", "over_run_hi", "df", "estimable"]
# a drift is stated over the run's own span, never extrapolated; below this span it is not stated at all
DRIFT_MIN_SPAN_S = 120
BAND_COLUMNS = ["arm", "concurrency", "repetition", "sm_clock_mhz", "clock_band_lo", "clock_band_hi", "power_w",
                "power_band_lo", "power_band_hi", "outside", "comparisons", "gpu_busy_pct"]


def drift(cells: pd.DataFrame, level: float = LEVEL) -> dict:
    """The run's drift rate of log throughput per second, with its interval (nan where not estimable)."""
    ok = cells[(cells["status"] == "ok") & cells["throughput"].gt(0)].dropna(subset=["started_unix", "ended_unix"])
    out = {"cells": len(ok), "groups": 0, "span_s": float("nan"), "slope": float("nan"), "slope_lo": float("nan"),
           "slope_hi": float("nan"), "df": 0}
    if ok.empty:
        return out
    t = mid_unix(ok)
    y = np.log(ok["throughput"].astype(float))
    g = ok["arm"].astype(str) + "@" + ok["concurrency"].astype(str)
    tc = t - t.groupby(g).transform("mean")
    yc = y - y.groupby(g).transform("mean")
    sxx = float((tc ** 2).sum())
    df = len(ok) - g.nunique() - 1
    out.update(groups=int(g.nunique()), span_s=float(t.max() - t.min()), df=int(max(df, 0)))
    if sxx <= 0 or df < 1:
        return out
    slope = float((tc * yc).sum() / sxx)
    se = float(np.sqrt(((yc - slope * tc) ** 2).sum() / df / sxx))
    half = float(sps.t.ppf(0.5 + level / 2, df) * se)
    out.update(slope=slope, slope_lo=slope - half, slope_hi=slope + half)
    return out


def estimable(d: dict) -> bool:
    """Whether the run's drift can be stated: an interval, over a span of at least DRIFT_MIN_SPAN_S."""
    return bool(np.isfinite(d["slope_lo"]) and d["span_s"] >= DRIFT_MIN_SPAN_S)


def over_run(d: dict, key: str = "slope") -> float:
    """What a drift rate amounts to over the run's own span, in % of throughput."""
    return float(100 * np.expm1(d[key] * d["span_s"]))


def drift_table(d: dict) -> pd.DataFrame:
    """The drift over the run's span, % of throughput with its interval; NaN where too short to estimate."""
    ok = estimable(d)
    return pd.DataFrame([{"cells": d["cells"], "groups": d["groups"], "span_s": d["span_s"],
                          **{col: over_run(d, key) if ok else float("nan")
                             for col, key in (("over_run", "slope"), ("over_run_lo", "slope_lo"),
                                              ("over_run_hi", "slope_hi"))},
                          "df": d["df"], "estimable": ok}], columns=DRIFT_COLUMNS)


def drift_bias(d: dict, dt_s: float) -> float:
    """The most a drift inside its interval adds to a log ratio whose cells ran dt_s apart on average."""
    if not (np.isfinite(d["slope_lo"]) and np.isfinite(dt_s)):
        return float("nan")
    return max(abs(d["slope_lo"]), abs(d["slope_hi"])) * abs(dt_s)


def with_drift(speedups: pd.DataFrame, d: dict) -> pd.DataFrame:
    """Each ratio's drift bias (as a ratio's distance from 1) beside its effect."""
    s = speedups.copy()
    if s.empty:
        return s
    s["drift_bias"] = [np.exp(drift_bias(d, dt)) - 1 if np.isfinite(drift_bias(d, dt)) else np.nan
                       for dt in s["dt_mean_s"]]
    return s


def _median(x: pd.Series) -> float:
    x = pd.to_numeric(x, errors="coerce").dropna()
    return float(x.median()) if len(x) else float("nan")


def gpu_band(telemetry: pd.DataFrame, cells: pd.DataFrame, speedups: pd.DataFrame) -> pd.DataFrame:
    """Per ok cell with GPU samples: its median SM clock and mean power against the run's bands, and how busy
    the GPU was over the cell's measured window (gpu_busy_pct)."""
    if telemetry.empty or "source" not in telemetry or not (telemetry["source"] == "gpu").any():
        return pd.DataFrame(columns=BAND_COLUMNS)
    g = telemetry[telemetry["source"] == "gpu"]
    ok = cells[cells["status"] == "ok"]
    per = []
    for r in ok.to_dict("records"):
        m = g[(g["arm"] == r["arm"]) & (g["concurrency"] == r["concurrency"]) & (g["repetition"] == r["repetition"])]
        if m.empty:
            continue
        power = pd.to_numeric(m.get("power_w"), errors="coerce").dropna() if "power_w" in m else pd.Series(dtype=float)
        per.append({"arm": r["arm"], "concurrency": int(r["concurrency"]), "repetition": int(r["repetition"]),
                    "sm_clock_mhz": _median(m["sm_clock_mhz"]) if "sm_clock_mhz" in m else float("nan"),
                    "power_w": float(power.mean()) if len(power) else float("nan"),
                    "gpu_busy_pct": _busy(m, r.get("window_start_ns"), r.get("window_end_ns"))})
    if not per:
        return pd.DataFrame(columns=BAND_COLUMNS)
    df = pd.DataFrame(per)
    clock = _median(df["sm_clock_mhz"])
    df["clock_band_lo"], df["clock_band_hi"] = clock * (1 - CLOCK_BAND), clock * (1 + CLOCK_BAND)
    power = df.groupby(["arm", "concurrency"])["power_w"].transform("median")
    df["power_band_lo"], df["power_band_hi"] = power * (1 - POWER_BAND), power * (1 + POWER_BAND)
    out_clock = (df["sm_clock_mhz"] < df["clock_band_lo"]) | (df["sm_clock_mhz"] > df["clock_band_hi"])
    out_power = (df["power_w"] < df["power_band_lo"]) | (df["power_w"] > df["power_band_hi"])
    df["outside"] = [", ".join(w for w, hit in (("SM clock", a), ("power", b)) if hit)
                     for a, b in zip(out_clock, out_power, strict=True)]
    df["comparisons"] = [_touched(speedups, r.arm, r.concurrency) if r.outside else ""
                         for r in df.itertuples()]
    return df[BAND_COLUMNS]


def _busy(samples: pd.DataFrame, start_ns, end_ns) -> float:
    """Mean utilization.gpu (the share of time a kernel ran) over the samples inside the measured window: a
    cell's setup and its warm-up requests would otherwise count idle or unlike time."""
    if "utilization_gpu_pct" not in samples or "t_ns" not in samples or pd.isna(start_ns) or pd.isna(end_ns):
        return float("nan")
    inside = samples[samples["t_ns"].between(start_ns, end_ns)]
    util = pd.to_numeric(inside["utilization_gpu_pct"], errors="coerce").dropna()
    return float(util.mean()) if len(util) else float("nan")


def _touched(speedups: pd.DataFrame, arm: str, c: int) -> str:
    if speedups.empty:
        return ""
    s = speedups[(speedups["concurrency"] == c) & ((speedups["arm"] == arm) | (speedups["baseline"] == arm))]
    return "; ".join(f"{r.arm}/{r.baseline}" for r in s.itertuples())


def host_unmeasured(runtime: str, host: pd.DataFrame | None) -> str | None:
    """Why a run has no foreign-CPU figures, or None when it has them."""
    if runtime == "docker":   # a container's processes are not the sweep's descendants: they would count
        return "servers in containers: their CPU is not told apart from other work"
    if host is None or host.empty:
        return "not recorded in this run"
    return None


def host_quiet(telemetry: pd.DataFrame, cells: pd.DataFrame, speedups: pd.DataFrame,
               runtime: str = "local", cores: int | None = None) -> pd.DataFrame:
    """Per ok cell whose host samples carry foreign_cores (containers/telemetry.py's ForeignCpu): the
    median CPU, in cores, that the host (of `cores` cores) spent outside the sweep's own processes during
    the cell, and the limit it is held to. Not for servers in containers (host_unmeasured)."""
    limit = foreign_limit(cores)
    if runtime == "docker" or telemetry.empty or "foreign_cores" not in telemetry:
        return pd.DataFrame(columns=HOST_COLUMNS)
    h = telemetry[(telemetry["source"] == "host")]
    h = h[pd.to_numeric(h["foreign_cores"], errors="coerce").notna()]
    per = []
    for r in cells[cells["status"] == "ok"].itertuples():
        m = h[(h["arm"] == r.arm) & (h["concurrency"] == r.concurrency) & (h["repetition"] == r.repetition)]
        if m.empty:
            continue
        load = _median(m["foreign_cores"])
        per.append({"arm": r.arm, "concurrency": int(r.concurrency), "repetition": int(r.repetition),
                    "foreign_cores": load, "limit": limit, "samples": len(m), "busy": bool(load > limit),
                    "comparisons": _touched(speedups, r.arm, int(r.concurrency)) if load > limit else ""})
    return pd.DataFrame(per, columns=HOST_COLUMNS)


WARMUP_COLUMNS = ["arm", "concurrency", "bring_up", "windows", "stable", "stable_after_s", "spent_s", "within_pct",
                  "throughputs"]


def warmups(run_dir) -> pd.DataFrame:
    """Each warm-up run until stable (<arm>/warmup/c<C>.<N>/stable.json): its windows, whether two in a row
    agreed, and after how long."""
    rows = []
    for path in sorted(Path(run_dir).glob(f"*/{WARMUP}/c*.*/{STABLE}")):
        c, n = path.parent.name[1:].split(".", 1)
        rec = json.loads(path.read_text())
        rates = rec.get("windows") or []
        rows.append({"arm": path.parents[2].name, "concurrency": int(c), "bring_up": int(n), "windows": len(rates),
                     "stable": rec.get("stable_after_s") is not None, "stable_after_s": rec.get("stable_after_s"),
                     "spent_s": rec.get("spent_s"), "within_pct": rec.get("within_pct"),
                     "throughputs": " ".join("--" if r is None else f"{r:.1f}" for r in rates)})
    return pd.DataFrame(rows, columns=WARMUP_COLUMNS)
