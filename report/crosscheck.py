"""The report's cross-check section: two runs of one experiment on two backends, side by side.

Only numbers the analysis measured are stated; where τ differs by more than the tolerance the
text prints the gap and its interval and says that the cause was not measured."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from markupsafe import Markup

from analysis.outcome import Analysis
from analysis.trust.crosscheck import TAU_TOLERANCE, CrossCheck
from report.tables import latex
from report.tex import breakable, ci, escape, missing, num, with_ci

NAMES = {"sglang": "SGLang", "refengine": "reference engine"}
# why an arm's tau gap is left unjudged (analysis.trust.crosscheck sets tau_within_tolerance to None)
_UNJUDGED = ("the two runs' C=1 cells sent different prompt mixes, and $\\tau$ varies from prompt to prompt by "
             "more than the tolerance")
MARK = {"this": "A", "other": "B"}  # how the section names the two runs
TOL = f"{100 * TAU_TOLERANCE:.0f}\\%"  # the tau tolerance as the text prints it



def _pair_ids(r: dict, this: str = "arm", other: str = "arm_other") -> str:
    """An id in A, and in B where B calls the same thing otherwise (arms pair by what they are)."""
    theirs = r.get(other)
    return escape(r[this]) if not isinstance(theirs, str) or theirs == r[this] else escape(f"{r[this]} = {theirs}")


def _arm(r: dict) -> str:
    return _pair_ids(r)

def title(x: CrossCheck) -> str:
    kinds = list(x.sides["backend"])
    if kinds[0] != kinds[1]:
        return f"Cross-check: {NAMES.get(kinds[0], kinds[0])} vs {NAMES.get(kinds[1], kinds[1])}"
    return f"Cross-check: {x.label('this')} vs {x.label('other')}"


def context(a: Analysis) -> dict | None:
    """Everything the template's cross-check section needs, or None: no section without a cross-check."""
    x = a.crosscheck
    if x is None:
        return None
    sides = [{"name": "A" if r["side"] == "this" else "B", "label": r["label"],
              "what": "this run" if r["side"] == "this" else "compared with",
              "run": breakable(r["path"]), "version": _text(r["version"], "not recorded"),
              "image": breakable(_text(r["image"], "none")), "packages": _text(r["packages"], "not recorded"),
              "git": breakable(_text(r["git_sha"], "not recorded"))}
             for r in x.sides.to_dict("records")]
    return {"title": title(x), "twin": x.twin is not None, "sides": sides, "temperature": _temperature(x),
            "reading": reading(x),
            "caveats": caveats(x), "tau": tau_table(x), "agreement": agreement_table(x),
            "throughput": throughput_table(x), "verdicts": verdict_table(x), "verdict": verdict_sentence(x),
            "notes": x.notes, "tolerance": f"{100 * TAU_TOLERANCE:.0f}"}


def _pct(v, digits: int = 1) -> str:
    return "--" if missing(v) else f"{v:+.{digits}f}"


def tau_table(x: CrossCheck) -> Markup:
    rows = []
    for r in x.arms.to_dict("records"):
        gap = _pct(r["tau_gap_pct"])
        band = ci(r["tau_gap_pct_lo"], r["tau_gap_pct_hi"], 1)
        if band:
            gap += f" [{band}]"
        if r["tau_within_tolerance"] is False:
            gap = rf"\textbf{{{gap}}}"
        rows.append([_arm(r), with_ci(r["tau_this"], r["tau_this_lo"], r["tau_this_hi"], 2),
                     with_ci(r["tau_other"], r["tau_other_lo"], r["tau_other_hi"], 2), Markup(gap),
                     escape(_text(r.get("tau_basis"), "--")),
                     num(r["tau_server_this"], 2), num(r["tau_server_other"], 2),
                     f"{_int(r['n_this'])} / {_int(r['n_other'])}"])
    df = pd.DataFrame(rows, columns=[Markup(h) for h in (
        "arm", r"$\tau$ A [95\% CI]", r"$\tau$ B [95\% CI]", r"gap \% A/B$-$1 [95\% CI]", "from",
        r"server $\tau$ A", r"server $\tau$ B", "n A / n B")])
    return latex(df, "lrrrlrrr")


