"""Page 1 of the report: what to deploy, by how much and how sure.

A header (model pair, engine and build, hardware, run, commit, date); per concurrency (and sampling setting, CUDA
graphs switch) every arm's output throughput and its TPOT/TTFT p50 and p99, its ratio to AR and to the best linear
arm with the interval and the verdict the interval supports; one recommendation per group; a box of regressions
(a speculative arm slower than AR, a tree slower than its chain or linear arm); a box of failed checks; and the
correctness of the run in one line. Every ratio is arm over reference in output throughput, or in an open-loop run
the reference's mean TPOT over the arm's (analysis/estimate/compare.py): higher is better."""

from __future__ import annotations

import numpy as np
import pandas as pd
from markupsafe import Markup

from analysis import recommend as recommend_rule
from analysis.estimate import goodput, rates, standings, stats
from analysis.read.manifest import twin
from analysis.triage import TIE
from ddbench.core import budget, settings
from report.tex import ci, escape, missing, num

MAX_LISTED = 8    # kinds of failed check listed on page 1; every failure is in the checks appendix


# ---- header ---------------------------------------------------------------------------------------------------

def _short(sha, n: int = 12) -> str:
    return str(sha)[:n] if sha else "not recorded"


def engine(a) -> str:
    """The engine and its build: kind, runtime, version; the fork's commit and its patches where the manifest has
    sglang_source."""
    p, m = a.run.profile, a.run.manifest
    if p.backend.kind == "external":   # what each server said of itself is in the box below the header
        return "external servers, not started by ddbench (each server's own description below)"
    out = f"{p.backend.kind} ({p.backend.runtime})" + (f" {p.backend.version}" if p.backend.version else "")
    # a manifest records the SGLang build a host carries even where the run served another engine
    src = (m.model_extra or {}).get("sglang_source") or {} if p.backend.kind == "sglang" else {}
    build = src.get("source") or {}
    if build:
        repo = str(build.get("repo", "")).removeprefix("https://github.com/") or "fork"
        picks = [_short(x.get("commit"), 9) for x in build.get("cherry_picks") or []]
        patches = [str(x.get("file", "")).rsplit("/", 1)[-1].removesuffix(".patch")
                   for x in build.get("patches") or []]
        out += (f"; build {repo} @ {_short(build.get('commit'), 9)}"
                + (f" + cherry-pick {', '.join(picks)}" if picks else "")
                + (f" + {len(patches)} patch{'es' if len(patches) != 1 else ''} ({', '.join(patches)})"
                   if patches else "")
                + (f", head {_short(build.get('head'), 9)}" if build.get("head") else ""))
    return out


def hardware(a) -> str:
    host = a.run.manifest.host
    if a.run.profile.backend.kind == "external":   # the host ddbench ran on is the load generator's alone
        return Markup(f"load generator's host: {escape(host.cpu or 'CPU not recorded')}, {host.cores or '?'} cores"
                      + (f", {len(host.gpus)} GPU(s)" if host.gpus else "")
                      + "; the servers' hardware is theirs, as each described itself below")
    names = [str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in host.gpus]
    if names:
        counts = pd.Series(names).value_counts()
        gpus = ", ".join(f"{n} $\\times$ {escape(name)}" for name, n in counts.items())
        return Markup(gpus + (f" (driver {escape(host.driver)})" if host.driver else "")
                      + f"; {escape(host.cpu or 'CPU not recorded')}, {host.cores or '?'} cores")
    return Markup(f"CPU only: {escape(host.cpu or 'not recorded')}, {host.cores or '?'} cores")


def twin_text(m) -> str | None:
    """What a twin run's model is, for a reader who did not build it (None: not a twin)."""
    t = twin(m)
    if t is None:
        return None
    return (f"a synthetic {t.get('shape', '?')}-shaped twin (refengine/twin.py, seed {t.get('seed', '?')}, "
            f"{t.get('dtype', '?')}) of the shipped pair, not the real model: acceptance is the pair's, each step's "
            f"cost the shape's; its zero o_proj, down_proj and most of its LM head draw less power, so verify steps "
            f"of 256-1024 rows (C=32) run up to about 5% cheaper than a dense model's")


