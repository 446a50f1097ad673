"""What to deploy, per group (sampling setting, CUDA graphs switch, C): one rule, read by page 1, the console and
tables/recommendation.csv alike (docs/metrics.md, "Recommendation").

An arm is eligible in a group only when its own checks let it be: no failed check that bars a recommendation for
it there (analysis.trust.kinds: its outputs are lossy, a cell failed or lost requests, too few requests, its shape
or counts are wrong),
and at least MIN_PAIRS repetitions for an interval. An ablation arm (a switch held equal only for symmetry), a
chain (DDTree with top-k 1: a check that it takes linear's steps) and, in a rate sweep, an arm that could not keep
up with the rate offered (it served under 95% of the arrivals) are measured, never eligible. Among eligible arms
the pick is the simplest that no eligible arm beats at 95% confidence (simplicity: ar < linear < chain < tree, then
the smaller budget and block). That rule does not depend on which arm is fastest, so it cannot pick an arm that a
simpler-looking chain of "within noise" steps would hide: an arm beaten by any eligible arm is never the pick. Every
other arm's row says why it was not picked. A deployable arm planned in a group that finished no cell there leaves
the group without a pick: nothing was compared with it.
"""

from __future__ import annotations

import pandas as pd

from analysis.estimate import standings
from analysis.trust.kinds import Kind, barring

KIND_RANK = {"ar": 0, "linear": 1, "chain": 2, "tree": 3}
MIN_PAIRS = 2
COLUMNS = ["group", "sampling", "cuda_graphs", "concurrency", "arm", "kind", "throughput", "pairs", "eligible",
           "why_not", "beaten_by", "pick"]


def simplicity(profile, arm: str) -> tuple:
    x = profile.arm(arm)
    return (KIND_RANK.get(x.kind, 9), x.tree_budget or 0, x.block_size or 0, arm)


def groups(a) -> list[dict]:
    """Per (sampling setting, CUDA graphs switch, C): the arms measured there with a throughput, in profile order."""
    s = a.summary
    if s.empty:
        return []
    g, st = standings.graphs(a), standings.sampling(a)
    s = s.assign(cuda_graphs=s["arm"].map(g), sampling=s["arm"].map(st)).dropna(subset=["throughput"])
    order = {x.id: i for i, x in enumerate(a.run.profile.arms)}
    out = []
    for (setting, on, c), d in s.groupby(["sampling", "cuda_graphs", "concurrency"], sort=True):
        d = d.assign(_o=d["arm"].map(order)).sort_values("_o")
        out.append({"title": standings.group_title(a, d["arm"].iloc[0], int(c)), "c": int(c), "rows": d,
                    "sampling": setting, "graphs": bool(on)})
    # the profile's order of settings (and of offered rates: q2 before q16), as its measured arms run them
    setting_order = {}
    for label in st.values():
        setting_order.setdefault(label, len(setting_order))
    out.sort(key=lambda g_: (setting_order.get(g_["sampling"], 99), not g_["graphs"], g_["c"]))
    return out


def barred(checks: pd.DataFrame, arm: str, c: int, kind: str = "") -> list[str]:
    """The barring checks that failed for this arm at C (its own scope, its C's, or one of its cells'). AR is the
    reference of losslessness: its own outputs differing from their most frequent form is nondeterminism, which
    every arm shares, not a loss, so that check bars speculative arms only."""
    failed = barring(checks)
    failed = failed[(failed["arm"] == arm) & failed["baseline"].isna()
                    & (failed["concurrency"].isna() | (failed["concurrency"] == c))]
    if kind == "ar":
        failed = failed[failed["key"] != Kind.LOSSLESS.name]
    return sorted(set(failed["check"]))


def pairs(cells: pd.DataFrame, arm: str, c: int) -> int:
    ok = cells[(cells["arm"] == arm) & (cells["concurrency"] == c) & (cells["status"] == "ok")]
    return int(ok["repetition"].nunique())


def group_rows(a, g: dict) -> list[dict]:
    p, c = a.run.profile, g["c"]
    group = {"group": g["title"], "sampling": g["sampling"], "cuda_graphs": g["graphs"], "concurrency": c}
    rows = []
    for r in g["rows"].itertuples():
        why = [f"failed: {x}" for x in barred(a.checks, r.arm, c, p.arm(r.arm).kind)]
        n = pairs(a.cells, r.arm, c)
        if p.arm(r.arm).ablation:
            why.insert(0, "an ablation, never deployed")
        elif p.arm(r.arm).kind == "chain":   # top-k 1 takes linear's steps by construction: deploy the linear arm
            why.insert(0, "a check of the tree code (it must equal linear), never deployed")
        if n < MIN_PAIRS:
            why.append(f"not enough evidence ({n} pair{'s' if n != 1 else ''})")
        if (served := saturated(a, r.arm)) is not None:
            why.append(f"saturated: it served {served:.0%} of the requests that arrived")
        rows.append({**group, "arm": r.arm, "kind": p.arm(r.arm).kind, "throughput": float(r.throughput), "pairs": n,
                     "eligible": not why, "why_not": "; ".join(why), "beaten_by": "", "pick": False})
    eligible = [x["arm"] for x in rows if x["eligible"]]
    for x in rows:
        x["beaten_by"] = ", ".join(o for o in eligible if o != x["arm"]
                                   and standings.pair_ratio(a, o, x["arm"], c)["verdict"] == "faster")
    # a deployable arm planned here that never finished a cell (a dead server) was never compared: it might beat
    # every arm that ran, so nothing is picked
    unmeasured = [{**group, "arm": arm, "kind": p.arm(arm).kind, "throughput": float("nan"), "pairs": 0,
                   "eligible": False, "why_not": f"not measured: no cell of it at C={c} finished", "beaten_by": "",
                   "pick": False} for arm in unmeasured_arms(a, g)]
    unbeaten = [x for x in rows if x["eligible"] and not x["beaten_by"]]
    if unbeaten and not unmeasured:
        min(unbeaten, key=lambda x: simplicity(p, x["arm"]))["pick"] = True
    return rows + unmeasured


def saturated(a, arm: str) -> float | None:
    """In a rate sweep, the share of arrivals an arm served where it fell behind its offered rate (analysis/
    estimate/rates.py); None where it kept up, or in closed loop. A saturated arm's queue grows without bound:
    no latency of it describes a deployment at that rate."""
    r = getattr(a, "rates", None)
    if r is None or r.empty:
        return None
    row = r[(r["arm"] == arm) & r["saturated"].astype(bool)]
    return float(row["served"].iloc[0]) if len(row) else None


def unmeasured_arms(a, g: dict) -> list[str]:
    """Deployable arms of the group's setting planned at its C with no throughput there."""
    cells, c = a.cells, g["c"]
    graphs, setting = standings.graphs(a), standings.sampling(a)
    measured = set(g["rows"]["arm"])
    return [x.id for x in a.run.profile.arms if x.id not in measured and not x.ablation
            and graphs.get(x.id) == g["graphs"] and setting.get(x.id) == g["sampling"]
            and ((cells["arm"] == x.id) & (cells["concurrency"] == c)).any()]


def recommendation(a) -> pd.DataFrame:
    """One row per (group, arm): its eligibility, why not, which eligible arms beat it, and the pick."""
    return pd.DataFrame([row for g in groups(a) for row in group_rows(a, g)], columns=COLUMNS)
