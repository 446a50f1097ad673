"""The report's tables: analysis DataFrames shaped for reading, typeset by pylatex as booktabs
tabulars and longtables. Every cell is TeX already (escaped strings, formatted numbers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from markupsafe import Markup
from pylatex import LongTable, MultiColumn, NoEscape, Tabular

from analysis.estimate import stats
from analysis.outcome import Analysis
from analysis.trust import stability
from report.tex import drift_pct, escape, missing, num, with_ci

MAX_BOXED_ROWS = 40    # rows a boxed tabular may have; a longer table is a longtable
MAX_PORTRAIT_ROWS = 30  # a wide table (the headline ratios) longer than this turns to a landscape page


def latex(df: pd.DataFrame, align: str | None = None, long: bool = False) -> Markup:
    """booktabs tabular (or longtable) of a frame whose cells and headers are TeX. An align that does not
    match the frame's columns raises pylatex's TableRowSizeError here rather than breaking the build later."""
    if df.empty:
        return Markup(r"\emph{(none)}")
    long = long or len(df) > MAX_BOXED_ROWS   # a box cannot break across pages: past a page of rows it would be cut
    align = align or "l" + "r" * (len(df.columns) - 1)
    table = (LongTable if long else Tabular)(align, booktabs=True)
    # escape=False: the cells were escaped (or written as TeX) by whoever made them
    table.add_row(list(df.columns), escape=False)
    table.add_hline()
    if long:
        _page_breaks(table)
    for row in df.itertuples(index=False, name=None):
        table.add_row(row, escape=False)
    return Markup(table.dumps()) if long else fit(Markup(table.dumps()))


def fit(tabular: Markup) -> Markup:
    """A tabular never wider than the text: scaled down to the line's width where it would run past it (a
    longtable cannot be boxed: its columns must fit by their widths)."""
    return Markup(r"\adjustbox{max width=\linewidth}{" + tabular + "}")


def _page_breaks(table: LongTable) -> None:
    """The header so far repeats on every page, and every page but the last says the table goes on."""
    table.end_table_header()
    table.add_hline()
    table.add_row([MultiColumn(table.width, align="r", data=NoEscape(r"\emph{continued on the next page}"))],
                  escape=False)
    table.end_table_footer()
    table.end_table_last_footer()  # empty: the last page ends on the bottom rule alone


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
    # a paragraph, not a line break: after a longtable there is no line to end
    note = Markup(r"\par\noindent$\dagger$ n too small: a percentile $q$ needs $n(1-q)\ge 10$ samples.")
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


def _pct(x, digits: int = 1) -> Markup:
    return Markup("--") if missing(x) else num(100 * x, digits)


def _verdict(r: dict) -> Markup:
    v = r.get("verdict")
    if v == "within noise" and r.get("between_sd", 0) > 0:
        # more pairs would not resolve it: the runs' spread does not shrink with them
        own = r.get("within_verdict")
        return Markup("within noise of runs" + (f" ({escape(own)} in this one)" if own not in (None, v) else ""))
    if v == "within noise":
        n = r.get("n_to_resolve")
        more = (f"; $\\approx${int(n)} pairs would resolve it" if not missing(n) and n > r["pairs"] else
                "; beyond 1000 pairs" if missing(n) else "")
        return Markup(f"within noise{more}")
    return Markup(escape(v or "--"))


def speedups(a: Analysis, c: int | None = None, kinds: tuple[str, ...] | None = None) -> Markup:
    """Ratios from repetition pairs (geometric mean, t-interval on the log scale), the sign test, each
    side's noise sd and the minimum detectable effect; the pooled request bootstrap as a secondary column."""
    s = a.speedups
    if s.empty:
        return latex(s)
    if c is not None:
        s = s[s["concurrency"] == c]
    if kinds is not None:
        s = s[s["baseline_kind"].isin(kinds)]
    rows = [[escape(r["arm"]), escape(r["baseline"]), str(r["concurrency"]),
             with_ci(r["speedup"], r["speedup_lo"], r["speedup_hi"], 3), _verdict(r), _between(r), str(r["pairs"]),
             f"{_pct(r['sd_arm'])} / {_pct(r['sd_baseline'])}", _pct(r["mde"]),
             _pct(r.get("drift_bias"), 2), with_ci(r["pooled_speedup"], r["boot_lo"], r["boot_hi"], 2)]
            for r in s.to_dict("records")]
    # no sign test beside the verdict: the verdict follows the interval, and with few pairs the sign test cannot
    # reach p < 0.05 at all (tables/speedups.csv keeps it)
    df = pd.DataFrame(rows, columns=_h("arm", "over", "C", r"ratio [95\% CI]", "verdict",
                                       r"pairs alone (runs' sd \%)", "pairs", r"noise sd \%", r"MDE \%",
                                       r"drift \%", r"pooled [req.\ boot.]"))
    if len(df) > MAX_PORTRAIT_ROWS:   # too long for one page and too wide to break in portrait: a landscape page
        return Markup(r"\begin{landscape}") + latex(df, "llrrp{2.6cm}rrrrrr", long=True) + Markup(r"\end{landscape}")
    return latex(df, "llrrp{2.2cm}rrrrrr")


