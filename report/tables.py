"""The report's tables: analysis DataFrames shaped for reading, rendered by pandas' LaTeX export
with booktabs rules. Every cell is TeX already (escaped strings, formatted numbers)."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from analysis import stats
from analysis.analyze import Analysis
from report.tex import escape, num, with_ci


def latex(df: pd.DataFrame, align: str | None = None, long: bool = False) -> Markup:
    """booktabs tabular (or longtable) of a frame whose cells and headers are TeX."""
    if df.empty:
        return Markup(r"\emph{(none)}")
    align = align or "l" + "r" * (len(df.columns) - 1)
    styler = df.style.hide(axis="index")
    tex = styler.to_latex(hrules=True, column_format=align, environment="longtable" if long else None)
    return Markup(tex)


def _h(*names: str) -> list[Markup]:
    return [Markup(n) for n in names]


def pct(cell: dict, name: str, q: float, digits: int = 1) -> Markup:
    """A percentile in ms, or a dagger ('n too small') when n·(1−q) < 10."""
    n = int(cell[f"{name}_n"])
    if not stats.printable(n, q):
        return Markup(r"$\dagger$")
    return num(1e3 * cell[f"{name}_p{round(q * 100)}"], digits)


def throughput(a: Analysis, c: int) -> Markup:
    cells = a.cells[a.cells["concurrency"] == c]
    rows = []
    for r in cells.to_dict("records"):
        rows.append([escape(r["arm"]), str(r["repetition"]), _status(r), str(r["n"]), str(r["errors"]),
                     num(r["window_s"], 1) + (Markup("$^*$") if r["window_source"] == "derived" else ""),
                     with_ci(r["throughput"], r["throughput_lo"], r["throughput_hi"], 1),
                     with_ci(r["tau"], r["tau_lo"], r["tau_hi"], 2), num(r["tau_mean"], 2),
                     num(1e3 * r["step_time_s"], 1)])
    df = pd.DataFrame(rows, columns=_h("arm", "rep", "status", "n", "err", "window s",
                                       r"tok/s [95\% CI]", r"$\tau$ tok-wt [95\% CI]", r"$\tau$ mean", "step ms"))
    return latex(df, "llcrrrrrrr")


def latency(a: Analysis, c: int) -> Markup:
    cells = a.cells[(a.cells["concurrency"] == c)]
    rows = []
    for r in cells.to_dict("records"):
        rows.append([escape(r["arm"]), str(r["repetition"]),
                     *(pct(r, "ttft", q) for q in stats.QUANTILES),
                     *(pct(r, "tpot", q, 2) for q in stats.QUANTILES),
                     *(pct(r, "gap", q, 2) for q in stats.QUANTILES)])
    cols = ["arm", "rep"] + [f"{m} p{round(100 * q)}" for m in ("TTFT", "TPOT", "gap") for q in stats.QUANTILES]
    note = Markup(r"\\[1pt]$\dagger$ n too small: a percentile $q$ needs $n(1-q)\ge 10$ samples.")
    return latex(pd.DataFrame(rows, columns=_h(*cols)), "ll" + "r" * 9) + note


def repetitions(a: Analysis, c: int) -> Markup:
    s = a.summary[a.summary["concurrency"] == c]
    rows = []
    for r in s.to_dict("records"):
        rows.append([escape(r["arm"]), str(r["reps"]), str(r["n"]),
                     with_ci(r["throughput"], r["throughput_t_lo"], r["throughput_t_hi"], 1),
                     with_ci(r["tau"], r["tau_t_lo"], r["tau_t_hi"], 2),
                     with_ci(1e3 * r["tpot_mean"], 1e3 * r["tpot_mean_t_lo"], 1e3 * r["tpot_mean_t_hi"], 2),
                     with_ci(1e3 * r["ttft_mean"], 1e3 * r["ttft_mean_t_lo"], 1e3 * r["ttft_mean_t_hi"], 1)])
    df = pd.DataFrame(rows, columns=_h("arm", "reps", "n", r"tok/s [t 95\%]", r"$\tau$ [t 95\%]",
                                       r"TPOT ms [t 95\%]", r"TTFT ms [t 95\%]"))
    return latex(df, "lrrrrrr")


def speedups(a: Analysis, c: int) -> Markup:
    s = a.speedups
    if s.empty:
        return latex(s)
    s = s[(s["concurrency"] == c) & (s["arm"] != s["baseline"])]
    rows = [[escape(r["arm"]), escape(r["baseline"]), with_ci(r["speedup"], r["speedup_lo"], r["speedup_hi"], 3),
             with_ci(r["tpot_ratio"], r["tpot_ratio_lo"], r["tpot_ratio_hi"], 3), f"{r['reps']} / {r['baseline_reps']}"]
            for r in s.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "over", r"throughput ratio [95\% CI]",
                                       r"TPOT ratio [95\% CI]", "reps"))
    return latex(df, "llrrr")


def decomposition(a: Analysis) -> Markup:
    d = a.decomposition
    rows = [[escape(r["tree"]), escape(r["chain"]), str(r["concurrency"]), num(r["throughput_ratio"], 3),
             with_ci(r["tau_ratio"], r.get("tau_ratio_lo"), r.get("tau_ratio_hi"), 3), num(r["step_ms_chain"], 2),
             num(r["step_ms_tree"], 2), num(r["step_time_ratio"], 3), num(r["product"], 3)]
            for r in d.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("tree", "chain", "C", "thr. ratio", r"$\tau$ ratio [95\% CI]",
                                       "chain step ms", "tree step ms", "step ratio", "product"))
    return latex(df, "llrrrrrrr")


def categories(a: Analysis) -> Markup:
    d = a.categories
    rows = [[escape(r["arm"]), str(r["concurrency"]), escape(r["category"]), f"{r['n']} / {r['baseline_n']}",
             with_ci(r["speedup"], r["speedup_lo"], r["speedup_hi"], 2), num(r["tau"], 2)]
            for r in d.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "C", "category", "n / n(ar)", r"speedup vs ar [95\% CI]", r"$\tau$"))
    return latex(df, "lrlrrr", long=len(rows) > 30)


def acceptance(a: Analysis) -> Markup:
    s = a.summary[a.summary["kind"] != "ar"]
    cells = a.cells[a.cells["status"] == "ok"]
    log = a.run.log[a.run.log["kind"] == "ddtree"]
    rows = []
    for r in s.to_dict("records"):
        cc = cells[(cells["arm"] == r["arm"]) & (cells["concurrency"] == r["concurrency"])]
        lg = log[(log["arm"] == r["arm"]) & (log["concurrency"] == r["concurrency"])]
        rows.append([escape(r["arm"]), str(r["concurrency"]), num(r["pooled_tau"], 2),
                     num(cc["tau_mean"].mean(), 2), num(r.get("server_tau"), 2), num(cc["tokens_per_chunk"].mean(), 2),
                     num(lg["avg_nodes"].mean(), 1) if len(lg) else "--",
                     num(lg["avg_depth"].mean(), 2) if len(lg) else "--",
                     num(lg["avg_commit"].mean(), 2) if len(lg) else "--"])
    df = pd.DataFrame(rows, columns=_h("arm", "C", r"$\tau$ tok-wt", r"$\tau$ mean/req", r"server $\tau$", "tok/chunk",
                                       "log nodes", "log depth", "log commit"))
    return latex(df, "lrrrrrrrr")


def lossless(a: Analysis) -> Markup:
    d = a.lossless
    rows = [[escape(r["arm"]), str(r["compared"]), str(r["exact"]), num(100 * r["match_rate"], 1),
             num(r["prefix_chars_mean"], 1), num(100 * r["prefix_fraction_mean"], 1),
             f"{r['mismatched_prompts']} / {r['prompts']}", escape(r["first_mismatches"] or "")]
            for r in d.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "outputs", "exact", r"match \%", "prefix chars",
                                       r"prefix \%", "prompts differing", "e.g."))
    return latex(df, r"lrrrrrrp{3.2cm}")


def checks(df: pd.DataFrame, long: bool = True) -> Markup:
    rows = [[_mark(r["status"]), escape(r["check"]), escape(r["scope"]), escape(r["evidence"])]
            for r in df.to_dict("records")]
    out = pd.DataFrame(rows, columns=_h("", "check", "scope", "evidence"))
    return latex(out, r"lp{3.6cm}p{3.2cm}p{7.4cm}", long=long)


def check_counts(df: pd.DataFrame) -> Markup:
    g = df.groupby("check", sort=False)["status"].value_counts().unstack(fill_value=0)
    rows = [[escape(name), str(r.get("fail", 0)), str(r.get("pass", 0)), str(r.get("n/a", 0))]
            for name, r in g.iterrows()]
    return latex(pd.DataFrame(rows, columns=_h("check", "fail", "pass", "n/a")), "lrrr")


def _mark(status: str) -> Markup:
    return Markup({"fail": r"\textcolor{failred}{\textbf{FAIL}}", "pass": r"\textcolor{passgreen}{pass}",
                   "n/a": r"\textcolor{gray}{n/a}"}.get(status, escape(status)))


def _status(r: dict) -> Markup:
    return Markup(r"\textcolor{failred}{\textbf{failed}}") if r["status"] != "ok" else Markup("ok")


def percentile_rule() -> list[str]:
    """The smallest n that prints each percentile, for the methodology section."""
    out = []
    for q in stats.QUANTILES:
        n = 1
        while not stats.printable(n, q):
            n += 1
        out.append(f"p{round(100 * q)} needs n >= {n}")
    return out
