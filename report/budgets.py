"""Which tree budget: per budget family (figures.budgets), τ and throughput at each budget B, the chain as budget
L-1 and the linear arm as the reference, and at each C the fastest budget and whether it beats the runner-up.

"Beats beyond noise" is said only from a ratio of repetition pairs that the analysis made (a.speedups: a tree
over the chain, ar or the linear arm); two trees are never paired there, so for them the text gives each one's
interval and says that their ratio was not measured paired, instead of reading a verdict off two intervals."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from markupsafe import Markup

from analysis.analyze import Analysis
from report.figures import MIN_BUDGETS, Family, _same_setting, budgets, families
from report.summary import verdict_words
from report.tables import _h, latex
from report.tex import ci, escape, num, with_ci

STAR = Markup(r"$^\star$")    # the fastest point of a family at its C


def points(a: Analysis, fam: Family, c: int) -> list[dict]:
    """The budget axis at C, as measured: the chain (B = L-1) and each tree, with its summary row."""
    s = a.summary[a.summary["concurrency"] == c] if len(a.summary) else a.summary
    arms = ([(fam.chain, fam.block_size - 1)] if fam.chain is not None else []) + [(t, t.budget) for t in fam.trees]
    out = []
    for arm, b in arms:
        d = s[s["arm"] == arm.id]
        if len(d) and np.isfinite(d["throughput"].iloc[0]):
            out.append({**d.iloc[0].to_dict(), "arm": arm, "budget": b, "chain": arm.kind == "chain"})
    return out


def _name(p: dict) -> str:
    return f"the chain (B={p['budget']}, {escape(p['arm'].id)})" if p["chain"] else \
        f"B={p['budget']} ({escape(p['arm'].id)})"


def paired(a: Analysis, x: str, y: str, c: int) -> SimpleNamespace | None:
    """X over Y at C from the analysis's repetition-paired ratios, inverted where only Y over X was compared; None
    where the pair was not compared (or not under one sampling setting)."""
    sp = a.speedups
    if sp.empty or not _same_setting(a, x, y):
        return None
    at = sp[sp["concurrency"] == c]
    for arm, base, flip in ((x, y, False), (y, x, True)):
        d = at[(at["arm"] == arm) & (at["baseline"] == base)]
        if len(d):
            r = d.iloc[0].to_dict()
            if flip:   # Y/X = 1 / (X/Y): the interval's ends swap, and so do faster and slower
                r.update(speedup=1 / r["speedup"], speedup_lo=1 / r["speedup_hi"], speedup_hi=1 / r["speedup_lo"],
                         verdict={"faster": "slower", "slower": "faster"}.get(r["verdict"], r["verdict"]))
            return SimpleNamespace(**r)
    return None


def _times(r: SimpleNamespace) -> str:
    band = ci(r.speedup_lo, r.speedup_hi, 3)
    return f"{num(r.speedup, 3)}$\\times$" + (f" (95\\% CI {band}, {r.pairs} pairs)" if band else
                                               f" ({r.pairs} pair{'s' if r.pairs != 1 else ''}, no interval)")


def _tps(p: dict) -> str:
    band = ci(p["throughput_t_lo"], p["throughput_t_hi"], 1)
    return f"{num(p['throughput'], 1)} tok/s" + (f" (t 95\\% {band})" if band else "")


def sentence(a: Analysis, fam: Family, c: int) -> Markup | None:
    """The fastest budget at C, its ratio over the runner-up where that was paired (and over the linear arm)."""
    pts = sorted(points(a, fam, c), key=lambda p: -p["throughput"])
    if not pts:
        return None
    best = pts[0]
    head = f"C={c}: the fastest budget by geometric mean is {_name(best)} at {_tps(best)}"
    lin = paired(a, best["arm"].id, fam.linear.id, c) if fam.linear is not None else None
    if lin is not None:
        head += f", {_times(lin)} the throughput of the linear arm {escape(fam.linear.id)} ({escape(lin.verdict)})"
    if len(pts) == 1:
        return Markup(head + "; no other budget of the family finished at this C.")
    runner = pts[1]
    r = paired(a, best["arm"].id, runner["arm"].id, c)
    if r is None:
        return Markup(f"{head}. The runner-up is {_name(runner)} at {_tps(runner)}; the ratio of these two was not "
                      f"measured paired (the analysis pairs a tree with ar, the linear arm and the chain, never with "
                      f"another tree), so this run does not say whether B={best['budget']} beats it beyond noise.")
    beats = ("it beats the runner-up beyond noise" if r.verdict == "faster" else
             "it does not beat the runner-up beyond noise" if r.verdict in ("within noise", "slower") else
             "whether it beats the runner-up is not known")
    return Markup(f"{head}. Over the runner-up, {_name(runner)} at {_tps(runner)}, it delivers {_times(r)}: "
                  f"{verdict_words(r)}; {beats}.")


def sentences(a: Analysis, fam: Family) -> list[Markup]:
    cs = sorted(int(c) for c in a.summary["concurrency"].unique()) if len(a.summary) else []
    return [x for c in cs if (x := sentence(a, fam, c)) is not None]


def _over_linear(a: Analysis, fam: Family, p: dict, c: int) -> Markup:
    r = paired(a, p["arm"].id, fam.linear.id, c) if fam.linear is not None else None
    if r is None:
        return Markup("--")
    return Markup(f"{with_ci(r.speedup, r.speedup_lo, r.speedup_hi, 3)}, {r.pairs}")


def table(a: Analysis, fam: Family) -> Markup:
    """Per C: the linear reference, the chain and each budget, with τ and throughput across repetitions and the
    paired ratio over the linear arm; the fastest budget at each C starred."""
    rows = []
    s = a.summary
    cs = sorted(int(c) for c in s["concurrency"].unique()) if len(s) else []
    for c in cs:
        lin = s[(s["concurrency"] == c) & (s["arm"] == fam.linear.id)] if fam.linear is not None else s.iloc[:0]
        if len(lin):
            r = lin.iloc[0]
            rows.append([str(c), escape(fam.linear.id), Markup("linear"),
                         with_ci(r["tau"], r["tau_t_lo"], r["tau_t_hi"], 2),
                         with_ci(r["throughput"], r["throughput_t_lo"], r["throughput_t_hi"], 1), Markup("1 (ref.)")])
        pts = points(a, fam, c)
        best = max(pts, key=lambda p: p["throughput"])["arm"].id if pts else None
        for p in pts:
            star = STAR if p["arm"].id == best else Markup("")
            b = f"{p['budget']}" + (" (chain)" if p["chain"] else "")
            rows.append([str(c), Markup(escape(p["arm"].id)) + star, b,
                         with_ci(p["tau"], p["tau_t_lo"], p["tau_t_hi"], 2),
                         with_ci(p["throughput"], p["throughput_t_lo"], p["throughput_t_hi"], 1),
                         _over_linear(a, fam, p, c)])
    df = pd.DataFrame(rows, columns=_h("C", "arm", "B", r"$\tau$ [t 95\%]", r"tok/s [t 95\%]",
                                       r"over linear [95\% CI], pairs"))
    return latex(df, "rllrrr")


def cannot_answer(a: Analysis) -> Markup | None:
    """Why the run cannot say which budget: the budgets it has per family, all fewer than MIN_BUDGETS."""
    fams = families(a)
    if not fams or budgets(a):
        return None
    where = "; ".join(f"{', '.join(str(b) for b in f.budgets)} ({escape(f.title)})" for f in fams)
    return Markup(f"This run measures tree budget(s) {where}: fewer than {MIN_BUDGETS} budgets at one block size, "
                  f"sampling setting and graphs switch, so it cannot say which budget is fastest; the ratio tables "
                  f"compare the arms it has.")


def context(a: Analysis) -> dict | None:
    """What a budget section needs: per family (>= MIN_BUDGETS budgets) its title, table and sentences, else the
    sentence saying the run cannot answer; None when the run has no tree arm."""
    fams = families(a)
    if not fams:
        return None
    return {"families": [{"title": Markup(escape(f.title)), "table": table(a, f), "sentences": sentences(a, f)}
                         for f in budgets(a)],
            "note": cannot_answer(a)}