# The twin's zero o_proj, down_proj and most of its LM head draw less power: timed on the H200, a verify of 32 rows
# or fewer cost what a dense Qwen3-8B's does, of 256-1024 rows about 5% less, of 4096 rows 8% less
DISCOUNT_ROWS = 256


def twin_discount(a, g: dict) -> str:
    """For a twin run, at a level whose widest verify reaches DISCOUNT_ROWS: how much its verifies flatter the
    speculative arms over AR; otherwise nothing."""
    if twin(a.run.manifest) is None:
        return ""
    rows = g["c"] * max((a.run.profile.arm(x).verify_width for x in g["rows"]["arm"]), default=0)
    if rows < DISCOUNT_ROWS:
        return ""
    return (f" On the twin a verify of up to {rows} rows runs up to about 5\\% cheaper than a dense model's, so the "
            f"speculative arms' ratios over AR here read up to 5\\% high.")


def header(a) -> list[tuple[str, Markup]]:
    p, m = a.run.profile, a.run.manifest
    pair = f"target {p.models.target or 'not named'}, drafter {p.models.drafter or 'none'}"
    if (twin_line := twin_text(m)) is not None:
        pair = f"{pair}: {twin_line}"
    commit = _short(m.git.sha) + (" (dirty tree)" if m.git.dirty else "")
    started = str(m.started or "not recorded").replace("T", " ")[:19]
    return [("model pair", Markup(escape(pair))), ("engine and build", Markup(escape(engine(a)))),
            ("hardware", hardware(a)),
            ("run", Markup(f"\\texttt{{{escape(a.run.path.name)}}}, profile \\texttt{{{escape(p.name)}}}")),
            ("commit", Markup(f"\\texttt{{{escape(commit)}}}")), ("date", Markup(escape(started + " UTC")))] + \
        ([("stopped" if resolved(a) else "cut short", Markup(f"\\textbf{{{escape(cut)}}}"))]
         if (cut := cut_short(a)) else [])


def resolved(a) -> bool:
    """Whether a resolver (load.resolve) chose the run's stretches."""
    return budget.resolved((a.run.manifest.model_extra or {}).get("budget"))


def cut_short(a) -> str | None:
    """The repetitions that ran of those planned, when fewer did (a time budget's cut, a slice of device time
    awaiting --resume), or how a resolver (load.resolve) spent the sweep; None when all ran as planned."""
    planned, cells = a.run.profile.load.repetitions, a.cells
    ran = int(cells.loc[cells["status"] == "ok", "repetition"].nunique()) if len(cells) else 0
    stopped = budget.text((a.run.manifest.model_extra or {}).get("budget"))
    if resolved(a):
        return stopped
    if ran >= planned and not stopped:
        return None
    return f"{ran} of {planned} planned repetitions ran" + (f": {stopped}" if stopped else
                                                            " (the rest run with reproduce --resume RUN_DIR)")


# ---- the deployment table ---------------------------------------------------------------------------------------

def groups(a) -> list[dict]:
    """Per (sampling setting, CUDA graphs switch, C): the arms measured there, as the recommendation groups them."""
    return recommend_rule.groups(a)


def _percentiles(a, arm: str, c: int) -> dict[str, Markup]:
    """TTFT and TPOT p50 and p99 in ms over the measured requests of the arm's finished cells at C, pooled over
    repetitions; a dagger where n is too small for the percentile."""
    r = a.requests
    ok = a.cells[(a.cells["arm"] == arm) & (a.cells["concurrency"] == c) & (a.cells["status"] == "ok")]
    m = r[(r["arm"] == arm) & (r["concurrency"] == c) & r["ok"].astype(bool) & ~r["warmup"].astype(bool)
          & r["repetition"].isin(ok["repetition"])]
    if "in_window" in m:
        m = m[m["in_window"].astype(bool)]
    out = {}
    for col in ("tpot_s", "ttft_s"):
        x = m[col].dropna().to_numpy(dtype=float)
        for q in (0.5, 0.99):
            key = f"{col[:4]}_p{round(100 * q)}"
            out[key] = (num(1e3 * np.quantile(x, q), 1 if col == "ttft_s" else 2) if stats.printable(len(x), q)
                        else Markup(r"$\dagger$"))
    return out


