"""Which tree budget: per budget family (standings.budget_families), τ and throughput at each budget B, the chain as
budget L-1 and the linear arm as the reference, and at each C the fastest budget and whether it beats the runner-up.

The families, the budget axis and the ratios are analysis.estimate.standings': each ratio is standings.pair_ratio,
paired by repetition (the speedups table's in either direction, else computed from the cells), so this section and the
verdict's (c) name the same fastest budget with the same ratio. "Beats beyond noise" is said only from that ratio's
interval, never read off two budgets' own intervals; a pair the analysis refused says so, with its reason."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
from markupsafe import Markup

from analysis.estimate.standings import MIN_BUDGETS, Family, budget_families, families, pair_ratio, points, ranked
from analysis.outcome import Analysis
from report.summary import verdict_words
from report.tables import _h, latex
from report.tex import ci, escape, num, with_ci

STAR = Markup(r"$^\star$")    # the fastest point of a family at its C


def _name(p: dict) -> str:
    return f"the chain (B={p['budget']}, {escape(p['arm'].id)})" if p["chain"] else \
        f"B={p['budget']} ({escape(p['arm'].id)})"


def _compared(r: dict) -> bool:
    return r["verdict"] != "not compared"


def _over(a: Analysis, p: dict, ref, c: int) -> dict | None:
    """The point's paired ratio over a reference arm at C; None without the arm or where the pair was refused."""
    if ref is None:
        return None
    r = pair_ratio(a, p["arm"].id, ref.id, c)
    return r if _compared(r) else None


def _times(r: dict) -> str:
    band, n = ci(r["speedup_lo"], r["speedup_hi"], 3), r["pairs"]
    return f"{num(r['speedup'], 3)}$\\times$" + (f" (95\\% CI {band}, {n} pairs)" if band else
                                                  f" ({n} pair{'s' if n != 1 else ''}, no interval)")


def _tps(p: dict) -> str:
    band = ci(p["throughput_t_lo"], p["throughput_t_hi"], 1)
    return f"{num(p['throughput'], 1)} tok/s" + (f" (t 95\\% {band})" if band else "")


def sentence(a: Analysis, fam: Family, c: int) -> Markup | None:
    """The fastest budget at C, its paired ratio over the runner-up (and over the linear arm)."""
    pts = ranked(a, fam, c)
    if not pts:
        return None
    best = pts[0]
    head = f"C={c}: the fastest budget by geometric mean is {_name(best)} at {_tps(best)}"
    lin = _over(a, best, fam.linear, c)
    if lin is not None:
        head += f", {_times(lin)} the throughput of the linear arm {escape(fam.linear.id)} ({escape(lin['verdict'])})"
    if len(pts) == 1:
        return Markup(head + "; no other budget of the family finished at this C.")
    runner = pts[1]     # ranked() holds the fastest over each point: here, over the runner-up
    if not _compared(runner):
        return Markup(f"{head}. The runner-up is {_name(runner)} at {_tps(runner)}; the two were not compared "
                      f"({escape(runner['source'])}), so this run does not say whether B={best['budget']} beats it "
                      f"beyond noise.")
    v = runner["verdict"]
    beats = ("it beats the runner-up beyond noise" if v == "faster" else
             "it does not beat the runner-up beyond noise" if v in ("within noise", "slower") else
             "whether it beats the runner-up is not known")
    return Markup(f"{head}. Over the runner-up, {_name(runner)} at {_tps(runner)}, it delivers {_times(runner)} "
                  f"paired by repetition: {verdict_words(SimpleNamespace(**runner))}; {beats}.")


def sentences(a: Analysis, fam: Family) -> list[Markup]:
    cs = sorted(int(c) for c in a.summary["concurrency"].unique()) if len(a.summary) else []
    return [x for c in cs if (x := sentence(a, fam, c)) is not None]


def _over_linear(a: Analysis, fam: Family, p: dict, c: int) -> Markup:
    r = _over(a, p, fam.linear, c)
    if r is None:
        return Markup("--")
    return Markup(f"{with_ci(r['speedup'], r['speedup_lo'], r['speedup_hi'], 3)}, {r['pairs']}")


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
    if not fams or budget_families(a):
        return None
    where = "; ".join(f"{', '.join(str(b) for b in f.budgets)} ({escape(f.title)})" for f in fams)
    return Markup(f"This run measures tree budget(s) {where}: fewer than {MIN_BUDGETS} budgets at one block size, "
                  f"sampling setting and graphs switch, so it cannot say which budget is fastest; the ratio tables "
                  f"compare the arms it has.")


def context(a: Analysis) -> dict | None:
    """What a budget section needs: per family (>= MIN_BUDGETS budgets) its title, table and sentences, else the
    sentence saying the run cannot answer; None when the run has no tree arm."""
    if not families(a):
        return None
    return {"families": [{"title": Markup(escape(f.title)), "table": table(a, f), "sentences": sentences(a, f)}
                         for f in budget_families(a)],
            "note": cannot_answer(a)}