def _between(r: dict) -> Markup:
    """The repetitions' own interval and the between-run sd that widened it into the headline one (compare.
    with_between_runs), where other runs of the plan widened it; '--' where the two intervals are one."""
    sd = r.get("between_sd")
    if missing(sd) or sd <= 0:
        return Markup("--")
    return Markup(f"{num(r['within_lo'], 3)}--{num(r['within_hi'], 3)} ({num(100 * sd, 1)})")


def _signed(x: float, digits: int = 0) -> str:
    return ("+" if x >= 0 else "$-$") + str(num(abs(x), digits))


def step_cost(r) -> Markup:
    """The arm's verify step over the reference's as a cost: '+12% [+5 to +20]' (the step costs 12% more). The
    analysis' step_time_ratio is the reference's step over the arm's (so that the throughput ratio is τ ratio ×
    step-time ratio); its inverse reads forwards."""
    g = r.get if isinstance(r, dict) else (lambda k: getattr(r, k))
    x, lo, hi = g("step_time_ratio"), g("step_time_ratio_hi"), g("step_time_ratio_lo")
    if missing(x) or not x:
        return Markup("--")
    out = _signed(100 * (1 / x - 1)) + r"\%"
    if not (missing(lo) or missing(hi)) and lo and hi:
        out += f" [{_signed(100 * (1 / lo - 1))} to {_signed(100 * (1 / hi - 1))}]"
    return Markup(out)


def decomposition(a: Analysis) -> Markup:
    d = a.decomposition
    rows = [[escape(r["arm"]), escape(r["reference"]), str(r["concurrency"]), str(r["pairs"]),
             with_ci(r["throughput_ratio"], r["throughput_ratio_lo"], r["throughput_ratio_hi"], 3),
             with_ci(r["tau_ratio"], r["tau_ratio_lo"], r["tau_ratio_hi"], 3), step_cost(r),
             num(r["tau_arm"], 2), num(r["tau_reference"], 2), num(r["step_ms_arm"], 2), num(r["step_ms_reference"], 2)]
            for r in d.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "over", "C", "pairs", r"throughput [95\% CI]",
                                       r"$=\tau$ ratio [95\% CI]", r"$/$ step cost [95\% CI]",
                                       r"$\tau$", r"$\tau$ ref.", "step ms", "step ms ref."))
    return latex(df, "llrrrrrrrrr")