def _ar(a, arm: str, c: int) -> dict | None:
    """The arm's speedups row against deployable ar at C (analysis matched the ar arm), or None."""
    s = a.speedups
    if s.empty:
        return None
    deployable = ~s["baseline"].map(lambda b: is_ablation(a, b))
    row = s[(s["arm"] == arm) & (s["baseline_kind"] == "ar") & (s["concurrency"] == c) & deployable]
    return row.iloc[0].to_dict() if len(row) else None


def _vs(a, arm: str, c: int) -> dict | None:
    """An ablation arm's row against its deployable baseline at C, or None."""
    s = a.speedups
    row = s[(s["arm"] == arm) & (s["concurrency"] == c)] if len(s) else s
    return row.iloc[0].to_dict() if len(row) else None


def ablated(s: pd.DataFrame) -> pd.Series:
    """Rows of the speedups table that involve an ablation arm (ar-no-overlap): shown, never the headline."""
    return s["ablation"].fillna(False).astype(bool) if "ablation" in s else pd.Series(False, index=s.index)


def is_ablation(a, arm: str) -> bool:
    return bool(a.run.profile.arm(arm).ablation)


def verdict_word(v: str) -> str:
    return {"faster": "faster", "slower": "slower", "within noise": "within noise"}.get(v, v or "not compared")


def times(x, lo, hi, verdict: str, of: str) -> str:
    """'2.15$\\times$ AR (95\\% CI 2.14--2.16, faster)': a ratio against a reference, its interval and verdict."""
    return f"{num(x, 2)}$\\times$ {of} (95\\% CI {ci(lo, hi, 2) or 'none'}, {verdict_word(verdict)})"


def ratio_cell(x, lo, hi, verdict: str) -> Markup:
    """'1.23 (1.10--1.35) faster': the verdict is what the interval says, never more."""
    if missing(x):
        return Markup("--")
    band = ci(lo, hi, 2)
    word = verdict_word(verdict)
    word = Markup(f"\\textbf{{{word}}}") if word in ("faster", "slower") else Markup(escape(word))
    return Markup(f"{num(x, 2)}" + (f" ({band})" if band else "") + f" {word}")


def best_linear(a, g: dict) -> str | None:
    return standings.best_linear(a, g["rows"])


def rows(a, g: dict, pick: str | None) -> list[list[Markup]]:
    kinds, c = a.kinds, g["c"]
    lin = best_linear(a, g)
    out = []
    for r in g["rows"].itertuples():
        kind = kinds.get(r.arm)
        p = _percentiles(a, r.arm, c)
        if kind == "ar" and is_ablation(a, r.arm):
            sp = _vs(a, r.arm, c)
            vs_ar = (ratio_cell(sp["speedup"], sp["speedup_lo"], sp["speedup_hi"], sp["verdict"]) if sp else
                     Markup("--"))
        elif kind == "ar":
            vs_ar = Markup("1 (reference)")
        else:
            sp = _ar(a, r.arm, c)
            vs_ar = (ratio_cell(sp["speedup"], sp["speedup_lo"], sp["speedup_hi"], sp["verdict"]) if sp else
                     Markup("no ar arm"))
        if lin is None:
            vs_lin = Markup("--")
        elif r.arm == lin:
            vs_lin = Markup("1 (best linear)")
        else:
            pr = standings.pair_ratio(a, r.arm, lin, c)
            vs_lin = ratio_cell(pr["speedup"], pr["speedup_lo"], pr["speedup_hi"], pr["verdict"])
        shown = escape(_shown(a, r.arm)) + (Markup(" (ablation)") if is_ablation(a, r.arm) else "")
        name = Markup(f"\\textbf{{{shown}}}$^\\star$") if r.arm == pick else Markup(shown)
        out.append([name, num(r.throughput, 1), p["tpot_p50"], p["tpot_p99"], p["ttft_p50"], p["ttft_p99"],
                    vs_ar, vs_lin])
    return out


