"""The whole analysis of one run: ingest, formulas, comparisons, checks (analysis.saved writes it to tables/)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import agreement, recommend, triage
from analysis.diagnose import acceptance, gpu_time, host_profile, stagecost
from analysis.estimate import compare, goodput, metrics, rates, rounds, standings, targets
from analysis.outcome import Analysis
from analysis.read import ingest
from analysis.trust import checks, correctness, crosscheck, stability, stationarity
from ddbench.core.results import RunDir

BOOTSTRAP = 1000
SLIM = ["arm", "concurrency", "repetition", "warmup", "ok", "in_window", "category", "max_tokens", "temperature",
        "send_ns", "intended_send_ns", "end_ns", "n_tokens", "ttft_s", "e2e_s", "tpot_s", "tokens_per_chunk",
        "output_rate", "verify_steps", "tau", "completion_tokens", "spec_verify_ct", "round", "user", "prompt_id",
        "steady_frac", "unit_s"]


def analyze(path: str | Path, bootstrap: int = BOOTSTRAP, seed: int = 0,
            min_requests: int = checks.MIN_REQUESTS, compare_with: str | Path | None = None,
            cross: bool = True) -> Analysis:
    """compare_with (a path, as given on a command line) overrides the profile's compare_with;
    cross=False analyses the run alone (the other side of a cross-check is analysed so)."""
    t0 = time.perf_counter()
    run = ingest.load(path)
    # a bad compare_with fails before the long part, naming the field it came from
    other_path = crosscheck.locate(run.path, run.profile.compare_with, compare_with) if cross else None
    kinds = {a.id: a.kind for a in run.profile.arms}
    unknown = sorted(set(run.requests["arm"].astype(str)) - set(kinds))
    if unknown:
        raise ingest.IngestError(f"{run.path}: request records of arms {unknown} that the manifest's profile "
                                 f"does not define (arms: {sorted(kinds)})")
    req = metrics.per_request(run.requests, run.chunks, kinds)
    req, cells_in = metrics.mark_window(req, run.cells)
    # an open-loop cell's offered rate, from its measured arm (closed loop: none)
    cells_in = cells_in.assign(offered_rate=cells_in["arm"].map(
        {a.id: run.profile.load_for(a.id).rate for a in run.profile.arms}).astype(float))
    gaps = metrics.chunk_gaps(run.chunks)
    # filtering a frame copies every column: the numeric view keeps the many per-cell slices cheap
    slim = req[SLIM]
    cells, boots = metrics.per_cell(slim, gaps, cells_in, kinds, bootstrap, seed)
    for col in ("started_unix", "ended_unix", "window_start_ns", "window_end_ns"):
        cells[col] = cells_in[col].to_numpy()
    cells = steps_from_server(run, cells)
    summary = with_server_tau(run, metrics.across_repetitions(cells), cells)
    speedups, refusals = compare.speedups(run, cells, boots)
    between = agreement.between_runs(run.path, speedups, cells)
    speedups = compare.with_between_runs(speedups, between)
    drift = stability.drift(cells)
    speedups = stability.with_drift(speedups, drift)
    band = stability.gpu_band(run.telemetry, cells, speedups)
    steady = stationarity.stationarity(cells, speedups, (run.manifest.model_extra or {}).get("schedule"))
    host = stability.host_quiet(run.telemetry, cells, speedups, run.profile.backend.runtime, run.manifest.host.cores)
    decomposition, more = compare.decomposition(run, cells, boots)
    by_rounds = rounds.ratios(slim, speedups, seed=seed)
    slo, slo_text = goodput.resolve(run.profile.slo, slim, run.profile)
    good = goodput.per_cell(slim, cells, slo)
    categories = compare.per_category(run, slim, cells)
    lossless, note = correctness.lossless(run.profile, req)
    tri = triage.triage(run, req)
    warm = stability.warmups(run.path)
    trust = checks.run_checks(run, req, cells, lossless, min_requests, speedups, drift, band, triage=tri, host=host,
                              stationary=steady, warmups=warm)
    res = Analysis(run, req, cells, summary, speedups, decomposition, categories, lossless, note, trust,
                   drift=stability.drift_table(drift), gpu_band=band, host_cpu=host,
                   stage_cost=stagecost.read(run.path), boots=boots, refusals=refusals + more, triage=tri,
                   between_runs=between, stationarity=steady, rounds=by_rounds,
                   gpu_time=gpu_time.table(run.path, summary), host_profile=host_profile.table(run.path),
                   by_position=acceptance.by_position(req), goodput=good,
                   goodput_ratios=goodput.ratios(good, speedups), warmups=warm, slo_text=slo_text)
    res.rates = rates.table(summary, {a.id: a.server for a in run.profile.arms})
    res.rate_wins = rates.wins(res.rates, speedups)
    res.pairs = standings.pairs(res)
    res.targets = targets.table(res, slim, seed)
    res.recommendation = recommend.recommendation(res)
    res.bootstrap = len(next(iter(boots.values())).reps) if boots else 0
    if other_path is not None:
        other = analyze(other_path, bootstrap, seed, min_requests, cross=False)
        res.crosscheck = crosscheck.cross_check(res, other)
    res.seconds = time.perf_counter() - t0
    return res


def steps_from_server(run: ingest.Run, cells: pd.DataFrame) -> pd.DataFrame:
    """Cells whose requests carry no verify steps (SGLang 0.5.15 returns no per-request spec details)
    take τ from their server's own count over the cell (checks.server_tau: /metrics counters differenced
    over it, warmup included), and verify steps as window tokens / τ, so that step time and the
    decomposition hold for them too; tau_source says which cells did."""
    cells = cells.copy()
    cells["tau_source"] = np.where(cells["kind"] == "ar", "definition", "requests")
    for i, r in cells.iterrows():
        if r["kind"] == "ar" or r["status"] != "ok" or r["steps"] > 0:
            continue
        tau, source = checks.server_tau(run, r["arm"], int(r["concurrency"]), [int(r["repetition"])])
        if not np.isfinite(tau) or tau <= 0:
            cells.at[i, "tau_source"] = "none"
            continue
        steps = r["tokens"] / tau
        cells.loc[i, ["tau", "steps", "step_time_s", "tau_source"]] = [
            tau, steps, r["window_s"] * r["concurrency"] / steps, f"server: {source}"]
    return cells


def with_server_tau(run: ingest.Run, summary: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Each (arm, C) row gets the τ its server reported itself over the cells that finished ok
    (checks.server_tau): the only τ of a run whose records carry no per-request spec details."""
    ok = cells[cells["status"] == "ok"]
    found = [checks.server_tau(run, r.arm, r.concurrency,
                               ok.loc[(ok["arm"] == r.arm) & (ok["concurrency"] == r.concurrency), "repetition"]
                               .astype(int).tolist())
             for r in summary.itertuples()]
    summary = summary.copy()
    summary["server_tau"] = [t for t, _ in found]
    summary["server_tau_source"] = [s for _, s in found]
    return summary


def set_aside_stale(run_dir: str | Path) -> str:
    """After analysis of a run failed: its tables and report.pdf moved to stale/ (they describe data as it was),
    and a line that says so ('' when there were none)."""
    try:
        moved = RunDir.open(run_dir).set_aside()
    except FileNotFoundError:
        return ""
    return (f"{', '.join(p.name for p in moved)} no longer match the run's data: moved to {moved[0].parent}"
            if moved else "")