def gpu_busy(a: Analysis) -> Markup | None:
    """Each arm's GPU-busy share per concurrency (mean over repetitions), or None without the samples."""
    b = a.gpu_band
    if b.empty or "gpu_busy_pct" not in b or b["gpu_busy_pct"].isna().all():
        return None
    if (a.cells["window_source"] == "busy").any():
        return None   # rounds: the arms share each stretch's telemetry; the gpu-time diagnostic splits them
    t = b.groupby(["arm", "concurrency"])["gpu_busy_pct"].mean().unstack("concurrency")
    arms = [x.id for x in a.run.profile.measured_arms() if x.id in t.index]
    rows = [[escape(arm)] + [num(t.loc[arm, c], 0) for c in t.columns] for arm in arms]
    return latex(pd.DataFrame(rows, columns=_h("arm", *(f"C={c}" for c in t.columns))), "l" + "r" * len(t.columns))


def rounds(a: Analysis) -> Markup | None:
    """Each ratio from the rounds (block bootstrap over consecutive rounds) beside the same ratio from the
    repetition pairs, or None for a run of whole cells."""
    r = a.rounds
    if r is None or r.empty:
        return None
    s = a.speedups.set_index(["arm", "baseline", "concurrency"])
    rows = []
    for x in r.sort_values(["concurrency", "baseline", "arm"]).itertuples():
        key = (x.arm, x.baseline, x.concurrency)
        rep = s.loc[key] if key in s.index else None
        rows.append([escape(x.arm), escape(x.baseline), str(x.concurrency), str(x.rounds),
                     with_ci(x.speedup, x.speedup_lo, x.speedup_hi, 3), num(100 * x.mde, 1), num(x.lag1, 2),
                     str(x.method)[:1] if isinstance(x.method, str) else "--",
                     with_ci(rep["speedup"], rep["speedup_lo"], rep["speedup_hi"], 3) if rep is not None else "--",
                     num(100 * rep["mde"], 1) if rep is not None else "--"])
    cols = _h("arm", "over", "C", "rounds", r"rounds: ratio [95\% CI]", r"MDE \%", "lag-1", "method",
              r"repetitions: ratio [95\% CI]", r"MDE \%")
    return latex(pd.DataFrame(rows, columns=cols), "llrrlrrclr", long=True)


def gpu_time(a: Analysis) -> Markup | None:
    """GPU and wall ms per output token per arm and C, from the gpu-time diagnostic, or None without one."""
    g = a.gpu_time
    if g is None or g.empty:
        return None
    rows = [[escape(x.arm), str(x.concurrency), str(x.tokens), num(x.gpu_ms_per_token, 3),
             num(x.measured_wall_ms_per_token, 3), num(100 * x.measured_gpu_share, 0), num(x.wall_ms_per_token, 3),
             num(x.profiler_slowdown, 2), escape(x.error or "")] for x in g.itertuples()]
    cols = _h("arm", "C", "tokens", "GPU ms/token", "wall ms/token", r"GPU busy \%", "profiled wall ms/token",
              "profiler slowdown", "error")
    return latex(pd.DataFrame(rows, columns=cols), "lrrrrrrrl")


def host_profile(a: Analysis) -> Markup | None:
    """Per arm and C: ms per step and the GPU's idle ms per step under the profiler, and the SGLang functions
    and innermost frames that held most of the idle time, from the host-profile diagnostic, or None."""
    h = a.host_profile
    if h is None or h.empty:
        return None
    rows = [[escape(x.arm), str(x.concurrency), str(x.steps), num(x.ms_per_step, 2), num(x.idle_ms_per_step, 2),
             num(100 * x.idle_share, 0), escape(x.top_sglang or x.error or ""), escape(x.top_frames)]
            for x in h.itertuples()]
    cols = _h("arm", "C", "steps", "ms/step", "GPU idle ms/step", r"idle \%", "SGLang functions (idle ms/step)",
              "innermost frames (idle ms/step)")
    return latex(pd.DataFrame(rows, columns=cols), r"lrrrrrp{5.2cm}p{5.2cm}", long=True)


