"""Every formula of docs/metrics.md, once: per request, per cell, across repetitions.

Per-cell τ is token-weighted (Σ tokens / Σ verify steps) over the requests that finished inside
the measured window, the same set that aggregate throughput counts, so that
throughput = τ / step time holds exactly; the mean of per-request τ is kept beside it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.estimate import rounds, stats
from analysis.read.ingest import CELL
from ddbench.core import formulas as f

LATENCIES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E", "gap": "chunk gap"}


def per_request(req: pd.DataFrame, chunks: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    """TTFT, E2E, TPOT, tokens per chunk, output rate, verify steps and τ of every request."""
    r = req.copy()
    ok = r["ok"].to_numpy(dtype=bool)
    n = np.where(ok, r["completion_tokens"].to_numpy(dtype=float), np.nan)
    ttft = np.where(ok, f.ttft_s(r["send_ns"].to_numpy(), r["first_content_ns"].to_numpy()), np.nan)
    e2e = np.where(ok, f.e2e_s(r["send_ns"].to_numpy(), r["end_ns"].to_numpy()), np.nan)
    tpot = f.tpot_s(e2e, ttft, n)
    chunks_n = r["content_chunks"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chunk = np.where(chunks_n > 0, n / chunks_n, np.nan)
    rate = f.output_rate(n, e2e)
    ar = r["arm"].astype(str).map(kinds).eq("ar").to_numpy()
    # AR verifies one token per step: τ = 1 by definition
    steps = np.where(ar, n, r["spec_verify_ct"].to_numpy(dtype=float))
    steps = np.where(ok, steps, np.nan)
    tau = f.tau(n, steps)
    r["n_tokens"], r["ttft_s"], r["e2e_s"], r["tpot_s"] = n, ttft, e2e, tpot
    r["tokens_per_chunk"], r["output_rate"], r["verify_steps"], r["tau"] = per_chunk, rate, steps, tau
    r["steady_frac"], r["unit_s"] = rounds.steady(r, chunks)
    gaps = chunk_gaps(chunks)
    g = gaps.groupby("req")["gap_s"].mean()
    mean_gap = np.full(len(r), np.nan)
    mean_gap[g.index.to_numpy()] = g.to_numpy()
    r["gap_mean_s"] = np.where(ok, mean_gap, np.nan)
    return r


def mid_unix(cells: pd.DataFrame, suffix: str = "") -> pd.Series:
    """Each cell's wall-clock middle: when it ran, for pairing and for the drift fit."""
    return (cells[f"started_unix{suffix}"].astype(float) + cells[f"ended_unix{suffix}"].astype(float)) / 2


def chunk_gaps(chunks: pd.DataFrame) -> pd.DataFrame:
    """Time between successive content chunks of one request (ddbench.core.formulas.gaps_s, over all requests)."""
    req = chunks["req"].to_numpy()
    same = req[1:] == req[:-1]
    return pd.DataFrame({"req": req[1:][same], "gap_s": f.gaps_s(chunks["t_ns"].to_numpy())[same]})


def measured_window(cell, measured: pd.DataFrame) -> tuple[float, float, str]:
    """The cell's measured window; without one in status.json, first measured send to last end."""
    if pd.notna(cell.get("window_start_ns")) and pd.notna(cell.get("window_end_ns")):
        return float(cell["window_start_ns"]), float(cell["window_end_ns"]), "status"
    start, stop = f.span(measured["send_ns"], measured["end_ns"])
    return start, stop, "derived" if np.isfinite(stop) else "none"


