"""The report's divergence triage (analysis.triage): counts per arm, the threshold and where it comes
from, and the failures. Its figure, the gap distribution, is drawn with the others (report.figures.triage)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from markupsafe import Markup

from analysis import triage as tr
from analysis.outcome import Analysis
from report.tables import latex
from report.tex import escape, num

MAX_FAILURES = 40


def _h(*names: str) -> list[Markup]:
    return [Markup(n) for n in names]


def _tok(text, token) -> Markup:
    """A token as its text (visible whitespace) and its id."""
    if token is None or token != token:
        return Markup("--")
    shown = repr(str(text))[1:-1]
    return Markup(f"\\texttt{{{escape(shown)}}}\\,({int(token)})")


def counts(t: tr.Triage) -> Markup:
    rows = [[escape(r["comparison"]), escape(r["arm"]), escape(r["reference"]), str(r["compared"]),
             str(r["identical"]), str(r["ties"]), Markup(f"\\textbf{{{r['failures']}}}") if r["failures"]
             else str(r["failures"]), str(r["divergent_outputs"]), escape(r["token_source"]),
             num(r["largest_gap"], 3), num(r["largest_margin"], 3)]
            for r in t.counts.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("comparison", "arm", "reference", "outputs", "identical", "ties",
                                       "failures", "distinct", "token ids", "max gap", "max margin"))
    return latex(df, "lllrrrrrp{1.8cm}rr")


def failures(t: tr.Triage) -> Markup:
    d = t.failures().sort_values("margin", ascending=False, na_position="first").head(MAX_FAILURES)
    rows = [[escape(r["comparison"]), escape(r["arm"]), escape(r["prompt_id"]), str(r["requests"]),
             str(r["position"]), _tok(r["ref_text"], r["ref_token"]), _tok(r["arm_text"], r["arm_token"]),
             _tok(r["top1_text"], r["top1"]), _tok(r["top2_text"], r["top2"]), num(r["gap"], 3), num(r["margin"], 3),
             escape(r["why"])]
            for r in d.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("comparison", "arm", "prompt", "req.", "token", "reference", "arm",
                                       "top-1", "top-2", "gap", "margin", "why"))
    return latex(df, "lllrrllllrrp{3.2cm}", long=True)


def _q(x: np.ndarray, q: float) -> Markup:
    return num(np.quantile(x, q), 3) if len(x) else Markup("--")


def context(a: Analysis) -> dict | None:
    t = a.triage
    if t is None:
        return None
    div = t.divergences
    margins = div["margin"].dropna().to_numpy(dtype=float) if len(div) else np.zeros(0)
    fails = t.failures()
    return {"note": t.note, "threshold": num(t.threshold, 2), "source": t.source, "command": tr.THRESHOLD_COMMAND,
            "counts": counts(t) if len(t.counts) else None,
            "divergences": len(div), "requests": int(div["requests"].sum()) if len(div) else 0,
            "ties": int(t.counts["ties"].sum()) if len(t.counts) else 0,
            "failing_requests": int(t.counts["failures"].sum()) if len(t.counts) else 0,
            "failures_count": len(fails), "failures": failures(t) if len(fails) else None,
            "failures_cut": max(len(fails) - MAX_FAILURES, 0),
            "positions": len(t.position_gaps), "p1": _q(t.position_gaps, 0.01), "p5": _q(t.position_gaps, 0.05),
            "p50": _q(t.position_gaps, 0.5), "below": num(100 * (t.position_gaps < t.threshold).mean(), 1)
            if len(t.position_gaps) else Markup("--"),
            "margin_p50": _q(margins, 0.5), "margin_max": num(margins.max(), 3) if len(margins) else Markup("--"),
            "retokenized": bool(len(t.counts) and (t.counts["token_source"] != tr.SERVER).any()),
            "has_figure": bool(len(div))}
