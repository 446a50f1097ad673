"""Who is fastest: per concurrency and CUDA graphs switch, the fastest arm and the runner-up with their paired
ratio; and the tree budgets of one drafter block against each other.

Arms are grouped by their CUDA graphs switch and sampling setting because a comparison across either is refused
(compare.conditions holds both): where a profile has eager twins, graphs on and graphs off each get their own
standings, and so does each temperature of a sampling sweep. The ratio of
two arms is the speedups table's, read in either direction (a paired log ratio inverts exactly: 1/r with the
interval [1/hi, 1/lo]), else compare.speedup computed here; a refusal is kept as the reason."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import compare

MIN_BUDGETS = 3   # two budgets give a direction, not a best one: an optimum needs a point on each side of it

RATIO = ["speedup", "speedup_lo", "speedup_hi", "pairs", "verdict", "sign_p", "mde", "n_to_resolve", "source"]
FLIP = {"faster": "slower", "slower": "faster"}


def _none(why: str) -> dict:
    nan = float("nan")
    return {"speedup": nan, "speedup_lo": nan, "speedup_hi": nan, "pairs": 0, "verdict": "not compared",
            "sign_p": nan, "mde": nan, "n_to_resolve": None, "source": why}


def pair_ratio(a, x: str, y: str, c: int) -> dict:
    """Throughput of arm x over arm y at C = c, paired by repetition: the speedups table's row, its reverse inverted,
    or compare.speedup; source says which (or why it was not compared)."""
    s = a.speedups
    if len(s):
        for arm, base, inverted in ((x, y, False), (y, x, True)):
            row = s[(s["arm"] == arm) & (s["baseline"] == base) & (s["concurrency"] == c)]
            if len(row):
                return _read(row.iloc[0], inverted)
    try:
        r = compare.speedup(compare.Side(a.run, a.cells, a.boots, x), compare.Side(a.run, a.cells, a.boots, y), c)
    except compare.MismatchError as e:
        return _none(str(e))
    return {**{k: r[k] for k in RATIO if k != "source"}, "source": "computed"}


def _read(r, inverted: bool) -> dict:
    out = {k: r[k] for k in RATIO if k != "source"}
    out["source"] = "speedups table" + (", inverted" if inverted else "")
    if inverted:
        with np.errstate(divide="ignore"):
            out.update(speedup=1 / r["speedup"], speedup_lo=1 / r["speedup_hi"], speedup_hi=1 / r["speedup_lo"],
                       verdict=FLIP.get(r["verdict"], r["verdict"]))
    return out


def graphs(a) -> dict[str, bool]:
    p = a.run.profile
    return {x.id: bool(p.cuda_graphs(x)) for x in p.arms}


def sampling(a) -> dict[str, str]:
    """Each arm's sampling setting, by its label (one setting: every arm the same)."""
    p = a.run.profile
    return {x.id: p.sampling_for(x.id).label for x in p.arms}


def podium(a) -> pd.DataFrame:
    """Per (C, CUDA graphs, sampling setting): the fastest arm by throughput (geometric mean over its repetitions)
    and the runner-up, with the paired ratio fastest / runner-up; a group of one arm has no runner-up."""
    s = a.summary
    cols = ["concurrency", "cuda_graphs", "sampling", "arms", "fastest", "fastest_throughput", "runner_up",
            "runner_up_throughput", *RATIO]
    if s.empty:
        return pd.DataFrame(columns=cols)
    s = s.assign(cuda_graphs=s["arm"].map(graphs(a)), sampling=s["arm"].map(sampling(a)))
    rows = []
    for (c, on, setting), d in s.groupby(["concurrency", "cuda_graphs", "sampling"], sort=True):
        d = d.sort_values("throughput", ascending=False)
        best = d.iloc[0]
        row = {"concurrency": int(c), "cuda_graphs": bool(on), "sampling": setting, "arms": len(d),
               "fastest": best["arm"], "fastest_throughput": best["throughput"], "runner_up": None,
               "runner_up_throughput": float("nan")}
        if len(d) < 2:
            rows.append({**row, **_none("the only arm in its group")})
            continue
        second = d.iloc[1]
        rows.append({**row, "runner_up": second["arm"], "runner_up_throughput": second["throughput"],
                     **pair_ratio(a, best["arm"], second["arm"], int(c))})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["sampling", "concurrency", "cuda_graphs"], ascending=[True, True, False]).reset_index(
        drop=True)


def budget_groups(a) -> dict[tuple[int, bool, str], list]:
    """Tree arms by (drafter block size, CUDA graphs, sampling setting), budgets ascending."""
    g, t = graphs(a), sampling(a)
    out: dict[tuple[int, bool, str], list] = {}
    for x in a.run.profile.arms:
        if x.kind == "tree":
            out.setdefault((x.block_size, g[x.id], t[x.id]), []).append(x)
    return {k: sorted(v, key=lambda x: (x.tree_budget, x.tree_topk)) for k, v in out.items()}


def budgets(a) -> pd.DataFrame:
    """For every group of budget_groups with at least MIN_BUDGETS distinct budgets, at every C: each budget's
    throughput and τ (geometric means over repetitions), and the paired ratio of the fastest budget over it."""
    s = a.summary
    cols = ["block_size", "cuda_graphs", "sampling", "concurrency", "arm", "budget", "topk", "throughput", "tau",
            "best", *RATIO]
    rows = []
    for (block, on, setting), arms in budget_groups(a).items():
        if len({x.tree_budget for x in arms}) < MIN_BUDGETS or s.empty:
            continue
        ids = [x.id for x in arms]
        for c, d in s[s["arm"].isin(ids)].groupby("concurrency", sort=True):
            best = d.sort_values("throughput", ascending=False).iloc[0]["arm"]
            by = d.set_index("arm")
            for x in arms:
                if x.id not in by.index:
                    continue
                ratio = _none("the fastest budget") if x.id == best else pair_ratio(a, best, x.id, int(c))
                rows.append({"block_size": block, "cuda_graphs": on, "sampling": setting, "concurrency": int(c),
                             "arm": x.id, "budget": x.tree_budget, "topk": x.tree_topk,
                             "throughput": by.loc[x.id, "throughput"], "tau": by.loc[x.id, "tau"], "best": x.id == best,
                             **ratio})
    return pd.DataFrame(rows, columns=cols)
