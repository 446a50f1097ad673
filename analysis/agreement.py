"""Whether two analysed runs of one profile agree, ratio by ratio: `python -m analysis.agreement RUN_A RUN_B`.

For each arm-vs-arm ratio both runs' speedups tables hold (arm, baseline, C): each run's point and
95% interval, whether each interval holds the other run's point, both verdicts, and the ratio of the
two runs' ratios with a Welch t-interval over their per-repetition log ratios (stats.unpaired_log_ratio:
the repetitions of two runs are independent). That last interval is the test of agreement: it holds 1
when the runs do not differ beyond their own noise. "Each interval holds the other's point" is
stricter than it looks: for two runs of equal noise that differ only by chance, it fails for a given
ratio and direction about one time in six (P(|Z| > 1.96 / sqrt 2) = 0.17).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import compare, stats
from ddbench.results import TABLES

COLUMNS = ["arm", "baseline", "concurrency", "a", "a_lo", "a_hi", "b", "b_lo", "b_hi", "a_holds_b", "b_holds_a",
           "verdict_a", "verdict_b", "same_verdict", "a_over_b", "a_over_b_lo", "a_over_b_hi", "differ"]


def _tables(run: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    t = Path(run) / TABLES
    missing = [n for n in ("speedups.csv", "cells.csv") if not (t / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{t}: no {', '.join(missing)} (run `just analyze {run}` first)")
    return pd.read_csv(t / "speedups.csv"), pd.read_csv(t / "cells.csv")


def pair_ratios(cells: pd.DataFrame, arm: str, baseline: str, c: int) -> np.ndarray:
    """arm / baseline throughput per repetition that both finished ok: the run's repetition pairs."""
    both = compare.ok_cells(cells, arm, c).merge(compare.ok_cells(cells, baseline, c), on="repetition",
                                                 suffixes=("_x", "_y"))
    return (both["throughput_x"] / both["throughput_y"]).to_numpy(dtype=float)


def agreement(run_a: Path, run_b: Path) -> pd.DataFrame:
    (sa, ca), (sb, cb) = _tables(run_a), _tables(run_b)
    key = ["arm", "baseline", "concurrency"]
    m = sa.merge(sb, on=key, suffixes=("_a", "_b"))
    rows = []
    for r in m.itertuples():
        w = stats.unpaired_log_ratio(pair_ratios(ca, r.arm, r.baseline, r.concurrency),
                                     pair_ratios(cb, r.arm, r.baseline, r.concurrency))
        rows.append({
            "arm": r.arm, "baseline": r.baseline, "concurrency": int(r.concurrency),
            "a": r.speedup_a, "a_lo": r.speedup_lo_a, "a_hi": r.speedup_hi_a,
            "b": r.speedup_b, "b_lo": r.speedup_lo_b, "b_hi": r.speedup_hi_b,
            "a_holds_b": bool(r.speedup_lo_a <= r.speedup_b <= r.speedup_hi_a),
            "b_holds_a": bool(r.speedup_lo_b <= r.speedup_a <= r.speedup_hi_b),
            "verdict_a": r.verdict_a, "verdict_b": r.verdict_b, "same_verdict": r.verdict_a == r.verdict_b,
            "a_over_b": w["ratio"], "a_over_b_lo": w["ratio_lo"], "a_over_b_hi": w["ratio_hi"],
            "differ": {"within noise": False, "no interval": None}.get(
                compare.verdict(w["ratio_lo"], w["ratio_hi"]), True),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(t: pd.DataFrame) -> str:
    held = int((t["a_holds_b"] & t["b_holds_a"]).sum())
    differ = int((t["differ"] == True).sum())  # noqa: E712 (True, False or None)
    return (f"{len(t)} ratios: both intervals hold the other run's point for {held}; the same verdict for "
            f"{int(t['same_verdict'].sum())}; the runs differ beyond their noise (run A / run B interval "
            f"excludes 1) for {differ}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.agreement", description=__doc__.splitlines()[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    a = ap.parse_args(argv)
    try:
        t = agreement(Path(a.run_a), Path(a.run_b))
    except FileNotFoundError as e:
        print(f"agreement: {e}", file=sys.stderr)
        return 2
    for r in t.itertuples():
        mark = "" if r.a_holds_b and r.b_holds_a else "  <- an interval misses the other's point"
        print(f"{r.arm:>14} / {r.baseline:<12} C={r.concurrency:<3} A {r.a:.3f} ({r.a_lo:.3f}-{r.a_hi:.3f}) "
              f"{r.verdict_a:<12} B {r.b:.3f} ({r.b_lo:.3f}-{r.b_hi:.3f}) {r.verdict_b:<12} "
              f"A/B {r.a_over_b:.3f} ({r.a_over_b_lo:.3f}-{r.a_over_b_hi:.3f}){mark}")
    print(summary(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