def agreement_table(x: CrossCheck) -> Markup:
    rows = []
    for r in x.arms.to_dict("records"):
        rows.append([_arm(r), _int(r["pairs"]), _int(r["identical"]),
                     num(100 * _float(r["agreement_rate"]), 1), num(r["prefix_chars_mean"], 1),
                     num(100 * _float(r["prefix_fraction_mean"]), 1),
                     num(r["prefix_tokens_mean"], 1), f"{_int(r['unpaired_this'])} / {_int(r['unpaired_other'])}",
                     escape(r["differing_prompts"] or "") if isinstance(r["differing_prompts"], str) else ""])
    df = pd.DataFrame(rows, columns=[Markup(h) for h in (
        "arm", "pairs", "identical", r"agree \%", "prefix chars", r"prefix \%", "prefix tok.", "unpaired A / B",
        "differing, e.g.")])
    return latex(df, r"lrrrrrrrp{3.4cm}")


def throughput_table(x: CrossCheck) -> Markup:
    rows = [[_arm(r), str(r["concurrency"]), num(r["throughput_this"], 1), num(r["throughput_other"], 1),
             with_ci(r["ratio"], r["ratio_lo"], r["ratio_hi"], 3),
             with_ci(r["tpot_ratio"], r["tpot_ratio_lo"], r["tpot_ratio_hi"], 3) if r["concurrency"] == 1 else "--",
             f"{r['reps_this']} / {r['reps_other']}"]
            for r in x.throughput.to_dict("records")]
    df = pd.DataFrame(rows, columns=[Markup(h) for h in (
        "arm", "C", "tok/s A", "tok/s B", r"A/B [95\% CI]", r"TPOT B/A [95\% CI]", "reps A / B")])
    return latex(df, "lrrrrrr")


def verdict_table(x: CrossCheck) -> Markup | None:
    """A twin's and its pair's verdict per decomposed ratio and C, each as throughput = τ ratio / step cost."""
    if x.verdicts.empty:
        return None
    rows = [[_pair_ids(r), _pair_ids(r, "reference", "reference_other"), str(r["concurrency"]),
             *(f"{num(r[f'ratio_{s}'], 3)} = {num(r[f'tau_ratio_{s}'], 3)} / {num(r[f'step_cost_{s}'], 2)}"
               for s in ("this", "other"))]
            for r in x.verdicts.to_dict("records")]
    heads = ["arm", "over", "C", r"A: ratio = $\tau$ ratio / step cost", r"B: ratio = $\tau$ ratio / step cost"]
    return latex(pd.DataFrame(rows, columns=[Markup(h) for h in heads]), "lllrr")


def verdict_sentence(x: CrossCheck) -> Markup:
    """Where the twin's verdict and its pair's differ most, and which factor makes the difference: acceptance
    (the same predictions, so only other prompts or bf16 divergence can move it) or the step (the two costs)."""
    if x.verdicts.empty or x.twin is None:
        return Markup("")
    v = x.verdicts.assign(gap=lambda d: (np.log(d["ratio_this"]) - np.log(d["ratio_other"])).abs()).sort_values(
        "gap", ascending=False)
    r = v.iloc[0]
    t, p = ("this", "other") if x.twin == "this" else ("other", "this")
    tw, pa = (MARK[t], MARK[p])
    tau_gap = abs(math.log(r[f"tau_ratio_{t}"] / r[f"tau_ratio_{p}"]))
    step_gap = abs(math.log(r[f"step_cost_{t}"] / r[f"step_cost_{p}"]))
    what = escape(f"{r['arm']} over {r['reference']}")
    head = (f"The twin's verdict ({tw}) and its pair's ({pa}) differ most for {what} at C={r['concurrency']}: "
            f"{num(r[f'ratio_{t}'], 3)} against {num(r[f'ratio_{p}'], 3)}, ")
    if step_gap >= tau_gap:
        why = (f"mostly through the step, which costs {num(r[f'step_cost_{t}'], 2)}x its reference's on the twin "
               f"and {num(r[f'step_cost_{p}'], 2)}x on the pair: the same predictions at another model's cost, so "
               f"the pair's step times do not transfer.")
        return Markup(head + why)
    mixed = "same_prompt_mix" in x.arms and x.arms["same_prompt_mix"].eq(False).any()
    cause = ("the two runs' C=1 cells sent different prompt mixes" if mixed and r["concurrency"] == 1 else
             "the two pairs make the same predictions, so what moves it is which prompts ran and bf16 divergence")
    return Markup(head + f"mostly through acceptance ($\\tau$ ratio {num(r[f'tau_ratio_{t}'], 3)} against "
                         f"{num(r[f'tau_ratio_{p}'], 3)}): {cause}.")