def deployment_table(a, gs: list[dict], picks: dict[str, str | None]) -> Markup:
    """One longtable (it may run onto page 2: page 1 keeps the recommendation and the boxes above it), a group
    row per C (and sampling setting, graphs switch); arms by their base name where the group names the setting."""
    head = (r"arm & tok/s & \multicolumn{2}{c}{TPOT ms} & \multicolumn{2}{c}{TTFT ms} & $\times$ AR (95\% CI) "
            r"& $\times$ best linear (95\% CI) \\" "\n"
            r" & & p50 & p99 & p50 & p99 & & \\")
    body = []
    for g in gs:
        lin = best_linear(a, g)
        body.append(r"\midrule" + "\n" + rf"\multicolumn{{8}}{{@{{}}l}}{{\textit{{{escape(g['title'])}}}"
                    + (f" (best linear: {escape(_shown(a, lin))})" if lin else "") + r"}\\*")
        for row in rows(a, g, picks.get(g["title"])):
            body.append(" & ".join(str(x) for x in row) + r" \\")
    return Markup(r"\begin{longtable}{@{}lrrrrrll@{}}" "\n" r"\toprule" "\n" + head + "\n" r"\midrule\endhead"
                  "\n" r"\multicolumn{8}{r}{\emph{continued on the next page}}\\\endfoot" "\n"
                  r"\bottomrule\endlastfoot" "\n" + "\n".join(body) + "\n" r"\end{longtable}")


def _shown(a, arm: str) -> str:
    """An arm as the table prints it: a measured arm ('<arm>@<setting>') by its base arm where settings vary (the
    group's title names the setting)."""
    return a.run.profile.arm(arm).server


# ---- one recommendation per group ----------------------------------------------------------------------------

def recommend(a, g: dict) -> tuple[str | None, Markup]:
    """(the arm to deploy, the sentence), from the analysis' one rule (analysis.recommend): the simplest eligible
    arm that no eligible arm beats at 95% confidence; every arm with more throughput says why it was passed over."""
    rec = a.recommendation
    rows = rec[rec["group"] == g["title"]] if len(rec) else rec
    c, title = g["c"], escape(g["title"])
    picked = rows[rows["pick"].astype(bool)] if len(rows) else rows
    if picked.empty:
        why = "; ".join(f"{escape(_shown(a, r.arm))}: {escape(r.why_not or 'beaten by ' + r.beaten_by)}"
                        for r in rows.itertuples()) if len(rows) else "no arm finished"
        return None, Markup(f"{title}: \\textbf{{no recommendation}}: no arm passes its own checks unbeaten ({why}).")
    pick = picked.iloc[0]
    sp = _ar(a, pick["arm"], c)
    vs = (", " + times(sp["speedup"], sp["speedup_lo"], sp["speedup_hi"], sp["verdict"], "AR") if sp else "")
    what = " (no speculation)" if pick["kind"] == "ar" else ""
    lead = (f"{title}: \\textbf{{deploy {escape(_shown(a, pick['arm']))}}}{what}: {num(pick['throughput'], 1)} tok/s"
            f"{vs}")
    passed = []
    for r in rows[rows["throughput"] > pick["throughput"]].sort_values("throughput", ascending=False).itertuples():
        name = escape(_shown(a, r.arm))
        pr = standings.pair_ratio(a, r.arm, pick["arm"], c)
        band = ci(pr["speedup_lo"], pr["speedup_hi"], 2)
        ratio = f"{num(pr['speedup'], 2)}$\\times$" + (f", 95\\% CI {band}" if band else ", no interval")
        if not r.eligible:
            passed.append(f"{name} is {ratio}, but {escape(r.why_not)}: not recommended")
        else:
            passed.append(f"{name} is within noise of it ({ratio}) and not simpler")
    tail = "; " + "; ".join(passed[:3]) if passed else ""
    if not passed and len(rows) > 1:
        tail = "; no eligible arm beats it at 95\\% confidence"
    return str(pick["arm"]), Markup(lead + tail + "." + twin_discount(a, g))


# ---- regressions -------------------------------------------------------------------------------------------------

