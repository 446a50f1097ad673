"""The sampling temperature as a condition: per base arm, τ and throughput under each sampling setting, and the
tree/chain/linear ratios per setting with their intervals.

A ratio pairs cells of one setting only (a T=0 cell never pairs with a T=0.7 cell). τ of one arm at two settings
is matched in prompts and load but not in acceptance, which changes with T by design: the text says so, and it
tests no change of a ratio across settings (nothing pairs the two ratios)."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from analysis.outcome import Analysis
from report.figures import _base, _same_setting, measured_ids, settings
from report.tables import _h, latex
from report.tex import ci, escape, num, with_ci

# an external figure, quoted with its public source, never as a result of this run
VLLM_REFERENCE = ("External reference, not measured in this run: an independent study of DDTree on vLLM "
                  "(rmagur1203/vllm-ddtree, docs/DDTREE-FINDINGS-EN.md; a 27B target with a DFlash2 drafter on "
                  "2$\\times$ RTX A6000, CUDA graphs on) reports the tree falling from 0.78$\\times$ the chain at T=0 "
                  "to 0.69$\\times$ at T=1 (top-k 20, top-p 0.95).")


def _sweeps(a: Analysis) -> bool:
    return len(settings(a)) > 1


def _bases(a: Analysis) -> dict[str, str]:
    """Base arm id -> kind, in profile order."""
    return {_base(x): x.kind for x in a.run.profile.arms}


def _concurrencies(a: Analysis) -> list[int]:
    return sorted(int(c) for c in a.summary["concurrency"].unique()) if len(a.summary) else []


def _summary_row(a: Analysis, arm: str | None, c: int) -> dict | None:
    s = a.summary
    d = s[(s["arm"] == arm) & (s["concurrency"] == c)] if arm is not None and len(s) else s.iloc[:0]
    return d.iloc[0].to_dict() if len(d) else None


def table(a: Analysis) -> Markup | None:
    """Per base arm and C: τ and throughput across repetitions under each setting; None with one setting."""
    if not _sweeps(a):
        return None
    sets, ids = settings(a), measured_ids(a)
    rows = []
    for base, kind in _bases(a).items():
        for c in _concurrencies(a):
            got = [_summary_row(a, ids.get((base, s.label)), c) for s in sets]
            if not any(got):
                continue
            tau = [Markup("1 (def.)") if kind == "ar" and r else
                   with_ci(r["tau"], r["tau_t_lo"], r["tau_t_hi"], 2) if r else Markup("--") for r in got]
            thr = [with_ci(r["throughput"], r["throughput_t_lo"], r["throughput_t_hi"], 1) if r else Markup("--")
                   for r in got]
            rows.append([escape(base), str(c), *tau, *thr])
    cols = ["arm", "C", *(rf"$\tau$ {escape(s.text)}" for s in sets), *(f"tok/s {escape(s.text)}" for s in sets)]
    return latex(pd.DataFrame(rows, columns=_h(*cols)), "lr" + "r" * 2 * len(sets))


def pairs(a: Analysis, kinds: tuple[str, ...] = ("linear", "chain")) -> pd.DataFrame:
    """The analysis's ratios (a.speedups) of arms over baselines of these kinds, each labelled with its base arms and
    its one sampling setting; a row whose two sides ran under different settings is dropped, never paired."""
    sp = a.speedups
    cols = ["base", "base_over", "label", *sp.columns]
    if sp.empty:
        return pd.DataFrame(columns=cols)
    p = a.run.profile
    arms = {x.id: x for x in p.arms}
    sp = sp[sp["baseline_kind"].isin(kinds) & sp["arm"].isin(list(arms)) & sp["baseline"].isin(list(arms))]
    sp = sp.loc[[_same_setting(a, x, y) for x, y in zip(sp["arm"], sp["baseline"], strict=True)]]
    return sp.assign(base=[_base(arms[x]) for x in sp["arm"]], base_over=[_base(arms[y]) for y in sp["baseline"]],
                     label=[p.sampling_for(x).label for x in sp["arm"]])[cols]


def ratios(a: Analysis, kinds: tuple[str, ...] = ("linear", "chain")) -> Markup | None:
    """Per (arm, baseline, C): the repetition-paired throughput ratio under each setting, with its interval, pairs
    and verdict; None with one setting."""
    if not _sweeps(a):
        return None
    sets, d = settings(a), pairs(a, kinds)
    rows = []
    for (base, over, c), g in d.groupby(["base", "base_over", "concurrency"], sort=False):
        cells = []
        for s in sets:
            r = g[g["label"] == s.label]
            if len(r):
                r = r.iloc[0]
                cells += [with_ci(r["speedup"], r["speedup_lo"], r["speedup_hi"], 3) + Markup(f", {r['pairs']}"),
                          escape(r["verdict"])]
            else:
                cells += [Markup("--"), Markup("--")]
        rows.append([escape(base), escape(over), str(c), *cells])
    cols = ["arm", "over", "C"]
    for s in sets:
        cols += [rf"{escape(s.text)}: ratio [95\% CI], pairs", "verdict"]
    return latex(pd.DataFrame(rows, columns=_h(*cols)), "llr" + "rl" * len(sets))


def _ratio_text(r) -> str:
    band = ci(r["speedup_lo"], r["speedup_hi"], 3)
    return (f"{num(r['speedup'], 3)}$\\times$ (" + (f"95\\% CI {band}, " if band else "no interval, ")
            + f"{r['pairs']} pairs, {escape(r['verdict'])})")


def _tau_sentence(a: Analysis, c: int) -> str | None:
    """τ of each speculative base arm at C under each setting, as the table has it."""
    sets, ids = settings(a), measured_ids(a)
    parts = []
    for base, kind in _bases(a).items():
        if kind == "ar":
            continue
        got = [_summary_row(a, ids.get((base, s.label)), c) for s in sets]
        if any(got):
            parts.append(f"{escape(base)} " + " / ".join(str(num(r["tau"], 2)) if r else "--" for r in got))
    if not parts:
        return None
    return (f"$\\tau$ at C={c} under {' / '.join(escape(s.text) for s in sets)}: " + "; ".join(parts) + ".")


def sentences(a: Analysis) -> list[Markup]:
    """The caveat, τ per setting at the lowest C, each tree's ratio over its chain (else its linear arm) per setting
    at the lowest C, and the external reference point; empty with one setting."""
    if not _sweeps(a):
        return []
    cs = _concurrencies(a)
    out = ["$\\tau$ at different temperatures is not a matched comparison of arm with arm, nor of one arm with "
           "itself: one arm across T keeps its prompts and its load, but its acceptance changes with T by design. "
           "Arms are compared at one setting, from repetition pairs of that setting: a T=0 cell never pairs with a "
           "cell at another temperature."]
    if cs and (t := _tau_sentence(a, cs[0])):
        out.append(t)
    d = pairs(a, ("linear", "chain"))
    kinds = _bases(a)
    trees = d[d["base"].map(kinds) == "tree"] if len(d) else d
    if cs and len(trees):
        sets = settings(a)
        at = trees[trees["concurrency"] == cs[0]]
        for base, g in at.groupby("base", sort=False):
            # the chain is the tree's own top-k-1 reference; the linear arm stands in where the run has none
            over = g[g["baseline_kind"] == "chain"] if (g["baseline_kind"] == "chain").any() else g
            ref = over["base_over"].iloc[0]
            over = over[over["base_over"] == ref]
            parts = [f"{_ratio_text(r.iloc[0])} under {escape(s.text)}" for s in sets
                     if len(r := over[over["label"] == s.label])]
            out.append(f"{escape(base)} over {escape(ref)} at C={cs[0]} (throughput, repetition pairs of one "
                       f"setting): " + "; ".join(parts) + ". Each interval is its own setting's; how the ratio changes "
                       "between settings is not itself tested.")
    if any(k == "tree" for k in kinds.values()):
        out.append(VLLM_REFERENCE)
    return [Markup(x) for x in out]


def context(a: Analysis) -> dict | None:
    """What a temperature section needs, or None when the profile has one sampling setting."""
    if not _sweeps(a):
        return None
    return {"settings": Markup("; ".join(escape(s.text) for s in settings(a))), "tau": table(a), "ratios": ratios(a),
            "sentences": sentences(a)}
