"""Generated sentences for the summary: each carries its number and its interval."""

from __future__ import annotations

from markupsafe import Markup

from analysis.outcome import Analysis
from report import crosscheck
from report.tex import ci, drift_pct, escape, num


def times(value, lo, hi, digits: int = 2) -> str:
    """A ratio as 'r× (95% CI lo–hi)', or 'r× (no interval)'."""
    band = ci(lo, hi, digits)
    return f"{num(value, digits)}$\\times$" + (f" (95\\% CI {band})" if band else " (no interval)")


def verdict_words(r) -> str:
    """What a ratio's interval supports, in words; 'within noise' carries the n that would resolve it."""
    if r.verdict == "faster":
        return "faster at 95\\% confidence"
    if r.verdict == "slower":
        return "slower at 95\\% confidence"
    if r.verdict != "within noise":
        return "no interval (fewer than two repetition pairs)"
    n = r.n_to_resolve
    need = (f"; about {int(n)} pairs would resolve an effect this size" if n == n and n is not None and n > r.pairs
            else "; the effect is too small for 1000 pairs to resolve" if n != n or n is None else "")
    return f"within noise (minimum detectable effect {num(100 * r.mde, 1)}\\% at this n{need})"


def _factor(lo, hi, above: str, below: str, same: str) -> str:
    return above if lo > 1 else below if hi < 1 else f"{same} (within noise)"


def _stability(a: Analysis) -> list[str]:
    out = []
    if len(a.drift) and a.drift.iloc[0]["estimable"]:
        d = a.drift.iloc[0]
        worst = a.speedups["drift_bias"].max() if "drift_bias" in a.speedups else float("nan")
        most = (f"by at most {num(100 * worst, 2)}\\%" if worst < 1 else
                "by more than 100\\%: its ratios pair cells that ran minutes apart")
        out.append(f"Host drift over the run's {num(d['span_s'] / 60, 1)} minutes: {drift_pct(d['over_run'])} "
                   f"(95\\% CI {drift_pct(d['over_run_lo'])} to {drift_pct(d['over_run_hi'])}), from "
                   f"{int(d['cells'])} repeated cells; with the cells in the order they ran, it could move a compared "
                   f"ratio {most}.")
    elif len(a.drift):
        out.append(f"Host drift: too short to estimate (the repeated cells span "
                   f"{num(a.drift.iloc[0]['span_s'], 0)} s).")
    flagged = a.gpu_band[a.gpu_band["outside"].astype(bool)] if len(a.gpu_band) else a.gpu_band
    if len(flagged):
        out.append(f"{len(flagged)} cell(s) left the run's GPU clock or power band (Section~\\ref{{sec:trust}}).")
    busy = a.host_cpu[a.host_cpu["busy"].astype(bool)] if len(a.host_cpu) else a.host_cpu
    if len(busy):
        out.append(f"\\textbf{{Other work ran on the host}} during {len(busy)} of {len(a.host_cpu)} cells (up to "
                   f"{num(busy['foreign_cores'].max(), 2)} cores beside the sweep): their ratios measure a shared "
                   f"machine (Section~\\ref{{sec:trust}}).")
    return out