def step_cost(r) -> str:
    """A decomposition row's step factor as cost: 'its step costs N% more (95% CI lo–hi)'. The analysis' step-time
    ratio is the reference's step over the arm's; its inverse is the arm's step over the reference's."""
    x, lo, hi = 1 / r["step_time_ratio"], 1 / r["step_time_ratio_hi"], 1 / r["step_time_ratio_lo"]
    if missing(x):
        return ""
    more = x >= 1
    pct = num(100 * abs(x - 1), 0)
    band = (f", 95\\% CI {num(100 * (lo - 1), 0)} to {num(100 * (hi - 1), 0)}\\%"
            if not (missing(lo) or missing(hi)) else "")
    return f"its step costs {pct}\\% {'more' if more else 'less'}{band}"


MAX_REGRESSIONS = 8   # lines in the box; the rest are in the headline table


def _title(a, arm: str, c: int) -> str:
    """The deployment table's group of an arm at C, as its title says it."""
    return standings.group_title(a, arm, c) if len(a.summary) else f"C={c}"


def _short_ratio(x, lo, hi) -> str:
    band = ci(lo, hi, 2)
    return f"{num(x, 2)}$\\times$" + (f" ({band})" if band else "")


def regressions(a) -> list[Markup]:
    """A speculative arm slower than AR (one line per group), a tree slower than its chain or linear arm (one line
    each, with where the loss comes from: τ and the step's cost), at 95% confidence."""
    s, kinds = a.speedups, a.kinds
    if s.empty:
        return []
    slow = s[(s["verdict"] == "slower") & ~ablated(s)]
    out: list[Markup] = []
    vs_ar = slow[slow["baseline_kind"] == "ar"]
    by_group: dict[str, list] = {}
    for r in vs_ar.itertuples():
        by_group.setdefault(_title(a, r.arm, r.concurrency), []).append(r)
    for title, rs in by_group.items():
        listed = ", ".join(f"{escape(_shown(a, r.arm))} {_short_ratio(r.speedup, r.speedup_lo, r.speedup_hi)}"
                           + (" (saturated)" if recommend_rule.saturated(a, r.arm) is not None else "") for r in rs)
        out.append(Markup(f"slower than AR at {escape(title)}: {listed}" + _caveat(a, rs[0].arm) + "."))
    d = a.decomposition
    trees = slow[(slow["arm"].map(kinds) == "tree") & slow["baseline_kind"].isin(("chain", "linear"))]
    lines = []
    for r in trees.itertuples():
        why = ""
        if len(d):
            m = d[(d["arm"] == r.arm) & (d["reference"] == r.baseline) & (d["concurrency"] == r.concurrency)]
            if len(m):
                row = m.iloc[0]
                why = (f": it accepts {num(row['tau_ratio'], 2)}$\\times$ the tokens per step and "
                       f"{step_cost(row)}")
        where = escape(_title(a, r.arm, r.concurrency))
        lines.append(Markup(f"{escape(_shown(a, r.arm))} / {escape(_shown(a, r.baseline))} at {where} "
                            f"$=$ \\textbf{{{num(r.speedup, 2)}$\\times$}} (95\\% CI "
                            f"{ci(r.speedup_lo, r.speedup_hi, 2)}){why}."))
    room = max(MAX_REGRESSIONS - len(out), 2)
    out += lines[:room]
    if len(lines) > room:
        out.append(Markup(f"and {len(lines) - room} more tree regressions in the headline table (Section 2)."))
    return out


def _caveat(a, arm: str) -> str:
    """At T>0 with top-p on the reference engine a speculative arm's loss to AR is flagged as the engine's: it sorts
    the whole vocabulary for top-p at every verified node (refengine/sampling.py), where AR sorts once per token."""
    p = a.run.profile
    st = p.sampling_for(arm)
    if p.backend.kind != "refengine" or st.greedy or st.top_p >= 1:
        return ""
    where = "; Section~\\ref{sec:temperature}" if len(p.workload.settings()) > 1 else ""
    return (" (\\textbf{engine artifact}: with top-p the reference engine sorts the vocabulary at every verified "
            f"node, where AR sorts once per token: this engine's sampling cost, not speculation's{where})")


# ---- failed checks and correctness ----------------------------------------------------------------------------

