"""Generated sentences for the summary: each carries its number and its interval."""

from __future__ import annotations

from markupsafe import Markup

from analysis.analyze import Analysis
from report import crosscheck
from report.tex import ci, escape, num


def _x(value, lo, hi, digits: int = 2) -> str:
    band = ci(lo, hi, digits)
    return f"{num(value, digits)}$\\times$" + (f" (95\\% CI {band})" if band else " (no interval)")


def sentences(a: Analysis) -> list[Markup]:
    out = []
    failed = a.cells[a.cells["status"] != "ok"]
    if len(failed):
        what = "; ".join(f"{escape(r.arm)} at C={r.concurrency} rep {r.repetition} ({escape(r.reason or r.status)})"
                         for r in failed.itertuples())
        out.append(f"\\textbf{{{len(failed)} of {len(a.cells)} cells failed}} and are left out of every "
                   f"comparison: {what}.")
    s = a.summary
    for c in sorted(s["concurrency"].unique()) if len(s) else []:
        d = s[s["concurrency"] == c].sort_values("pooled_throughput", ascending=False)
        best = d.iloc[0]
        line = (f"At C={c} the fastest arm is {escape(best['arm'])} with {num(best['pooled_throughput'], 1)} output "
                f"tok/s (pooled over {best['reps']} repetition{'s' if best['reps'] != 1 else ''})")
        sp = a.speedups
        parts = []
        if len(sp):
            for r in sp[(sp["arm"] == best["arm"]) & (sp["concurrency"] == c)].itertuples():
                parts.append(f"{_x(r.speedup, r.speedup_lo, r.speedup_hi)} the throughput of {escape(r.baseline)}")
        out.append(line + (": it delivers " + " and ".join(parts) if parts else "") + ".")
    sp = a.speedups
    if len(sp):
        for r in sp[(sp["baseline_kind"] == "linear") & sp["arm"].isin(
                [x.id for x in a.run.profile.arms if x.kind == "tree"])].itertuples():
            verdict = ("faster than" if r.speedup_lo > 1 else "slower than" if r.speedup_hi < 1
                       else "not distinguishable from")
            out.append(f"{escape(r.arm)} delivers {_x(r.speedup, r.speedup_lo, r.speedup_hi)} the throughput of "
                       f"{escape(r.baseline)} at C={r.concurrency}: {verdict} it at 95\\% confidence.")
    for r in a.decomposition.itertuples():
        out.append(f"{escape(r.tree)} over {escape(r.chain)} at C={r.concurrency}: throughput ratio "
                   f"{num(r.throughput_ratio, 3)} = $\\tau$ ratio {num(r.tau_ratio, 3)} "
                   f"(95\\% CI {ci(r.tau_ratio_lo, r.tau_ratio_hi, 3) or 'none'}) $\\times$ step-time ratio "
                   f"{num(r.step_time_ratio, 3)}: the tree accepts "
                   f"{'more' if r.tau_ratio > 1 else 'less'} per step and costs "
                   f"{'more' if r.step_time_ratio < 1 else 'less'} per step.")
    spec = a.lossless[a.lossless["arm"].map(a.kinds) != "ar"] if len(a.lossless) else a.lossless
    if len(spec):
        worst = spec.sort_values("match_rate").iloc[0]
        out.append(f"Lossless check (T=0): the lowest exact-match rate against ar is "
                   f"{num(100 * worst['match_rate'], 1)}\\% ({escape(worst['arm'])}).")
    elif a.lossless_note:
        out.append(f"Lossless check: not applicable ({escape(a.lossless_note)}).")
    xc = crosscheck.summary_sentence(a)
    if xc is not None:
        out.append(xc)
    bad = a.checks[a.checks["status"] == "fail"]
    out.append(f"Trust checks: \\textbf{{{len(bad)} failed}} of {len(a.checks)}"
               + (" (listed first in Section~\\ref{sec:trust})." if len(bad) else "."))
    return [Markup(x) for x in out]