def sentences(a: Analysis) -> list[Markup]:
    out = []
    failed = a.cells[a.cells["status"] != "ok"]
    if len(failed):
        groups: dict[tuple, list] = {}
        for r in failed.itertuples():   # one reason, told once, with the cells it stopped
            groups.setdefault((r.arm, r.reason or r.status), []).append(f"C={r.concurrency} rep {r.repetition}")
        what = "; ".join(f"{escape(arm)} at {', '.join(where)} ({escape(why)})" for (arm, why), where in groups.items())
        out.append(f"\\textbf{{{len(failed)} of {len(a.cells)} cells failed}} and are left out of every "
                   f"comparison: {what}.")
    # which arm is fastest, each ratio and its decomposition are on page 1, in the headline table and on the
    # verdict page: the summary keeps what those do not say (failed cells, drift, correctness, the cross-check)
    out += _stability(a)
    spec = a.lossless[a.lossless["arm"].map(a.kinds) != "ar"] if len(a.lossless) else a.lossless
    if len(spec):
        worst = spec.sort_values("match_rate").iloc[0]
        out.append(f"Lossless check (T=0): the lowest exact-match rate against ar is "
                   f"{num(100 * worst['match_rate'], 1)}\\% ({escape(worst['arm'])})" + _triaged(a, spec) + ".")
    elif a.lossless_note:
        out.append(f"Lossless check: not applicable ({escape(a.lossless_note)}).")
    xc = crosscheck.summary_sentence(a)
    if xc is not None:
        out.append(xc)
    bad = a.checks[a.checks["status"] == "fail"]
    out.append(f"Trust checks: \\textbf{{{len(bad)} failed}} of {len(a.checks)}"
               + (" (listed first in Section~\\ref{sec:trust})." if len(bad) else "."))
    return [Markup(x) for x in out]


def _triaged(a: Analysis, spec) -> str:
    """How many of the speculative arms' differing outputs are numerical ties, and how many failures."""
    t = a.triage
    if t is None or (spec["match_rate"] == 1).all():
        return ""
    if t.note:
        return f"; its divergences were not triaged ({escape(t.note)})"
    c = t.counts[(t.counts["comparison"] == "lossless") & t.counts["arm"].isin(list(spec["arm"]))]
    ties, bad = int(c["ties"].sum()), int(c["failures"].sum())
    return (f"; of the {ties + bad} differing outputs, {ties} are numerical ties and "
            + (f"\\textbf{{{bad} failures}}" if bad else "0 failures")
            + f" (fp32 logit margin below {num(t.threshold, 2)} at the first differing token, largest "
            + f"{num(c['largest_margin'].max(), 3)})")


def _widest_tau_shift(s) -> str:
    """The speculative arm whose τ moves most across C, as its τ at its lowest and highest τ's C, in C order."""
    best = None
    for arm, d in s.groupby("arm", sort=False):
        d = d.dropna(subset=["tau"])
        if d["concurrency"].nunique() < 2 or not (d["tau"] > 0).all():
            continue
        lo, hi = d.loc[d["tau"].idxmin()], d.loc[d["tau"].idxmax()]
        shift = hi["tau"] / lo["tau"] - 1
        if best is None or shift > best[0]:
            best = (shift, arm, *sorted((lo, hi), key=lambda r: r["concurrency"]))
    if best is None:
        return ""
    shift, arm, first, last = best
    return (f" (widest here: {escape(arm)}, {num(first['tau'], 2)} at C={int(first['concurrency'])} and "
            f"{num(last['tau'], 2)} at C={int(last['concurrency'])}, {num(100 * shift, 1)}\\% apart)")


def tau_across_concurrency(a: Analysis) -> Markup | None:
    """What the acceptance-across-concurrency figure can and cannot say, for the sentence under it."""
    s = a.summary
    spec = s[s["kind"] != "ar"] if len(s) else s
    if not len(spec):
        return None
    cs = sorted(int(c) for c in spec["concurrency"].unique())
    if len(cs) == 1:
        return Markup(f"This run has one concurrency (C={cs[0]}): the figure compares arms at it only, and "
                      f"$\\tau$ ratios between arms at the same $C$ are the matched comparison.")
    who = {"sglang": "SGLang's", "external": "each server's"}.get(a.run.profile.backend.kind, "the reference engine's")
    return Markup(f"$\\tau$ at different $C$ is not a matched comparison: each concurrency batches different "
                  f"requests together, and {who} scheduler and the engine change what runs per step, so a shift of "
                  f"$\\tau$ across $C${_widest_tau_shift(spec)} describes the run, not an effect of $C$ on acceptance; "
                  f"$\\tau$ ratios between arms at the same $C$ (the tree-gain decomposition below) are the matched "
                  f"comparison.")
