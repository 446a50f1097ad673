"""Who is fastest: per concurrency and CUDA graphs switch, the fastest arm and the runner-up with their paired
ratio; and the budget families, the tree budgets of one drafter block against each other.

Arms are grouped by their CUDA graphs switch and sampling setting because a comparison across either is refused
(compare.conditions holds both): where a profile has eager twins, graphs on and graphs off each get their own
standings, and so does each temperature of a sampling sweep. The ratio of
two arms is the speedups table's, read in either direction (a paired log ratio inverts exactly: 1/r with the
interval [1/hi, 1/lo]), else compare.speedup computed by the analysis (pairs(), saved with it); a refusal is kept
as the reason.

A budget family (Family) is the one grouping of tree budgets the report has: the figure, the budget section and the
verdict's "which budget" all read families(), ranked() and budgets() from here, so they name the same fastest budget
with the same paired ratio."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.estimate import compare

MIN_BUDGETS = 3   # two budgets give a direction, not a best one: an optimum needs a point on each side of it

RATIO = ["speedup", "speedup_lo", "speedup_hi", "pairs", "verdict", "sign_p", "mde", "n_to_resolve", "source"]
FLIP = {"faster": "slower", "slower": "faster"}
TABLE = "speedups table"


def _none(why: str) -> dict:
    nan = float("nan")
    return {"speedup": nan, "speedup_lo": nan, "speedup_hi": nan, "pairs": 0, "verdict": "not compared",
            "sign_p": nan, "mde": nan, "n_to_resolve": None, "source": why}


def pair_ratio(a, x: str, y: str, c: int) -> dict:
    """Throughput of arm x over arm y at C = c, paired by repetition, as the analysis saved it (a.pairs, pairs()):
    either direction, the reverse inverted; source says where it came from (or why it was not compared). An analysis
    still being built (or one made by hand) has no pairs yet: the ratio is computed as pairs() computes it."""
    p = getattr(a, "pairs", None)
    if p is None:
        return _ratio(a, x, y, c)
    if len(p):
        for arm, other, inverted in ((x, y, False), (y, x, True)):
            row = p[(p["arm"] == arm) & (p["other"] == other) & (p["concurrency"] == c)]
            if len(row):
                return _read(row.iloc[0], inverted)
    return _none(f"{x} and {y} at C={c} were not compared")


def pairs(a) -> pd.DataFrame:
    """Every two arms at every level (the profile's and the summary's), x before y in the profile's order, x over y:
    the speedups table's row (either direction, inverted), else compare.speedup on the run's bootstrap; where they
    were not compared, the reason. The analysis saves it, so that whoever reads a ratio later recomputes nothing."""
    ids = [x.id for x in a.run.profile.arms]
    levels = sorted({int(c) for c in a.run.profile.load.concurrency}
                    | {int(c) for c in a.summary.get("concurrency", [])})
    ok = a.cells[a.cells["status"] == "ok"] if len(a.cells) else pd.DataFrame(columns=["arm", "concurrency"])
    finished = set(zip(ok["arm"], ok["concurrency"].astype(int), strict=True))
    rows = []
    for i, x in enumerate(ids):
        for y in ids[i + 1:]:
            for c in levels:
                missing = [arm for arm in (x, y) if (arm, c) not in finished]
                ratio = _none(f"{missing[0]} has no finished cell at C={c}") if missing else _ratio(a, x, y, c)
                rows.append({"arm": x, "other": y, "concurrency": c, **ratio})
    return pd.DataFrame(rows, columns=["arm", "other", "concurrency", *RATIO])


def _ratio(a, x: str, y: str, c: int) -> dict:
    s = a.speedups
    if len(s):
        for arm, base, inverted in ((x, y, False), (y, x, True)):
            row = s[(s["arm"] == arm) & (s["baseline"] == base) & (s["concurrency"] == c)]
            if len(row):
                return _read({**row.iloc[0].to_dict(), "source": TABLE}, inverted)
    try:
        r = compare.speedup(compare.Side(a.run, a.cells, a.boots, x), compare.Side(a.run, a.cells, a.boots, y), c)
    except compare.MismatchError as e:
        return _none(str(e))
    return {**{k: r[k] for k in RATIO if k != "source"}, "source": "computed"}


def _read(r, inverted: bool) -> dict:
    """A saved ratio (a speedups or pairs row), in the other direction where inverted: the speedups table's own
    row, read backwards, says so in its source."""
    out = {k: r.get(k) for k in RATIO}
    if inverted:
        out["source"] = {TABLE: TABLE + ", inverted", TABLE + ", inverted": TABLE}.get(out["source"], out["source"])
        with np.errstate(divide="ignore"):
            out.update(speedup=1 / r["speedup"], speedup_lo=1 / r["speedup_hi"], speedup_hi=1 / r["speedup_lo"],
                       verdict=FLIP.get(r["verdict"], r["verdict"]))
    return out


def best_linear(a, rows: pd.DataFrame) -> str | None:
    """Of these summary rows (one level's), the deployable linear arm with the most throughput, or None."""
    p = a.run.profile
    lin = rows[rows["arm"].map(lambda x: p.arm(x).kind == "linear" and not p.arm(x).ablation)] if len(rows) else rows
    return None if lin.empty else str(lin.sort_values("throughput", ascending=False).iloc[0]["arm"])


def graphs(a) -> dict[str, bool]:
    p = a.run.profile
    return {x.id: bool(p.cuda_graphs(x)) for x in p.arms}


def sampling(a) -> dict[str, str]:
    """Each arm's sampling setting, by its label (one setting: every arm the same)."""
    p = a.run.profile
    return {x.id: p.sampling_for(x.id).label for x in p.arms}


def group_title(a, arm: str, c: int) -> str:
    """The group an arm's cells at C belong to, as every table and page 1 name it: 'C=8', with the sampling setting
    and the CUDA graphs switch where they vary; in a rate sweep by its offered rate ('4 req/s offered'), since
    there C only caps the requests in flight."""
    p = a.run.profile
    setting, st, g = p.sampling_for(arm), sampling(a), graphs(a)
    rate = getattr(setting, "rate", None)
    if rate:
        bases = {p.sampling_for(x).model_copy(update={"rate": None}).label for x in st}
        head = f"{rate:g} req/s offered" + (f", sampling {setting.model_copy(update={'rate': None}).label}"
                                             if len(bases) > 1 else "")
    else:
        head = f"C={int(c)}" + (f", sampling {st[arm]}" if len(set(st.values())) > 1 else "")
    return head + (f", CUDA graphs {'on' if g[arm] else 'off'}" if len(set(g.values())) > 1 else "")


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


# ---- budget families: tree arms that differ only in their budget ---------------------------------------------

@dataclass(frozen=True)
class Family:
    """Tree arms that differ only in budget B (top-k K = B as the SGLang DDTree fork has it, or one fixed K) at one
    drafter block size L, sampling setting and CUDA graphs switch; the chain (budget L-1, top-k 1) and the linear arm
    of the same conditions are its references."""

    trees: tuple            # by budget, one arm per budget
    chain: Any | None       # ddbench.core.profile.Arm
    linear: Any | None
    sampling: Any           # ddbench.core.profile.Sampling
    graphs: bool
    topk: int | None        # None: K = B

    @property
    def block_size(self) -> int:
        return self.trees[0].block_size

    @property
    def budgets(self) -> list[int]:
        return [t.budget for t in self.trees]

    @property
    def k(self) -> str:
        return "K = B" if self.topk is None else f"K = {self.topk}"

    @property
    def title(self) -> str:
        return f"{self.sampling.text}, block {self.block_size}, {self.k}, CUDA graphs {'on' if self.graphs else 'off'}"


def families(a) -> list[Family]:
    """Every group of tree arms that differ only in budget, however few its budgets (budget_families() keeps those
    that can say which budget is fastest)."""
    p = a.run.profile

    def where(x) -> tuple:
        return p.sampling_for(x.id).label, p.cuda_graphs(x), x.block_size

    groups: dict[tuple, dict[int, Any]] = {}
    for x in p.arms:
        if x.kind == "tree":
            key = (*where(x), None if x.topk == x.budget else x.topk, repr(sorted(x.env.items())),
                   tuple(x.extra_args))
            # the first arm of a budget: a second (an eager twin on a CPU, where graphs never run) is the same condition
            groups.setdefault(key, {}).setdefault(x.budget, x)
    refs: dict[tuple, Any] = {}
    for x in p.arms:
        if x.kind in ("chain", "linear"):
            refs.setdefault((x.kind, *where(x)), x)
    out = []
    for (label, graphs, block, topk, *_), by_budget in groups.items():
        trees = tuple(by_budget[b] for b in sorted(by_budget))
        out.append(Family(trees, refs.get(("chain", label, graphs, block)), refs.get(("linear", label, graphs, block)),
                          p.sampling_for(trees[0].id), graphs, topk))
    return out


def budget_families(a) -> list[Family]:
    """The families with at least MIN_BUDGETS tree budgets; empty when the run cannot say which budget."""
    return [f for f in families(a) if len(f.trees) >= MIN_BUDGETS]


def points(a, fam: Family, c: int) -> list[dict]:
    """The family's budget axis at C, as measured: the chain (B = L-1) and each tree, with its summary row."""
    s = a.summary
    if s.empty:
        return []
    s = s[s["concurrency"] == c]
    arms = ([(fam.chain, fam.block_size - 1)] if fam.chain is not None else []) + [(t, t.budget) for t in fam.trees]
    out = []
    for arm, b in arms:
        d = s[s["arm"] == arm.id]
        if len(d) and np.isfinite(d["throughput"].iloc[0]):
            out.append({**d.iloc[0].to_dict(), "arm": arm, "budget": b, "chain": arm.kind == "chain"})
    return out


def ranked(a, fam: Family, c: int) -> list[dict]:
    """The family's points at C, fastest first by geometric mean, each with the paired ratio of the fastest over it
    (pair_ratio; the fastest has none over itself)."""
    pts = sorted(points(a, fam, c), key=lambda p: -p["throughput"])
    return [{**p, **(_none("the fastest budget") if i == 0 else pair_ratio(a, pts[0]["arm"].id, p["arm"].id, c))}
            for i, p in enumerate(pts)]


def budgets(a) -> pd.DataFrame:
    """ranked() as one table, for every budget family at every C: each point's throughput and τ (geometric means over
    repetitions), whether it is the fastest, and the paired ratio of the fastest over it."""
    cols = ["family", "block_size", "k", "cuda_graphs", "sampling", "concurrency", "arm", "chain", "budget", "topk",
            "throughput", "tau", "best", *RATIO]
    s = a.summary
    cs = sorted(int(c) for c in s["concurrency"].unique()) if len(s) else []
    rows = [{"family": i, "block_size": f.block_size, "k": f.k, "cuda_graphs": f.graphs, "sampling": f.sampling.label,
             "concurrency": c, "arm": p["arm"].id, "chain": p["chain"], "budget": p["budget"],
             "topk": p["arm"].tree_topk, "throughput": p["throughput"], "tau": p["tau"], "best": j == 0,
             **{k: p[k] for k in RATIO}}
            for i, f in enumerate(budget_families(a)) for c in cs for j, p in enumerate(ranked(a, f, c))]
    # in axis order, the chain before a tree of its budget: the order a reader lists budgets in
    return pd.DataFrame(rows, columns=cols).sort_values(["family", "concurrency", "budget", "chain"],
                                                        ascending=[True, True, True, False], kind="stable",
                                                        ignore_index=True)