def _text(v, default: str) -> str:
    return default if missing(v) or v == "" else str(v)


def _float(v) -> float:
    return float("nan") if missing(v) else float(v)


def _int(v) -> str:
    return "--" if missing(v) else str(int(v))


def _spec(x: CrossCheck) -> pd.DataFrame:
    """Speculative arms with τ measured on both sides (ar's τ is 1 by definition on both)."""
    d = x.arms[(x.arms["kind"] != "ar")]
    return d[d["tau_this"].map(_finite) & d["tau_other"].map(_finite)]


def _finite(v) -> bool:
    try:
        return v is not None and not isinstance(v, (bool, str)) and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _weighted(g: pd.DataFrame, col: str) -> float:
    """Mean over every compared pair of the arms that have col (arms' means weighted by their pairs)."""
    g = g[g[col].map(_finite)]
    w = g["pairs"].astype(float)
    return float((g[col].astype(float) * w).sum() / w.sum()) if w.sum() > 0 else float("nan")


def _judged(spec: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The speculative arms whose tau gap is within tolerance, and those judged at all (None: not judged)."""
    judged = spec[spec["tau_within_tolerance"].notna()]
    return judged[judged["tau_within_tolerance"] == True], judged  # noqa: E712 (object column)


def _compared(x: CrossCheck) -> pd.DataFrame:
    """The arms whose request pairs were compared for greedy-output agreement."""
    return x.arms[x.arms["pairs"].map(_finite) & x.arms["identical"].map(_finite)]


def _temperature(x: CrossCheck) -> str:
    """The temperatures the compared arms sent at C=1: 'T=0' is greedy decoding."""
    t = sorted({float(v) for v in x.arms["temperature"] if _finite(v)})
    return "T=" + ", ".join(f"{v:g}" for v in t) if t else "T=n/a"


def reading(x: CrossCheck) -> Markup:
    """One paragraph generated from the numbers, naming the two sides as A and B."""
    a, b = escape(x.label("this")), escape(x.label("other"))
    out = []
    spec = _spec(x)
    if len(spec):
        agree, judged = _judged(spec)
        gaps = ", ".join(f"{escape(r.arm)} {_pct(r.tau_gap_pct)}\\%" for r in spec.itertuples())
        plural = "s" if len(judged) != 1 else ""
        if len(judged):
            out.append(f"At {_temperature(x)} and C=1, {len(agree)} of {len(judged)} speculative arm{plural} "
                       f"judged on both sides {'agree' if len(judged) != 1 else 'agrees'} in $\\tau$ within "
                       f"{TOL} between A ({a}) and B ({b}) (gap A/B$-$1: {gaps}).")
        else:
            out.append(f"At {_temperature(x)} and C=1, no speculative arm's $\\tau$ is judged between A ({a}) "
                       f"and B ({b}) (gap A/B$-$1: {gaps}).")
        if len(judged) < len(spec):
            out.append(f"{len(spec) - len(judged)} not judged: {_UNJUDGED}.")
    else:
        out.append(f"No speculative arm has $\\tau$ measured at C=1 on both A ({a}) and B ({b}).")
    g = _compared(x)
    if len(g) and g["pairs"].sum() > 0:
        total, same = int(g["pairs"].sum()), int(g["identical"].sum())
        lo, hi = g.loc[g["agreement_rate"].idxmin()], g.loc[g["agreement_rate"].idxmax()]
        span = (f"{num(100 * lo['agreement_rate'], 1)}\\% ({escape(lo['arm'])}) to "
                f"{num(100 * hi['agreement_rate'], 1)}\\% ({escape(hi['arm'])})" if len(g) > 1 else
                f"{num(100 * lo['agreement_rate'], 1)}\\% ({escape(lo['arm'])})")
        tokens = ""
        if g["prefix_tokens_mean"].map(_finite).any():
            tokens = f" ({num(_weighted(g, 'prefix_tokens_mean'), 1)} tokens, retokenized)"
        out.append(f"Greedy outputs at C=1 are identical for {same} of {total} paired requests "
                   f"({num(100 * same / total, 1)}\\%); per arm from {span}; the common prefix of a pair is "
                   f"{num(_weighted(g, 'prefix_chars_mean'), 1)} characters{tokens} on average.")
    else:
        out.append("No request pair at C=1 was compared for output agreement.")
    if split := split_sentence(x):
        out.append(split)
    t = x.throughput
    if len(t):
        lo, hi = t.loc[t["ratio"].idxmin()], t.loc[t["ratio"].idxmax()]
        out.append(f"Output throughput A/B ranges from {num(lo['ratio'], 3)}$\\times$ ({escape(lo['arm'])}, "
                   f"C={lo['concurrency']}) to {num(hi['ratio'], 3)}$\\times$ ({escape(hi['arm'])}, "
                   f"C={hi['concurrency']}) over {len(t)} arm and concurrency pair{'s' if len(t) != 1 else ''}.")
    return Markup(" ".join(out))


def caveats(x: CrossCheck) -> list[Markup]:
    """One line per speculative arm whose τ gap exceeds the tolerance: the gap as measured, no cause."""
    out = []
    for r in _spec(x).itertuples():
        if r.tau_within_tolerance is not False:
            continue
        band = ci(r.tau_gap_pct_lo, r.tau_gap_pct_hi, 1)
        noise = ""
        if band:
            inside = r.tau_gap_pct_lo <= 0 <= r.tau_gap_pct_hi
            noise = (f" (95\\% CI {band}\\%: {'the interval includes 0' if inside else 'the interval excludes 0'})")
        out.append(Markup(
            f"$\\tau$ of {escape(r.arm)} differs by {_pct(r.tau_gap_pct)}\\%{noise}: {num(r.tau_this, 2)} on A "
            f"against {num(r.tau_other, 2)} on B, more than the {TOL} expected of one "
            f"algorithm.{_split(r)}"))
    return out


def _steps_text(src) -> str:
    """Where a side's per-request verify steps came from (analysis.trust.crosscheck._steps), in words."""
    if not isinstance(src, str) or not src:
        return "not recorded"
    if src == "spec_verify_ct":
        return "its records' spec\\_verify\\_ct"
    if src.startswith("steps from stream chunks"):
        return escape("its stream chunks (one per verify step after the first), " + src.split(", ", 1)[-1]
                      ) if ", " in src else escape(src)
    return escape(src)


def _both_split(r) -> bool:
    return all(_finite(getattr(r, f"tau_{side}_where_identical", None)) for side in ("this", "other"))


def _split(r) -> str:
    """τ over the prompts whose outputs the two engines share, and over those where they part (bf16 near-ties):
    both sides' where both have per-request verify steps (split over the same pairs), else the one side's against
    the other side's whole τ; with where each side's steps came from."""
    if _both_split(r):
        sa, sb = r.tau_this_where_identical, r.tau_other_where_identical
        da, db = getattr(r, "tau_this_where_differing", None), getattr(r, "tau_other_where_differing", None)
        near = abs(sa / sb - 1) <= TAU_TOLERANCE
        pairs = getattr(r, "split_pairs", None)
        over = f" (split over {_int(pairs)} pairs)" if _finite(pairs) and _finite(r.pairs) and pairs < r.pairs else ""
        rest = (f"; over the rest, whose tokens differ between the engines, {num(da, 2)} on A and {num(db, 2)} on B"
                if _finite(da) and _finite(db) else "")
        return (f" Outputs are identical on {_int(r.identical)} of {_int(r.pairs)} pairs{over}. Over those, "
                f"$\\tau$ is {num(sa, 2)} on A and {num(sb, 2)} on B (A/B$-$1 {_pct(100 * (sa / sb - 1))}\\%{rest}), "
                f"{'within' if near else 'still beyond'} {TOL} of each other: the split of "
                f"outputs {'accounts for' if near else 'does not account for'} the gap. Verify steps per request: "
                f"A from {_steps_text(getattr(r, 'split_steps_this', None))}; B from "
                f"{_steps_text(getattr(r, 'split_steps_other', None))}.")
    for side, mark, other, whole in (("other", "B", "A", r.tau_this), ("this", "A", "B", r.tau_other)):
        same, diff = getattr(r, f"tau_{side}_where_identical", None), getattr(r, f"tau_{side}_where_differing", None)
        if _finite(same) and _finite(diff) and _finite(whole):
            near = abs(whole / same - 1) <= TAU_TOLERANCE
            return (f" Outputs are identical on {_int(r.identical)} of {_int(r.pairs)} pairs. Over those, {mark}'s "
                    f"$\\tau$ is {num(same, 2)} ({num(diff, 2)} over the rest, whose tokens differ between the "
                    f"engines), {'within' if near else 'still beyond'} {TOL} of {other}'s "
                    f"{num(whole, 2)}: the split of outputs {'accounts for' if near else 'does not account for'} "
                    f"the gap ({other}'s records give no per-request verify steps, neither spec\\_verify\\_ct nor "
                    f"stream chunks that match its /metrics count, to split; {other}'s $\\tau$ is over all pairs).")
    return " This run measured the gap, not its cause."


def split_sentence(x: CrossCheck) -> str:
    """Both sides' τ over the pairs whose outputs are identical, per speculative arm split on both sides."""
    d = x.arms[(x.arms["kind"] != "ar")]
    both = [r for r in d.itertuples() if _both_split(r)]
    if not both:
        return ""
    arms = ", ".join(f"{escape(r.arm)} {num(r.tau_this_where_identical, 2)}/{num(r.tau_other_where_identical, 2)}"
                     for r in both)
    srcs = {side: sorted({str(getattr(r, f"split_steps_{side}")) for r in both
                          if isinstance(getattr(r, f"split_steps_{side}", None), str)}) for side in ("this", "other")}
    where = "; ".join(f"{mark}'s verify steps from " + (_steps_text(srcs[side][0]) if len(srcs[side]) == 1 else
                                                        "per arm (see the notes)")
                      for side, mark in (("this", "A"), ("other", "B")))
    return (f"Split the same way on both sides, over the pairs whose greedy outputs are identical, $\\tau$ A/B is "
            f"{arms} ({where}).")


def summary_sentence(a: Analysis) -> Markup | None:
    x = a.crosscheck
    if x is None:
        return None
    spec = _spec(x)
    agree, judged = _judged(spec)
    g = _compared(x)
    same = (f"; greedy outputs identical for {int(g['identical'].sum())} of {int(g['pairs'].sum())} paired C=1 "
            f"requests" if len(g) and g["pairs"].sum() > 0 else "")
    tau = (f"{len(agree)} of {len(judged)} judged speculative arm(s) agree in $\\tau$ within "
           f"{TOL} at C=1" if len(judged) else
           f"no speculative arm's $\\tau$ is judged at C=1 ({_UNJUDGED})")
    if len(judged) and len(judged) < len(spec):
        tau += f", {len(spec) - len(judged)} not judged"
    return Markup(f"Cross-check against {escape(x.label('other'))} (Section~\\ref{{sec:crosscheck}}): "
                  f"{tau}{same}.")