def rate_wins(a: Analysis) -> list[Markup]:
    """One sentence per speculative arm of a rate sweep: the highest offered rate at which it beat AR, and where
    each saturated (analysis/estimate/rates.py); [] for a closed-loop run."""
    w = a.rate_wins
    if w is None or w.empty:
        return []

    def sat(q: float) -> str:
        return f"saturates from {q:g} req/s" if np.isfinite(q) else "kept up at every rate"

    out = []
    for r in w.itertuples():
        won = (f"beat {escape(r.baseline)} up to {r.highest_rate:g} req/s offered (TPOT {r.tpot_ratio:.2f}x "
               f"[{r.tpot_ratio_lo:.2f}, {r.tpot_ratio_hi:.2f}])" if np.isfinite(r.highest_rate)
               else f"beat {escape(r.baseline)} at none of the {r.rates} rates")
        out.append(Markup(f"{escape(r.arm)} {won}; it {sat(r.saturates_at)}, {escape(r.baseline)} "
                          f"{sat(r.baseline_saturates_at)}."))
    return out


def drift(a: Analysis) -> Markup:
    d = a.drift
    if d.empty:
        return latex(d)
    r = d.iloc[0].to_dict()
    over = (f"{drift_pct(r['over_run'])} [{drift_pct(r['over_run_lo'])} to {drift_pct(r['over_run_hi'])}]"
            if r["estimable"] else "too short to estimate")
    df = pd.DataFrame([[str(int(r["cells"])), str(int(r["groups"])), num(r["span_s"] / 60, 1), over]],
                      columns=_h("cells", "(arm, C) groups", "span min", r"drift over the span, \% [95\% CI]"))
    return latex(df, "rrrl")


def gpu_band(a: Analysis) -> Markup:
    b = a.gpu_band
    if b.empty:
        return Markup(r"\emph{(no GPU samples)}")
    out = b[b["outside"].astype(bool)]
    if out.empty:
        return Markup(f"All {len(b)} cells with GPU samples stayed inside the band.")
    rows = [[escape(r["arm"]), str(r["concurrency"]), str(r["repetition"]), escape(r["outside"]),
             num(r["sm_clock_mhz"], 0), num(r["power_w"], 0), escape(r["comparisons"] or "none")]
            for r in out.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "C", "rep", "outside", "SM MHz", "power W", "comparisons it touches"))
    return latex(df, "lrrlrrp{6cm}")


def host_cpu(a: Analysis) -> Markup:
    h = a.host_cpu
    why = stability.host_unmeasured(a.run.profile.backend.runtime, h)
    if why:
        return Markup(rf"\emph{{({escape(why)})}}")
    busy = h[h["busy"].astype(bool)]
    head = (f"median {num(h['foreign_cores'].median(), 2)} core(s) over {len(h)} cells, at most "
            f"{num(h['foreign_cores'].max(), 2)}, against a limit of {num(h['limit'].max(), 2)}. ")
    if busy.empty:
        return Markup(head + "No cell was flagged.")
    rows = [[escape(r["arm"]), str(r["concurrency"]), str(r["repetition"]), num(r["foreign_cores"], 2),
             escape(r["comparisons"] or "none")] for r in busy.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "C", "rep", "other work (cores)", "comparisons it touches"))
    return Markup(head + f"{len(busy)} cell(s) flagged:") + latex(df, "lrrrp{7cm}")


def schedule(a: Analysis) -> Markup:
    """The order the cells ran in, from their start times, as arm@C/rep runs."""
    c = a.cells.dropna(subset=["started_unix"]).sort_values("started_unix")
    items = [f"{r.arm}@{r.concurrency}/{r.repetition}" for r in c.itertuples()]
    return Markup(r", \allowbreak{}".join(escape(x) for x in items))


FEW = Markup(r"$^\ddagger$")    # a category with too few requests on a side