def mark_window(req: pd.DataFrame, cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flag the requests that aggregate throughput counts: measured, ok, finished inside the window;
    and record per cell where its window came from."""
    req = req.copy()
    inside = np.zeros(len(req), dtype=bool)
    groups = req.groupby(CELL, observed=True, sort=False).indices
    starts, ends, sources = [], [], []
    for cell in cells.to_dict("records"):
        idx = groups.get((cell["arm"], cell["concurrency"], cell["repetition"]), np.zeros(0, int))
        r = req.iloc[idx]
        good = r[r["ok"].to_numpy(dtype=bool) & ~r["warmup"].to_numpy(dtype=bool)]
        ws, we, source = measured_window(cell, good)
        inside[idx] = r["ok"].to_numpy(dtype=bool) & ~r["warmup"].to_numpy(dtype=bool) & f.inside(r["end_ns"], ws, we)
        starts.append(ws)
        ends.append(we)
        sources.append(source)
    req["in_window"] = inside
    cells = cells.copy()
    cells["window_start_ns"], cells["window_end_ns"], cells["window_source"] = starts, ends, sources
    return req, cells


class Boot:
    """One cell's bootstrap: column sums over its measured requests, at the point and in b resamples.
    Every interval of the cell, and every ratio that involves it, is read from these sums."""

    def __init__(self, names: list[str], x: np.ndarray, b: int, rng):
        self.col = {n: i for i, n in enumerate(names)}
        self.point = x.sum(axis=0) if len(x) else np.zeros(len(names))
        self.reps = stats.bootstrap_sums(x, b, rng) if len(x) > 1 else np.full((b, len(names)), np.nan)

    def sums(self, name: str) -> tuple[float, np.ndarray]:
        i = self.col.get(name)
        if i is None:
            return 0.0, np.zeros(len(self.reps))
        return float(self.point[i]), self.reps[:, i]


def per_cell(req: pd.DataFrame, gaps: pd.DataFrame, cells: pd.DataFrame, kinds: dict[str, str],
             b: int = 1000, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """One row per cell: n, errors, throughput, τ, step time, latency percentiles, bootstrap CIs;
    and each cell's Boot, by (arm, C, rep), for the comparisons.
    req must carry per_request()'s columns and mark_window()'s in_window; cells mark_window()'s window."""
    rng = np.random.default_rng(seed)
    groups = req.groupby(CELL, observed=True, sort=False).indices
    cell_of_req = np.full(len(req), -1)
    keys = list(groups)
    for i, k in enumerate(keys):
        cell_of_req[groups[k]] = i
    # chunk gaps of measured, completed requests only
    good = req["ok"].to_numpy(dtype=bool) & ~req["warmup"].to_numpy(dtype=bool)
    gaps = gaps[good[gaps["req"].to_numpy()]] if len(gaps) else gaps
    gap_cell = cell_of_req[gaps["req"].to_numpy()] if len(gaps) else np.zeros(0, int)
    order = np.argsort(gap_cell, kind="stable")
    gap_vals = gaps["gap_s"].to_numpy()[order]
    bounds = np.searchsorted(gap_cell[order], np.arange(len(keys) + 1))
    categories = sorted(req["category"].astype(str).unique())
    rows: list[dict] = []
    boots: dict = {}
    for cell in cells.to_dict("records"):
        key = (cell["arm"], cell["concurrency"], cell["repetition"])
        idx = groups.get(key, np.zeros(0, int))
        i = keys.index(key) if key in groups else -1
        g = gap_vals[bounds[i]:bounds[i + 1]] if i >= 0 else np.zeros(0)
        row, boots[key] = _cell(cell, req.iloc[idx], g, kinds.get(cell["arm"], "?"), categories, b, rng)
        rows.append(row)
    return pd.DataFrame(rows), boots


def _columns(good: pd.DataFrame, categories: list[str]) -> tuple[list[str], np.ndarray]:
    """The per-request columns whose sums make every cell statistic."""
    def f(c):
        return good[c].to_numpy(dtype=float)
    # rounds: only what arrived inside each unit's steady window counts (analysis/estimate/rounds.py)
    inw = good["in_window"].to_numpy(dtype=float) * good["steady_frac"].to_numpy(dtype=float)
    n, e2e, steps = f("n_tokens"), f("e2e_s"), f("verify_steps")
    has_steps = inw * (np.nan_to_num(steps) > 0)
    cols = {"tokens": np.nan_to_num(n) * inw, "busy_s": np.nan_to_num(e2e) * inw,
            "steps": np.nan_to_num(steps) * has_steps, "step_tokens": np.nan_to_num(n) * has_steps}
    for lat in ("ttft", "tpot", "e2e"):
        x = f(f"{lat}_s")
        cols[f"{lat}_sum"], cols[f"{lat}_n"] = np.nan_to_num(x), (~np.isnan(x)).astype(float)
    rate = f("output_rate")
    cat = good["category"].astype(str).to_numpy()
    for c in categories:
        m = (cat == c) & ~np.isnan(rate)
        cols[f"rate_sum:{c}"], cols[f"rate_n:{c}"] = np.where(m, rate, 0.0), m.astype(float)
    names = list(cols)
    return names, (np.column_stack([cols[k] for k in names]) if len(good) else np.zeros((0, len(names))))


def _cell(cell: dict, r: pd.DataFrame, gaps: np.ndarray, kind: str, categories, b: int, rng) -> tuple[dict, Boot]:
    measured = r[~r["warmup"].to_numpy(dtype=bool)]
    good = measured[measured["ok"].to_numpy(dtype=bool)]
    ws, we, source = cell["window_start_ns"], cell["window_end_ns"], cell["window_source"]
    w = f.window_s(ws, we)
    if pd.notna(cell.get("busy_ns")):   # rounds: the steady windows of the arm's own units, not the shared stretch
        w, source = float(good.drop_duplicates("round")["unit_s"].sum()), "steady"
    boot = Boot(*_columns(good, categories), b, rng)
    n_err = int((~measured["ok"]).sum())
    tokens, _ = boot.sums("tokens")
    steps, _ = boot.sums("steps")
    out = {**{k: cell[k] for k in CELL}, "kind": kind, "status": cell["status"], "reason": cell.get("reason"),
           "n": len(good), "errors": n_err, "error_rate": n_err / len(measured) if len(measured) else float("nan"),
           "warmup_n": int(r["warmup"].sum()), "window_s": w, "window_source": source,
           "n_window": int(good["in_window"].sum()), "tokens": tokens, "steps": steps,
           "client_cpu_max": cell.get("client_cpu_max")}
    out["throughput"] = f.throughput(tokens, w)
    out["offered_rate"] = cell.get("offered_rate", float("nan"))
    # open loop: the rate requests arrived at in this cell (a Poisson cell of a few dozen arrivals is ~15% off
    # its nominal rate) and the rate they completed at; a server that keeps up completes them as they arrive
    sends = measured["intended_send_ns"].fillna(measured["send_ns"]) if "intended_send_ns" in measured else None
    out["arrival_rate"] = f.span_rate(sends) if sends is not None else float("nan")
    out["achieved_rate"] = f.span_rate(good["end_ns"])
    out["throughput_lo"], out["throughput_hi"] = stats.interval(throughput_replicates(out["throughput"], [boot]))
    out["tau"], tau_reps = ratio(boot, "step_tokens", "steps")
    out["tau_lo"], out["tau_hi"] = stats.interval(tau_reps)
    out["tau_mean"] = float(np.nanmean(good["tau"])) if good["tau"].notna().any() else float("nan")
    # closed loop: C requests share each verify forward, so one step of the batch costs W·C / Σ steps
    out["step_time_s"] = w * cell["concurrency"] / steps if steps > 0 else float("nan")
    out["output_tokens_mean"] = float(good["n_tokens"].mean()) if len(good) else float("nan")
    out["tokens_per_chunk"] = float(good["tokens_per_chunk"].mean()) if len(good) else float("nan")
    out["output_rate_mean"] = float(good["output_rate"].mean()) if len(good) else float("nan")
    samples = {"ttft": good["ttft_s"].to_numpy(dtype=float), "tpot": good["tpot_s"].to_numpy(dtype=float),
               "e2e": good["e2e_s"].to_numpy(dtype=float), "gap": gaps}
    for name, x in samples.items():
        x = x[~np.isnan(x)]
        out[f"{name}_n"] = len(x)
        out[f"{name}_mean"] = float(x.mean()) if len(x) else float("nan")
        if name != "gap":    # chunk gaps of one request are not independent draws: no interval over them
            _, reps = ratio(boot, f"{name}_sum", f"{name}_n")
            out[f"{name}_mean_lo"], out[f"{name}_mean_hi"] = stats.interval(reps)
        for q in stats.QUANTILES:
            out[f"{name}_p{round(q * 100)}"] = stats.percentile(x, q)
    return out, boot


def ratio(boot: Boot | list[Boot], num: str, den: str) -> tuple[float, np.ndarray]:
    """Σnum / Σden at the point and per replicate, pooled over the given cells (repetitions)."""
    boots = boot if isinstance(boot, list) else [boot]
    pn = pdn = 0.0
    rn: float | np.ndarray = 0.0
    rd: float | np.ndarray = 0.0
    for bt in boots:
        a, ra = bt.sums(num)
        c, rc = bt.sums(den)
        pn, pdn, rn, rd = pn + a, pdn + c, rn + ra, rd + rc
    with np.errstate(divide="ignore", invalid="ignore"):
        return (pn / pdn if pdn > 0 else float("nan")), np.asarray(rn / rd, dtype=float)


def throughput_replicates(point: float, boots: list[Boot]) -> np.ndarray:
    """Bootstrap replicates of aggregate throughput, pooled over repetitions.

    Throughput = Σ N / W = (Σ N / Σ E2E) × (Σ E2E / W). Resampling requests moves the first factor,
    the rate at which the server emits tokens for a busy request; the second, how many requests
    were in flight on average, is set by the load plan and held fixed. (Resampling N alone would
    give a zero-width interval whenever output length is fixed by ignore_eos.)"""
    rate, reps = ratio(boots, "tokens", "busy_s")
    return point * reps / rate


def across_repetitions(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, C), over the repetitions that finished ok: the geometric mean of the repetition values
    with a Student-t interval on the log scale (so that no interval leaves its quantity's domain:
    throughput, latencies and step time > 0, a speculative arm's τ >= 1), and the pooled throughput
    and τ beside them."""
    rows = []
    ok = cells[cells["status"] == "ok"]
    for (arm, c), g in ok.groupby(["arm", "concurrency"], sort=True):
        kind = g["kind"].iloc[0]
        row = {"arm": arm, "kind": kind, "concurrency": c, "offered_rate": g["offered_rate"].iloc[0],
               "reps": len(g), "n": int(g["n"].sum()), "errors": int(g["errors"].sum())}
        for m in ("throughput", "tau", "tpot_mean", "ttft_mean", "step_time_s"):
            if m == "tau" and kind == "ar":   # one token per step by definition: no interval to draw
                row[m], row[f"{m}_t_lo"], row[f"{m}_t_hi"] = 1.0, 1.0, 1.0
                continue
            row[m], row[f"{m}_t_lo"], row[f"{m}_t_hi"] = stats.log_t_interval(g[m], floor=1.0 if m == "tau" else 0.0)
        w = g["window_s"].sum()
        row["arrival_rate"], row["achieved_rate"] = g["arrival_rate"].mean(), g["achieved_rate"].mean()
        row["pooled_throughput"] = g["tokens"].sum() / w if w > 0 else float("nan")
        row["pooled_tau"] = g["tokens"].sum() / g["steps"].sum() if g["steps"].sum() > 0 else float("nan")
        row["pooled_step_time_s"] = (w * c / g["steps"].sum()) if g["steps"].sum() > 0 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
