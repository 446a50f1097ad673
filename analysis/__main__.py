"""python -m analysis RUN_DIR: tidy tables, comparisons and trust checks into RUN_DIR/tables/ (the report renders them).

With --compare-with OTHER (a run directory, or a profile's results directory: its newest finished
run), or a compare_with in the run's profile, also the cross-check of the two runs (crosscheck*.csv)."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from analysis import saved
from analysis.analyze import BOOTSTRAP, analyze, set_aside_stale
from analysis.estimate import targets
from analysis.estimate.compare import MismatchError
from analysis.read.ingest import IngestError
from analysis.read.manifest import ManifestError
from analysis.trust import checks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--bootstrap", type=int, default=BOOTSTRAP, help="bootstrap resamples (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-requests", type=int, default=checks.MIN_REQUESTS,
                    help="trust check: measured requests an (arm, C) needs over its repetitions (default %(default)s)")
    ap.add_argument("--compare-with", metavar="OTHER",
                    help="cross-check against this run (overrides the profile's compare_with)")
    a = ap.parse_args(argv)
    try:
        res = analyze(a.run_dir, a.bootstrap, a.seed, a.min_requests, a.compare_with)
    except (IngestError, ManifestError, MismatchError, ValueError, FileNotFoundError) as e:
        print(f"analysis: {e}", file=sys.stderr)
        if stale := set_aside_stale(a.run_dir):
            print(f"analysis: {stale}", file=sys.stderr)
        return 2
    paths = saved.write(res)
    _print_results(res)
    print(f"tables: {paths[0].parent}")
    return 0


def _print_results(res) -> None:
    cells = res.cells
    failed = cells[cells["status"] != "ok"]
    bad = res.checks[res.checks["status"] == checks.FAIL]
    print(f"{res.run.path}: {len(res.requests)} requests in {len(cells)} cells analysed in {res.seconds:.1f} s")
    for row in res.summary.itertuples():
        server = f"  server tau {row.server_tau:5.2f}" if pd.notna(row.server_tau) else ""
        print(f"  {row.arm:>16} C={row.concurrency:<4} {row.pooled_throughput:10.1f} tok/s  tau {row.pooled_tau:5.2f}"
              f"{server}  ({row.reps} rep{'s' if row.reps != 1 else ''}, n={row.n})")
    for row in res.speedups.itertuples():
        band = f"{row.speedup_lo:.3f}-{row.speedup_hi:.3f}" if row.speedup_lo == row.speedup_lo else "no interval"
        mde = f", MDE {100 * row.mde:.1f}%" if row.mde == row.mde else ""
        runs = (f"; repetitions alone {row.within_lo:.3f}-{row.within_hi:.3f}, between-run sd "
                f"{100 * row.between_sd:.1f}% over {row.between_n} runs" if row.between_sd > 0 else "")
        what = " on TPOT" if getattr(row, "metric", "throughput") == "tpot" else ""   # open loop: baseline over arm
        print(f"  {row.arm:>16} / {row.baseline:<16} C={row.concurrency:<4} {row.speedup:6.3f}x{what} ({band}, "
              f"{row.pairs} pairs{mde}{runs}): {row.verdict}")
    print(targets.headline(res.targets))
    for row in res.targets.itertuples():
        print(f"  {targets.text(row)}")
    for row in failed.itertuples():
        print(f"  FAILED cell {row.arm} C={row.concurrency} rep {row.repetition}: {row.reason}")
    print(f"trust checks: {len(bad)} failed of {len(res.checks)}")
    for row in bad.itertuples():
        print(f"  FAIL {row.check} [{row.scope}]: {row.evidence}")
    for g, rows in res.recommendation.groupby("group", sort=False):
        pick = rows.loc[rows["pick"].astype(bool), "arm"]
        print(f"  recommend at {g}: " + (f"deploy {pick.iloc[0]}" if len(pick) else "nothing (no arm passes its own "
                                                                                   "checks unbeaten)"))
        for r in rows[~rows["eligible"].astype(bool)].itertuples():
            print(f"    {r.arm}: {r.why_not}")
    if res.crosscheck is not None:
        _print_crosscheck(res.crosscheck)


def _print_crosscheck(x) -> None:
    this, other = x.label("this"), x.label("other")
    print(f"cross-check: A = {this} (this run), B = {other} ({x.sides.iloc[1]['path']})")
    for r in x.arms.itertuples():
        tau = (f"tau {r.tau_this:5.2f} vs {r.tau_other:5.2f} ({r.tau_gap_pct:+.1f}%, from {r.tau_basis})"
               if pd.notna(r.tau_this) and pd.notna(r.tau_other) else "tau --")
        agree = f"outputs identical {r.identical:.0f}/{r.pairs:.0f}" if pd.notna(r.agreement_rate) else "outputs --"
        print(f"  {r.arm:>16} C=1 {tau}  {agree}")
    for r in x.throughput.itertuples():
        print(f"  {r.arm:>16} C={r.concurrency:<4} {r.throughput_this:10.1f} vs {r.throughput_other:10.1f} tok/s"
              f"  ratio {r.ratio:.3f}")
    for n in x.notes:
        print(f"  note: {n}")


if __name__ == "__main__":
    sys.exit(main())