def categories(a: Analysis, kinds: tuple[str, ...] | None = None) -> Markup:
    """Per category: each arm's throughput in that category over its baseline's (ar, linear, chain: kinds picks
    which; compare.per_category: the category's request rate × the cell's occupancy), paired by repetition with the
    interval over the repetition pairs, the verdict and τ of both sides; a category with fewer than stats.MIN_TAIL
    requests on a side is kept and marked."""
    d = a.categories
    if kinds is not None and not d.empty:
        d = d[d["baseline_kind"].isin(kinds)]
    rows = [[escape(r["arm"]), escape(r["baseline"]), str(r["concurrency"]), escape(r["category"]),
             Markup(f"{r['n']} / {r['baseline_n']}") + (FEW if r["few"] else ""),
             with_ci(r["speedup"], r["speedup_lo"], r["speedup_hi"], 2),
             Markup(f"{num(r['tau'], 2)} / {num(r['baseline_tau'], 2)}"), escape(r["verdict"])]
            for r in d.to_dict("records")]
    df = pd.DataFrame(rows, columns=_h("arm", "over", "C", "category", "n / n(over)", r"ratio [95\% CI]",
                                       r"$\tau$ / $\tau$(over)", "verdict"))
    table = latex(df, "llrlrrrl", long=len(rows) > 30)
    if d.empty or not d["few"].astype(bool).any():
        return table
    return table + Markup(rf"\par\smallskip\noindent$\ddagger$ too few: under {stats.MIN_TAIL} requests on a side.")


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
    return latex(out, r"lp{3.6cm}p{3.2cm}p{8.4cm}", long=long)


def check_counts(df: pd.DataFrame) -> Markup:
    g = df.groupby("check", sort=False)["status"].value_counts().unstack(fill_value=0)
    rows = [[escape(name), str(r.get("pass", 0)), str(r.get("fail", 0)), str(r.get("n/a", 0))]
            for name, r in g.iterrows()]
    return latex(pd.DataFrame(rows, columns=_h("check", "passed", "failed", "n/a")), "p{11cm}rrr")


def checks_summary(df: pd.DataFrame) -> dict:
    """The checks appendix: per kind of check how many passed, failed or did not apply; every failure; and every
    reason a check did not apply, once, with the number of scopes it covers. Any check the analysis adds is read
    the same way (its label and scope as text, status, evidence); the full table is tables/checks.csv."""
    counts = check_counts(df) if len(df) else Markup(r"\emph{(no checks)}")
    bad = df[df["status"] == "fail"] if len(df) else df
    na = df[df["status"] == "n/a"] if len(df) else df
    reasons = []
    if len(na):
        for (check, why), g in na.groupby(["check", "evidence"], sort=False):
            scopes = list(dict.fromkeys(g["scope"].astype(str)))
            where = scopes[0] if len(scopes) == 1 else f"{len(scopes)} scopes, e.g. {scopes[0]}"
            reasons.append([escape(check), escape(why), escape(where)])
    na_table = (latex(pd.DataFrame(reasons, columns=_h("check", "why it does not apply", "where")),
                      r"p{4.2cm}p{8.4cm}p{3.6cm}", long=len(reasons) > 25) if reasons else None)
    return {"counts": counts, "failures": checks(bad) if len(bad) else None, "failed": len(bad),
            "na": na_table, "na_count": len(na), "total": len(df)}


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


def stage_cost(a: Analysis) -> Markup:
    """Per part of a DDTree step on SGLang (the fork's stage profiler): ms per verify round and its share."""
    d = a.stage_cost
    if d.empty:
        return latex(d)
    arms = list(dict.fromkeys(d["arm"]))
    rows = []
    for part in dict.fromkeys(d["part"]):
        cells = []
        for arm in arms:
            r = d[(d["arm"] == arm) & (d["part"] == part)]
            cells.append(Markup(f"{num(r['ms_per_round'].iloc[0], 3)} ({num(100 * r['share'].iloc[0], 0)}\\%)")
                         if len(r) else Markup("--"))
        rows.append([escape(part), *cells])
    total = [Markup(f"\\textbf{{{num(d[d['arm'] == arm]['ms_per_round'].sum(), 2)}}}") for arm in arms]
    rows.append([Markup(r"\textbf{profiled step}"), *total])
    tau = [num(d[d["arm"] == arm]["tau"].iloc[0], 2) for arm in arms]
    rows.append([Markup(r"$\tau$ of the diagnostic"), *tau])
    return latex(pd.DataFrame(rows, columns=_h("part", *(escape(x) for x in arms))), "l" + "r" * len(arms))


