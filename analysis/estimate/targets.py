"""The profile's targets (Profile.goals): for each comparison it must resolve, at each level, the minimum detectable
effect the run reached against the one it asked for, met or open.

The MDE is the rounds estimate's where the run has rounds (analysis/estimate/rounds.py: the interval the schedule
is built for), else the repetition pairs' (analysis/estimate/compare.py); `estimate` says which. A target is met
when the MDE reached is at or below it: precision, never significance, decides, so that stopping on it cannot
bias the interval. 'best-linear' is, at each level, the deployable linear arm with the most throughput there.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.estimate import rounds, standings
from ddbench.core.profile import BEST_LINEAR, Profile, Target

COLUMNS = ["target", "arm", "baseline", "concurrency", "target_mde", "mde", "met", "estimate", "speedup",
           "speedup_lo", "speedup_hi", "verdict", "note"]
ROUNDS, PAIRS = "rounds", "repetition pairs"


def table(a, req: pd.DataFrame | None = None, seed: int = 0) -> pd.DataFrame:
    """One row per target, measured arm and level (Analysis.targets); req: the run's requests, for the rounds
    estimate of a pair the speedups table does not compare (None: the saved rounds table only)."""
    p = a.run.profile
    rows = []
    for t in p.goals():
        for x, suffix in _numerators(p, t):
            for c in sorted(int(c) for c in p.load.concurrency):
                if (want := t.at(c)) is None:
                    continue
                y = _best_linear(a, suffix, c) if t.baseline == BEST_LINEAR else t.baseline + suffix
                row = {"target": t.text, "arm": x, "baseline": y, "concurrency": c, "target_mde": want / 100}
                rows.append({**row, **(_reached(a, req, x, y, c, seed) if y else
                                       _open(f"no deployable linear arm finished at C={c}"))})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["met"] = (out["mde"].astype(float) <= out["target_mde"].astype(float)).astype(bool)   # NaN: open
    return out


def progress(run_dir, seed: int = 0) -> pd.DataFrame:
    """table() as a rounds run stands mid-sweep (the resolver's reading, ddbench/resolve.py): from its records alone,
    each pair's MDE from the rounds so far, open where a pair has no interval yet; best-linear by the units'
    pooled throughput. Seconds, not the minutes of a whole analysis."""
    from types import SimpleNamespace

    from analysis.estimate import metrics
    from analysis.read import ingest

    run = ingest.load(run_dir)
    req = metrics.per_request(run.requests, run.chunks, {a.id: a.kind for a in run.profile.arms})
    frac, window = rounds.steady(req, run.chunks)
    req = req.assign(steady_frac=frac, unit_s=window)
    u = rounds.units(req).groupby(["arm", "concurrency"], as_index=False)[["tokens", "unit_s"]].sum()
    summary = u.assign(throughput=u["tokens"] / u["unit_s"])
    return table(SimpleNamespace(run=run, summary=summary, rounds=pd.DataFrame(), pairs=pd.DataFrame()), req, seed)


def _numerators(p: Profile, t: Target) -> list[tuple[str, str]]:
    """The measured arms a target's arm stands for, each with its '@setting' suffix ('' with one setting)."""
    return [(m.id, m.id[len(t.arm):]) for m in p.measured_arms() if getattr(m, "base", m.id) == t.arm]


def _best_linear(a, suffix: str, c: int) -> str | None:
    """standings.best_linear among the arms measured under the same '@setting' suffix at C."""
    s = a.summary
    same = s["arm"].map(lambda x: x.endswith(suffix) and (bool(suffix) or "@" not in x)) if len(s) else s
    return standings.best_linear(a, s[same & (s["concurrency"] == c)] if len(s) else s)


def _reached(a, req: pd.DataFrame | None, x: str, y: str, c: int, seed: int) -> dict:
    """The MDE reached for x over y at C: the rounds estimate's where the run has one with an interval, else the
    repetition pairs'."""
    r = a.rounds
    row = r[(r["arm"] == x) & (r["baseline"] == y) & (r["concurrency"] == c)] if len(r) else r
    if not len(row) and req is not None and "round" in req and req["round"].notna().any():
        row = rounds.ratios(req, pd.DataFrame([{"arm": x, "baseline": y, "concurrency": c}]), seed=seed)
    if len(row) and math.isfinite(float(row.iloc[0]["mde"])):
        return _reading(float(row.iloc[0]["mde"]), ROUNDS, row.iloc[0])
    e = standings.pair_ratio(a, x, y, c)
    if e.get("verdict") == "not compared":
        return _open(f"not compared ({e.get('source')})")
    if not math.isfinite(float(e.get("mde") or math.nan)):
        few = f"{int(row.iloc[0]['rounds'])} rounds, " if len(row) else ""
        return _open(f"no interval ({few}{e.get('pairs')} repetition pairs)", e)
    return _reading(float(e["mde"]), PAIRS, e)


def _reading(mde: float, estimate: str, e, note: str = "") -> dict:
    return {"mde": mde, "estimate": estimate, "note": note,
            **{k: e.get(k) for k in ("speedup", "speedup_lo", "speedup_hi", "verdict")}}


def _open(why: str, e=None) -> dict:
    return _reading(math.nan, "", e or {}, why)


def text(row) -> str:
    """One target at one level in words: 'tree-b15-k8 / linear-b16 at C=8: MDE 2.4% (rounds) against 3%, met'."""
    want = f"{100 * row.target_mde:g}%"
    if not math.isfinite(row.mde):
        return f"{row.arm} / {row.baseline or row.target.split(' / ')[1]} at C={row.concurrency}: {row.note} " \
               f"against {want}, open"
    return (f"{row.arm} / {row.baseline} at C={row.concurrency}: MDE {100 * row.mde:.1f}% ({row.estimate}) "
            f"against {want}, {'met' if row.met else 'open'}")


def headline(t: pd.DataFrame) -> str:
    """'targets: 4 of 6 met' (or that the run had none)."""
    return f"targets: {int(t['met'].sum())} of {len(t)} met" if len(t) else "targets: none"
