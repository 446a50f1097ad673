"""The report's drafter diagnosis: the tree's headroom over the chain, from the drafter's own marginals.

The tables come from `python -m analysis.headroom RUN_DIR` (offline, fp32 on the CPU, the run's own
prompts and pair); the section is left out when they are absent. The measured τ ratio stands beside
the diagnosis, because the measured step counts are the headline: the diagnosis reads one greedy
trace per prompt, and what a tree would have accepted on it is a counterfactual."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from analysis.outcome import Analysis
from ddbench.core.results import HEADROOM_FILES as FILES
from report.tables import _h, latex
from report.tex import escape, num

BUCKETS = (("rank_1", "1"), ("rank_2", "2"), ("rank_3_4", "3--4"), ("rank_5_8", "5--8"), ("rank_gt_8", "$>8$"))


def read(a: Analysis) -> dict[str, pd.DataFrame] | None:
    """The run's diagnosis tables by FILES key, or None unless every one is there."""
    folder = a.run.path / "tables"
    paths = {k: folder / name for k, name in FILES.items()}
    if not all(p.is_file() for p in paths.values()):
        return None
    return {k: pd.read_csv(p) for k, p in paths.items()}


def _every(stride: int) -> str:
    return "every position" if stride == 1 else f"every {stride}th position"


def _pct(x) -> Markup:
    return num(100 * float(x), 1)


def ranks(t: pd.DataFrame) -> Markup:
    rows = [{"depth": Markup("all") if int(r["depth"]) == 0 else int(r["depth"]),
             **{label: _pct(r[col]) for col, label in BUCKETS}} for r in t.to_dict("records")]
    rows = rows[1:] + rows[:1]  # depth 0 is the pooled row: last, as a total
    df = pd.DataFrame(rows)
    df.columns = _h("depth", *(f"rank {label} (\\%)" for _, label in BUCKETS))
    return latex(df)


def measured_tau(a: Analysis, budget: int, topk: int) -> dict | None:
    """The run's paired τ ratio (the tree-gain decomposition's) of its tree arm of this budget and top-k over
    the chain, else the linear arm, at the lowest C."""
    tree = next((x for x in a.run.profile.arms if x.kind == "tree" and x.tree_budget == budget
                 and x.tree_topk == topk), None)
    d = a.decomposition
    if tree is None or d.empty:
        return None
    d = d[d["arm"] == tree.id]
    for kind in ("chain", "linear"):
        rows = d[d["reference_kind"] == kind].sort_values("concurrency")
        if len(rows):
            r = rows.iloc[0]
            return {"ratio": float(r["tau_ratio"]), "lo": float(r["tau_ratio_lo"]), "hi": float(r["tau_ratio_hi"]),
                    "over": r["reference"], "c": int(r["concurrency"])}
    return None


def trees(a: Analysis, t: pd.DataFrame) -> Markup:
    rows = []
    for r in t.to_dict("records"):
        m = measured_tau(a, int(r["budget"]), int(r["topk"]))
        rows.append({"B": int(r["budget"]), "K": int(r["topk"]), "chain E": num(r["chain_expected"]),
                     "tree E": num(r["tree_expected"]), "E ratio": num(r["ratio_of_means"], 3),
                     "accepted chain / tree": Markup(f"{num(r['chain_accepted'])} / {num(r['tree_accepted'])}"),
                     "accepted ratio": num(r["accepted_ratio"], 3),
                     "measured $\\tau$ ratio": Markup(f"{num(m['ratio'], 3)} (over {escape(m['over'])}, C={m['c']})")
                     if m else Markup("--")})
    df = pd.DataFrame(rows)
    df.columns = _h(*df.columns)
    return latex(df)


def context(a: Analysis) -> dict | None:
    """What the template's diagnosis section needs, or None when the run has no headroom tables."""
    t = read(a)
    if t is None:
        return None
    setup, fm = t["setup"].iloc[0], t["first_mismatch"].iloc[0]
    sib = t["after_sibling"]
    sib = sib[(sib["prefix"] == "spine") & (sib["depth"] == 0)].iloc[0]
    return {
        "setup": Markup(f"{int(setup['prompts'])} prompts of the run's set, {int(setup['roots'])} positions "
                        f"({_every(int(setup['stride']))} of each greedy continuation), depth {int(setup['depth'])}, "
                        f"{num(setup['cpu_s'], 1)} s of CPU"),
        "ranks": ranks(t["ranks"]),
        "first_mismatch": Markup(
            f"The drafter's whole rank-1 chain matched the target at {int(fm['whole_chain'])} of "
            f"{int(fm['roots'])} positions. Where it broke (mean depth {num(fm['mean_depth'], 1)}), the target's "
            f"token was a rank 2--{int(fm['topk'])} sibling in {_pct(fm['sibling_share'])}\\% of cases (rank 2 "
            f"alone: {_pct(fm['rank_2'])}\\%): a tree of top-k {int(fm['topk'])} holds it there."),
        "after_sibling": Markup(
            f"But after the target takes a sibling, the drafter's rank 1 at the next depth is right in "
            f"{_pct(sib['sibling_rate'])}\\% of cases ({int(sib['sibling_n'])}), against "
            f"{_pct(sib['spine_rate'])}\\% after a rank-1 match ({int(sib['spine_n'])}): the drafter's "
            f"next-depth distribution is conditioned on the block's context, not on the sibling, so a branch "
            f"starts a worse chain."),
        "trees": trees(a, t["headroom"]),
    }
