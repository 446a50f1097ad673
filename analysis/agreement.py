"""Whether analysed runs of one profile agree, ratio by ratio: `python -m analysis.agreement RUN_A RUN_B [RUN ...]`.

For each arm-vs-arm ratio both runs' speedups tables hold (arm, baseline, C): each run's point and
95% interval (the headline one, which takes in the between-run sd of the plan's other runs where there are
some: compare.with_between_runs), whether each interval holds the other run's point (and whether the
repetitions' intervals alone would), both verdicts, and the ratio of the
two runs' ratios with a Welch t-interval over their per-repetition log ratios (stats.unpaired_log_ratio:
the repetitions of two runs are independent). That last interval is the test of agreement: it holds 1
when the runs do not differ beyond their own noise. "Each interval holds the other's point" is
stricter than it looks: for two runs of equal noise that differ only by chance, it fails for a given
ratio and direction about one time in six (P(|Z| > 1.96 / sqrt 2) = 0.17).

Over two or more runs, each ratio also gets a test for a run effect (stats.between_runs: Cochran's Q
over the runs' means of their repetition log ratios, each weighed by its own noise), the between-run
sd that effect adds, and a pooled ratio. A ratio whose runs differ beyond their repetitions' noise
(Q's p below 0.05 over the number of ratios tested) carries something that no single run's
repetitions can see: a state of the host that lasts a whole run. The repetitions' interval is then too
narrow for what another run of the same plan will measure, by that sd; the headline interval adds it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.estimate import compare, stats
from ddbench.core.results import MANIFEST, TABLES, read_json

COLUMNS = ["arm", "baseline", "concurrency", "a", "a_lo", "a_hi", "b", "b_lo", "b_hi", "a_holds_b", "b_holds_a",
           "held_within", "verdict_a", "verdict_b", "same_verdict", "a_over_b", "a_over_b_lo", "a_over_b_hi",
           "differ"]


def _tables(run: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    t = Path(run) / TABLES
    missing = [n for n in ("speedups.csv", "cells.csv") if not (t / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{t}: no {', '.join(missing)} (run `just analyze {run}` first)")
    s = pd.read_csv(t / "speedups.csv")
    if "within_lo" not in s:    # analysed before intervals took in other runs: the repetitions' is the headline
        s["within_lo"], s["within_hi"] = s["speedup_lo"], s["speedup_hi"]
    return s, pd.read_csv(t / "cells.csv")


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
            "held_within": bool(r.within_lo_a <= r.speedup_b <= r.within_hi_a
                                and r.within_lo_b <= r.speedup_a <= r.within_hi_b),
            "verdict_a": r.verdict_a, "verdict_b": r.verdict_b, "same_verdict": r.verdict_a == r.verdict_b,
            "a_over_b": w["ratio"], "a_over_b_lo": w["ratio_lo"], "a_over_b_hi": w["ratio_hi"],
            "differ": {"within noise": False, "no interval": None}.get(
                compare.verdict(w["ratio_lo"], w["ratio_hi"]), True),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


ACROSS_COLUMNS = ["arm", "baseline", "concurrency", "ratios", "runs", "q", "q_p", "i2", "between_sd", "pooled",
                  "pooled_lo", "pooled_hi", "run_effect"]
FAMILY_LEVEL = 0.05


def across(runs: list[Path]) -> pd.DataFrame:
    """Per ratio that every run's speedups table holds: each run's point, the run-effect test, the between-run
    sd and the pooled ratio; a run effect is flagged at FAMILY_LEVEL over the ratios tested (Bonferroni)."""
    return across_tables([_tables(r) for r in runs])


def across_tables(tables: list[tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """across() on (speedups, cells) tables already read, one pair per run."""
    key = ["arm", "baseline", "concurrency"]
    common = tables[0][0][key]
    for s, _ in tables[1:]:
        common = common.merge(s[key], on=key)
    rows = []
    for r in common.itertuples():
        samples = [pair_ratios(c, r.arm, r.baseline, r.concurrency) for _, c in tables]
        points = [stats.log_t_interval(x)[0] for x in samples]   # each run's geometric mean
        rows.append({"arm": r.arm, "baseline": r.baseline, "concurrency": int(r.concurrency),
                     "ratios": " ".join(f"{x:.3f}" for x in points), **stats.between_runs(samples)})
    t = pd.DataFrame(rows, columns=ACROSS_COLUMNS[:-1])
    t["run_effect"] = t["q_p"] < FAMILY_LEVEL / max(len(t), 1)
    return t[ACROSS_COLUMNS]


def _same_plan(a: dict, b: dict) -> bool:
    """Two manifests of one profile (digest) and one request plan (prompt order) on one kind of host (CPU model
    and id, cores, GPUs) with one model pair (checkpoint contents, twin recipe); a run recorded before a field
    was (None) is a sibling only of runs that lack it too."""
    ha, hb = a.get("host") or {}, b.get("host") or {}
    order = [(m.get("schedule") or {}).get("prompt_order") for m in (a, b)]
    return (a.get("profile_digest") == b.get("profile_digest") is not None and order[0] == order[1]
            and all(ha.get(k) == hb.get(k) for k in ("cpu", "cpu_id", "cores", "gpus"))
            and _pair(a) == _pair(b))


TWIN_KEYS = ("shape", "seed", "dtype", "version", "files", "pair")


def _pair(m: dict):
    """The model pair a run measured: each role's contents digest, and the twin recipe (ddbench.core.manifest.
    twin_record) it was built as. Profile paths can name other contents (a rebuilt twin, a retrained pair),
    and a twin shares its predictions with the tiny pair but none of its costs."""
    models = m.get("models")
    if models is None:
        return None
    twins = models.get("twin") or []
    twins = twins if isinstance(twins, list) else [twins]
    recipes = sorted(json.dumps({k: t.get(k) for k in TWIN_KEYS}, sort_keys=True) for t in twins)
    return {r: (v or {}).get("sha256") for r, v in models.items() if r != "twin"}, recipes


def siblings(run: Path) -> list[Path]:
    """The other analysed runs beside this one (results/<profile>/) of the same plan on the same kind of host."""
    run = Path(run)
    try:
        me = read_json(run / MANIFEST)
    except (OSError, ValueError):
        return []
    out = []
    for other in sorted(p for p in run.parent.iterdir() if p.is_dir() and p.resolve() != run.resolve()):
        try:
            m = read_json(other / MANIFEST)
        except (OSError, ValueError):
            continue
        if _same_plan(me, m) and all((other / TABLES / n).is_file() for n in ("speedups.csv", "cells.csv")):
            out.append(other)
    return out


def between_runs(run: Path, speedups: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """This run (its tables in hand) against its siblings: across() with the runs it used named in `with_runs`;
    empty when the run has no sibling, so that one run alone claims nothing about runs it has not seen."""
    others = siblings(run)
    if not others or speedups.empty:
        return pd.DataFrame(columns=[*ACROSS_COLUMNS, "with_runs"])
    t = across_tables([(speedups, cells), *(_tables(o) for o in others)])
    t["with_runs"] = " ".join(o.name for o in others)
    return t


def across_summary(t: pd.DataFrame) -> str:
    hit = t[t["run_effect"]]
    names = "; ".join(f"{r.arm} / {r.baseline} at C={r.concurrency} (between-run sd {100 * r.between_sd:.1f}%)"
                      for r in hit.itertuples())
    return (f"{len(t)} ratios over {int(t['runs'].max()) if len(t) else 0} runs: a run effect beyond the "
            f"repetitions' noise (Q's p < {FAMILY_LEVEL:g}/{len(t)}) for {len(hit)}" + (f": {names}" if names else ""))


def summary(t: pd.DataFrame) -> str:
    held = int((t["a_holds_b"] & t["b_holds_a"]).sum())
    differ = int((t["differ"] == True).sum())  # noqa: E712 (True, False or None)
    within = int(t["held_within"].sum())
    return (f"{len(t)} ratios: both intervals hold the other run's point for {held} ({within} with the repetitions' "
            f"intervals alone); the same verdict for "
            f"{int(t['same_verdict'].sum())}; the runs differ beyond their noise (run A / run B interval "
            f"excludes 1) for {differ}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.agreement", description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN")
    a = ap.parse_args(argv)
    if len(a.runs) < 2:
        ap.error("give two runs or more")
    runs = [Path(r) for r in a.runs]
    try:
        t = agreement(*runs[:2]) if len(runs) == 2 else None
        x = across(runs)
    except FileNotFoundError as e:
        print(f"agreement: {e}", file=sys.stderr)
        return 2
    if t is not None:
        for r in t.itertuples():
            mark = "" if r.a_holds_b and r.b_holds_a else "  <- an interval misses the other's point"
            print(f"{r.arm:>14} / {r.baseline:<12} C={r.concurrency:<3} A {r.a:.3f} ({r.a_lo:.3f}-{r.a_hi:.3f}) "
                  f"{r.verdict_a:<12} B {r.b:.3f} ({r.b_lo:.3f}-{r.b_hi:.3f}) {r.verdict_b:<12} "
                  f"A/B {r.a_over_b:.3f} ({r.a_over_b_lo:.3f}-{r.a_over_b_hi:.3f}){mark}")
        print(summary(t))
        print()
    for r in x.itertuples():
        mark = "  <- run effect" if r.run_effect else ""
        print(f"{r.arm:>14} / {r.baseline:<12} C={r.concurrency:<3} runs {r.ratios}  Q p={r.q_p:.3g} "
              f"between-run sd {100 * r.between_sd:.1f}%  pooled {r.pooled:.3f} ({r.pooled_lo:.3f}-{r.pooled_hi:.3f})"
              f"{mark}")
    print(across_summary(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