def goodput(a: Analysis) -> Markup | None:
    """Per arm and C under the profile's SLO: share of requests that met it, goodput, and the ratio over each
    baseline the speedups table compares it with; None without an SLO."""
    from analysis.estimate.goodput import summary

    if a.run.profile.slo is None or a.goodput is None or a.goodput.empty:
        return None
    s, r = summary(a.goodput), a.goodput_ratios
    rows = []
    for x in s.itertuples():
        over = r[(r["arm"] == x.arm) & (r["concurrency"] == x.concurrency)]
        ratios = "; ".join(f"{escape(y.baseline)} " + (with_ci(y.goodput_ratio, y.goodput_ratio_lo,
                                                                y.goodput_ratio_hi, 2)
                                                        if np.isfinite(y.goodput_ratio) else escape(y.goodput_verdict))
                           for y in over.itertuples()) or "--"
        rows.append([escape(x.arm), str(x.concurrency), num(100 * x.slo_share, 0), num(x.goodput, 2),
                     num(x.goodput_tokens, 1), Markup(ratios)])
    cols = _h("arm", "C", r"met \%", "req/s", "tok/s", r"goodput over [95\% CI]")
    return latex(pd.DataFrame(rows, columns=cols), "lrrrrl", long=True)


def warmups(a: Analysis) -> Markup | None:
    """Each warm-up run until stable: its windows' throughputs and when it held still; None without any."""
    w = a.warmups
    if w is None or w.empty:
        return None
    rows = [[escape(r.arm), str(r.concurrency), str(r.bring_up), escape(r.throughputs),
             f"after {r.stable_after_s:g} s" if r.stable else Markup(r"\textbf{not within its cap}")]
            for r in w.itertuples()]
    return latex(pd.DataFrame(rows, columns=_h("arm", "C", "bring-up", "windows, tok/s", "stable")), "lrrll",
                 long=True)


def prefill(a: Analysis) -> Markup | None:
    """At C=1, each ratio end to end beside the same ratio on decoding alone (the TPOT ratio: the baseline's time per
    output token after the first over the arm's), with each side's share of a request spent before its first token.
    Longer outputs move an end-to-end ratio towards the decode-only one; None where no C=1 ratio has a TPOT ratio."""
    s = a.speedups
    if s.empty or "tpot_ratio" not in s:
        return None
    s = s[(s["concurrency"] == 1) & s["tpot_ratio"].notna()]
    if s.empty:
        return None
    ok = a.cells[(a.cells["status"] == "ok") & (a.cells["concurrency"] == 1)]
    share = (ok.groupby("arm")["ttft_mean"].mean() / ok.groupby("arm")["e2e_mean"].mean()).to_dict()
    rows = [[escape(r.arm), escape(r.baseline), with_ci(r.speedup, r.speedup_lo, r.speedup_hi, 3),
             with_ci(r.tpot_ratio, r.tpot_ratio_lo, r.tpot_ratio_hi, 3),
             f"{num(100 * share.get(r.arm, np.nan), 0)} / {num(100 * share.get(r.baseline, np.nan), 0)}"]
            for r in s.itertuples()]
    cols = _h("arm", "over", r"end to end [95\% CI]", r"decoding alone [95\% CI]", r"before 1st token \%")
    return latex(pd.DataFrame(rows, columns=cols), "llrrr")