def failed_checks(a) -> tuple[int, int, list[Markup]]:
    """The failed checks, one line per kind of check: how many, where (the first scopes), one piece of evidence."""
    ch = a.checks
    bad = ch[ch["status"] == "fail"]
    items = []
    for check, g in bad.groupby("check", sort=False):
        scopes = list(dict.fromkeys(g["scope"].astype(str)))
        where = ", ".join(scopes[:3]) + (f" and {len(scopes) - 3} more" if len(scopes) > 3 else "")
        items.append((check, len(g), where, g["evidence"].iloc[0]))
    # with several kinds, one short line each; with one or two, an example of the evidence too
    items = [Markup(f"\\textbf{{{escape(c)}}}: {n} failed ({escape(w)})"
                    + (f"; e.g. {escape(_clip(e, 160))}" if len(items) <= 2 else "")) for c, n, w, e in items]
    if len(items) > MAX_LISTED:
        more = Markup(f"and {len(items) - MAX_LISTED} more kinds (Appendix~\\ref{{app:checks}})")
        items = items[:MAX_LISTED] + [more]
    return len(bad), len(ch), items


def _clip(text, n: int = 220) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."


def dtype(a) -> str:
    d = getattr(getattr(a.run.profile, "runtime", None), "dtype", None)
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(d), "numerical")


def correctness(a) -> Markup:
    """The lossless check in one line: failures, ties (with the largest tie margin), or why it does not apply."""
    kinds = a.kinds
    ll = a.lossless
    spec = ll[ll["arm"].map(kinds) != "ar"] if len(ll) else ll
    if a.lossless_note or spec.empty:
        return Markup(f"lossless at T=0: not checked ({escape(a.lossless_note or 'no speculative arm compared')})")
    outputs = int(spec["compared"].sum())
    t = a.triage
    if (spec["match_rate"] == 1).all():
        return Markup(f"lossless: 0 failures, 0 ties (all {outputs} speculative outputs identical to AR's)")
    if t is None or t.note or t.counts.empty:
        why = f" ({escape(t.note)})" if t is not None and t.note else ""
        return Markup(f"lossless: not established, {outputs - int(spec['exact'].sum())} of {outputs} outputs "
                      f"differ from AR's and were not triaged{why}")
    cnt = t.counts[(t.counts["comparison"] == "lossless") & t.counts["arm"].isin(list(spec["arm"]))]
    ties, bad = int(cnt["ties"].sum()), int(cnt["failures"].sum())
    div = t.divergences
    tie_margin = (div.loc[(div["verdict"] == TIE) & (div["comparison"] == "lossless"), "margin"].max()
                  if len(div) and "verdict" in div else float("nan"))
    largest = f" (largest margin {num(tie_margin, 2)})" if not missing(tie_margin) else ""
    word = "\\textbf{\\textcolor{failred}{LOSSY}}" if bad else "lossless"
    return Markup(f"{word}: {bad} failure{'s' if bad != 1 else ''}, {ties} {dtype(a)} tie{'s' if ties != 1 else ''}"
                  f"{largest} over {outputs} speculative outputs; the raw exact-match rate is in "
                  f"Appendix~\\ref{{app:exact}}")


# ---- the page --------------------------------------------------------------------------------------------------

def goodput_lines(a) -> list[Markup]:
    """Per group (C, and sampling setting or offered rate where they vary), when the profile sets an SLO: the arm
    with the most goodput, its share of requests that met the SLO, and its goodput over deployable AR's with the
    interval."""
    if a.run.profile.slo is None:
        return []
    if a.goodput is None or a.goodput.empty:
        return [Markup(escape(a.slo_text))] if a.slo_text else []
    s = goodput.summary(a.goodput)
    out = []
    for g in groups(a):
        c, arms = g["c"], [x for x in g["rows"]["arm"] if not is_ablation(a, x)]
        at = s[(s["concurrency"] == c) & s["arm"].isin(arms)]
        if at.empty or not (at["goodput"] > 0).any():
            out.append(Markup(f"{g['title']}: no arm's request met the SLO" if len(at) else f"{g['title']}: no cell"))
            continue
        best = at.loc[at["goodput"].idxmax()]
        text = (f"{g['title']}: most goodput \\texttt{{{escape(_shown(a, best['arm']))}}}, {best['goodput']:.2f} req/s "
                f"({100 * best['slo_share']:.0f}\\% of requests met the SLO)")
        ar = next((x for x in arms if a.run.profile.arm(x).kind == "ar"), None)
        r = a.goodput_ratios
        row = r[(r["arm"] == best["arm"]) & (r["baseline"] == ar) & (r["concurrency"] == c)] if ar else r.iloc[:0]
        if len(row) and np.isfinite(row.iloc[0]["goodput_ratio"]):
            x = row.iloc[0]
            text += "; " + times(x["goodput_ratio"], x["goodput_ratio_lo"], x["goodput_ratio_hi"],
                                 x["goodput_verdict"], "AR's goodput")
        elif len(row):
            text += f"; against AR: {escape(row.iloc[0]['goodput_verdict'])}"
        out.append(Markup(text))
    return out


def saturation_lines(a) -> list[Markup]:
    """A rate sweep's arms, one clause each: the offered rate from which each fell behind (served under 95% of
    the arrivals), or that it kept up at every rate; [] in closed loop."""
    r = a.rates
    if r is None or r.empty:
        return []
    out = []
    for base, d in r.groupby("base", sort=False):
        d = d.sort_values("offered_rate")
        sat = d[d["saturated"].astype(bool)]
        top = f"{d['offered_rate'].max():g}"
        if sat.empty:
            out.append(Markup(f"\\texttt{{{escape(base)}}} kept up at every offered rate (to {top} req/s)"))
            continue
        served = ", ".join(f"{100 * x.served:.0f}\\% at {x.offered_rate:g}" for x in sat.itertuples())
        out.append(Markup(f"\\texttt{{{escape(base)}}} \\textbf{{saturated from {rates.first_saturated(d):g} "
                          f"req/s}} (served {served}): not recommended there"))
    return out


def target_lines(a) -> list[Markup]:
    """Each of the profile's targets, one line: at every level the MDE reached against the one asked, met or open
    (analysis/estimate/targets.py). Nothing where the analysis has none (a run with no comparison to make)."""
    t = getattr(a, "targets", None)
    if t is None or not len(t):
        return []
    out = []
    for name, d in t.groupby("target", sort=False):
        parts = []
        for r in d.itertuples():
            vs = f" vs \\texttt{{{escape(r.baseline)}}}" if r.baseline and not name.endswith(f"/ {r.baseline}") else ""
            got = (rf"{num(100 * r.mde, 1)}\% ({escape(r.estimate)})" if np.isfinite(r.mde) else escape(r.note))
            word = "met" if r.met else "\\textcolor{failred}{open}"
            parts.append(rf"C={int(r.concurrency)}{vs}: {got} against {num(100 * r.target_mde, 1)}\%, {word}")
        out.append(Markup(f"\\texttt{{{escape(name)}}}: " + "; ".join(parts)))
    return out


def context(a) -> dict:
    gs = groups(a)
    recs = [recommend(a, g) for g in gs]
    picks = {g["title"]: pick for g, (pick, _) in zip(gs, recs, strict=True)}
    n_bad, n_checks, failed = failed_checks(a)
    recorded = (a.run.manifest.model_extra or {}).get("arm_settings") or {}   # none before runs recorded it
    return {"header": header(a), "settings": settings.differing_lines(recorded),
            "table": deployment_table(a, gs, picks) if gs else Markup(r"\emph{(no arm finished)}"),
            "recommendations": [s for _, s in recs], "regressions": regressions(a),
            "failed": failed, "failed_count": n_bad, "checks": n_checks, "correctness": correctness(a),
            "goodput": goodput_lines(a), "targets": target_lines(a),
            "targets_met": (f"{int(a.targets['met'].sum())} of {len(a.targets)}"
                            if len(getattr(a, "targets", [])) else ""),
            "saturation": Markup("; ").join(saturation_lines(a)),
            "slo": a.slo_text or (a.run.profile.slo.text if a.run.profile.slo else None),
            "metric": metric(a)}


def metric(a) -> str:
    """What every ratio of the run compares, as page 1 names it."""
    if a.run.profile.load.mode == "open":
        return "mean TPOT at each offered rate (open loop), the reference's over the arm's"
    return "output throughput, the arm's over the reference's"
