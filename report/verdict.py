"""The verdict page: what the run answers, before anything else, each figure with its 95% interval; and for each of
the study's questions the answer, or why this run cannot give one.

Every sentence is built from the analysis' tables and says no more than its interval supports: a ratio whose
interval holds 1 is 'within noise', names no winner, and carries the pairs that would resolve it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from markupsafe import Markup

from analysis import agreement
from analysis.estimate import compare, standings, stats
from analysis.trust.kinds import COMMIT, FAIL, Kind, of
from report import headroom, tables
from report.summary import times
from report.tex import ci, escape, num, with_ci

FEW = Markup(r"$^\ddagger$")    # a category with too few requests on a side, as the per-category table marks it


def _finite(*xs) -> bool:
    return all(x is not None and np.isfinite(float(x)) for x in xs)


def _named(arm) -> bool:
    """Whether a table cell holds an arm (a group of one has none: None, NaN once in a frame)."""
    return isinstance(arm, str) and arm != ""


def _h(*names: str) -> list[Markup]:
    return [Markup(n) for n in names]


def varies(p: pd.DataFrame) -> tuple[str, ...]:
    """The group columns (CUDA graphs, sampling setting) that take more than one value: every row then says its own."""
    return tuple(k for k in ("cuda_graphs", "sampling") if len(p) and k in p and p[k].nunique() > 1)


def _where(r, vary: tuple[str, ...]) -> str:
    out = f"C={int(r.concurrency)}"
    if "cuda_graphs" in vary:
        out += f", CUDA graphs {'on' if r.cuda_graphs else 'off'}"
    if "sampling" in vary:
        out += f", sampling {escape(r.sampling)}"
    return out


def _cell_verdict(r) -> Markup:
    """A ratio's verdict for a table cell; within noise carries the pairs that would resolve it."""
    v = r.verdict
    if v == "within noise":
        n = r.n_to_resolve
        more = (f"; $\\approx${int(n)} pairs would resolve it" if _finite(n) and n > r.pairs else
                f"; beyond {stats.MAX_N} pairs" if not _finite(n) else "")
        return Markup(f"within noise{more}")
    return Markup(escape(v))


def resolve(r) -> str:
    """For a ratio within noise: the smallest effect its pairs detect, and the pairs that would resolve its own."""
    n = r.n_to_resolve
    out = f"the minimum detectable effect at {r.pairs} pairs is {num(100 * r.mde, 1)}\\%"
    if _finite(n) and n > r.pairs:
        return out + f", and about {int(n)} pairs would resolve an effect this size"
    if not _finite(n):
        return out + f", and an effect this size needs more than {stats.MAX_N} pairs"
    return out


def flat(x, lo, hi, digits: int = 2) -> str:
    """'r×, 95% CI lo–hi' (no parentheses, for text that is inside some already)."""
    if not _finite(lo, hi):
        return f"{num(x, digits)}$\\times$, no interval"
    return f"{num(x, digits)}$\\times$, 95\\% CI {num(lo, digits)}--{num(hi, digits)}"


# ---- the fastest arm and the runner-up --------------------------------------------------------------------

def podium_table(p: pd.DataFrame) -> Markup:
    vary = varies(p)
    rows = []
    for r in p.itertuples():
        rows.append([str(r.concurrency), *([Markup("on" if r.cuda_graphs else "off")] if "cuda_graphs" in vary else []),
                     *([escape(r.sampling)] if "sampling" in vary else []),
                     escape(r.fastest), num(r.fastest_throughput, 1),
                     escape(r.runner_up) if _named(r.runner_up) else Markup("--"), num(r.runner_up_throughput, 1),
                     with_ci(r.speedup, r.speedup_lo, r.speedup_hi, 3), str(r.pairs), _cell_verdict(r)])
    groups = [{"cuda_graphs": "CUDA graphs", "sampling": "sampling"}[k] for k in vary]
    cols = _h("C", *groups, "fastest", "tok/s", "runner-up", "tok/s", r"fastest / runner-up [95\% CI]", "pairs",
              "verdict")
    return tables.latex(pd.DataFrame(rows, columns=cols), "r" + "c" * len(vary) + "lrlrrrp{3.4cm}")


def _inverse(r) -> SimpleNamespace:
    """A decomposition row read the other way round: every factor of a paired log ratio inverts exactly."""
    d = {k: getattr(r, k) for k in r._fields}
    for f in ("throughput_ratio", "tau_ratio", "step_time_ratio"):
        d[f], d[f"{f}_lo"], d[f"{f}_hi"] = 1 / d[f], 1 / d[f"{f}_hi"], 1 / d[f"{f}_lo"]
    d["arm"], d["reference"] = d["reference"], d["arm"]
    return SimpleNamespace(**d)


def _decomposed(d: pd.DataFrame, x: str, y: str, c: int):
    """The decomposition of x over y at C = c, in either direction, or None."""
    if d.empty:
        return None
    for arm, ref, flip in ((x, y, False), (y, x, True)):
        m = d[(d["arm"] == arm) & (d["reference"] == ref) & (d["concurrency"] == c)]
        if len(m):
            r = next(m.itertuples())
            return _inverse(r) if flip else r
    return None


def _factor(name: str, x, lo, hi, above: str, below: str, same: str) -> str:
    """A factor of the decomposition in words, as far as its interval supports: 'accepts more (τ ratio …)'."""
    words = above if lo > 1 else below if hi < 1 else same
    return f"{words} ({name} {flat(x, lo, hi, 3)}" + (")" if lo > 1 or hi < 1 else ": within noise)")


def edge(d: pd.DataFrame, x: str, y: str, c: int) -> str:
    """Where x's throughput over y comes from, τ or step time, each factor as far as its interval supports."""
    r = _decomposed(d, x, y, c)
    if r is None or not _finite(r.tau_ratio_lo, r.step_time_ratio_lo):
        return ""
    accepts = _factor("$\\tau$ ratio", r.tau_ratio, r.tau_ratio_lo, r.tau_ratio_hi, "accepts more", "accepts less",
                      "accepts as much")
    cost = tables.step_cost(r)
    lo, hi = r.step_time_ratio_lo, r.step_time_ratio_hi
    costs = (f"its step costs more ({cost})" if hi < 1 else f"its step costs less ({cost})" if lo > 1 else
             f"its step costs as much within noise ({cost})")
    return f"; per verify step it {accepts} and {costs}"


def podium_sentence(r, vary: tuple[str, ...], d: pd.DataFrame) -> Markup:
    """One sentence for one concurrency (and CUDA graphs or sampling group): the fastest arm against the runner-up."""
    where = f"At {_where(r, vary)}"
    x, y = escape(r.fastest), escape(r.runner_up) if _named(r.runner_up) else ""
    if not _named(r.runner_up):
        return Markup(f"{where}, only {x} ran ({num(r.fastest_throughput, 1)} tok/s): nothing to compare it with.")
    speeds = f"{num(r.fastest_throughput, 1)} against {num(r.runner_up_throughput, 1)} tok/s"
    ratio = f"{x} / {y} $=$ {times(r.speedup, r.speedup_lo, r.speedup_hi, 3)} over {r.pairs} repetition pairs"
    why = edge(d, r.fastest, r.runner_up, int(r.concurrency))
    if r.verdict == "faster":
        return Markup(f"{where}, {x} is fastest: {num(r.speedup, 3)}$\\times$ the runner-up {y} (95\\% CI "
                      f"{num(r.speedup_lo, 3)}--{num(r.speedup_hi, 3)} over {r.pairs} repetition pairs; {speeds}), "
                      f"faster at 95\\% confidence{why}.")
    if r.verdict == "within noise":
        return Markup(f"{where}, {x} and {y} lead within noise of each other ({speeds}): {ratio}, an interval that "
                      f"holds 1, so the run does not say which is faster; {resolve(r)}{why}.")
    if r.verdict == "slower":
        return Markup(f"{where}, {x} has the highest mean throughput ({speeds} for {y}), but paired by repetition it "
                      f"is slower than {y}: {ratio}; the means and the pairs disagree, so no arm is named fastest.")
    if r.verdict == "no interval":
        return Markup(f"{where}, {x} has the highest throughput ({speeds} for {y}), over {r.pairs} repetition pair(s): "
                      f"too few for an interval, so no claim which is faster.")
    return Markup(f"{where}, {x} has the highest throughput ({speeds} for {y}), but the two were not compared: "
                  f"{escape(r.source)}.")


def podium_sentences(a, p: pd.DataFrame) -> list[Markup]:
    vary = varies(p)
    return [podium_sentence(r, vary, a.decomposition) for r in p.itertuples()]


# ---- tree against chain against linear --------------------------------------------------------------------

def decomposition_table(a) -> Markup:
    """Throughput ratio = τ ratio × step-time ratio, per pair of the decomposition, with the throughput verdict."""
    d, s = a.decomposition, a.speedups
    d = d.sort_values(["concurrency", "reference_kind"], kind="stable") if len(d) else d
    rows = []
    for r in d.itertuples():
        sp = s[(s["arm"] == r.arm) & (s["baseline"] == r.reference) & (s["concurrency"] == r.concurrency)] \
            if len(s) else s
        v = (next(sp.itertuples()) if len(sp) else
             SimpleNamespace(verdict=compare.verdict(r.throughput_ratio_lo, r.throughput_ratio_hi), n_to_resolve=None,
                             pairs=r.pairs))
        rows.append([escape(r.arm), escape(r.reference), str(r.concurrency),
                     with_ci(r.tau_ratio, r.tau_ratio_lo, r.tau_ratio_hi, 3), tables.step_cost(r),
                     with_ci(r.throughput_ratio, r.throughput_ratio_lo, r.throughput_ratio_hi, 3), str(r.pairs),
                     _cell_verdict(v)])
    cols = _h("arm", "over", "C", r"$\tau$ ratio [95\% CI]", r"$/$ step cost [95\% CI]", r"$=$ throughput ratio",
              "pairs", "verdict")
    return tables.latex(pd.DataFrame(rows, columns=cols), "llrrrrrp{2.8cm}")


# ---- (a) is the tree's low commit length a bug or the drafter? ------------------------------------------------

def _lossless(a) -> tuple[str, str]:
    """(state, words) of the lossless check over the speculative arms: pass, fail or unknown."""
    kinds = {x.id: x.kind for x in a.run.profile.arms}
    ll = a.lossless
    spec = ll[ll["arm"].map(kinds) != "ar"] if len(ll) else ll
    if a.lossless_note or spec.empty:
        return "unknown", f"no lossless check ({escape(a.lossless_note or 'no speculative arm compared')})"
    failed = of(a.checks, Kind.LOSSLESS)
    failed = failed[failed["status"] == FAIL]
    if (spec["match_rate"] == 1).all() and failed.empty:
        return "pass", f"every speculative output matched ar's at T=0 ({int(spec['compared'].sum())} outputs)"
    worst = spec.sort_values("match_rate").iloc[0]
    low = f"the lowest exact-match rate against ar is {num(100 * worst['match_rate'], 1)}\\% ({escape(worst['arm'])})"
    t = a.triage
    if t is None or t.note:
        return "unknown", low + (f", its divergences not triaged ({escape(t.note)})" if t is not None else
                                 ", its divergences not triaged")
    c = t.counts[(t.counts["comparison"] == "lossless") & t.counts["arm"].isin(list(spec["arm"]))]
    ties, bad = int(c["ties"].sum()), int(c["failures"].sum())
    if bad or len(failed):
        return "fail", low + f"; \\textbf{{{bad} of {ties + bad} differing outputs are failures}}, not numerical ties"
    return "pass", low + (f", and all {ties} differing outputs are numerical ties (fp32 logit margin below "
                          f"{num(t.threshold, 2)} at the first differing token)")


def _commit(a) -> tuple[str, str]:
    c = of(a.checks, *COMMIT)
    if c.empty:
        return "unknown", "commit $=$ depth $+1$ was not checked (the records carry no accepted depths)"
    bad = c[c["status"] == FAIL]
    if len(bad):
        return "fail", f"\\textbf{{commit $=$ depth $+1$ fails in {len(bad)} of {len(c)} checks}}"
    return "pass", f"commit $=$ depth $+1$ holds ({len(c)} check{'s' if len(c) != 1 else ''})"


def diagnosis(a, h: dict) -> tuple[str, bool]:
    """The diagnosis' words, and whether any tree accepts less than the drafter's distributions allow."""
    sib = h["after_sibling"]
    sib = sib[(sib["prefix"] == "spine") & (sib["depth"] == 0)]
    out, trees, short = [], [], False
    if len(sib):
        s = sib.iloc[0]
        out.append(f"after the target takes a sibling, the drafter's rank-1 guess at the next depth is right in "
                   f"{num(100 * s['sibling_rate'], 1)}\\% of cases, against {num(100 * s['spine_rate'], 1)}\\% after "
                   f"a rank-1 match (Section~\\ref{{sec:headroom}}), so a branch starts a worse chain")
    for t in h["headroom"].itertuples():
        m = headroom.measured_tau(a, int(t.budget), int(t.topk))
        if m is None or not _finite(m["lo"]):
            continue
        # a step commits the accepted drafts and the bonus token: the diagnosis' τ ratio is (1 + tree) / (1 + chain)
        allowed = (1 + t.tree_accepted) / (1 + t.chain_accepted)
        short = short or m["hi"] < allowed
        rel = "below" if m["hi"] < allowed else "above" if m["lo"] > allowed else "within noise of"
        trees.append(f"B={int(t.budget)}, K={int(t.topk)} {num(allowed, 3)}$\\times$ along the target's greedy path, "
                     f"{times(m['ratio'], m['lo'], m['hi'], 3)} measured over {escape(m['over'])} "
                     f"at C={m['c']}, {rel} it")
    if trees:
        out.append("$\\tau$ of the tree over the chain, diagnosis against run: " + "; ".join(trees))
    return "; ".join(out), short


def bug_or_drafter(a) -> Markup:
    if not any(x.kind == "tree" for x in a.run.profile.arms):
        return Markup("The run has no tree arm: it cannot answer.")
    checks = [_lossless(a), _commit(a)]
    said = "; ".join(words for _, words in checks)
    if any(state == "fail" for state, _ in checks):
        return Markup(f"\\textbf{{A bug is not ruled out}}: {said}.")
    h = headroom.read(a)
    if h is None:
        return Markup(f"No sign of a bug in what the run checks ({said}). Whether the drafter explains the commit "
                      f"length the run cannot say: it has no drafter diagnosis (run \\texttt{{just headroom "
                      f"{escape(a.run.path)}}}).")
    words, short = diagnosis(a, h)
    if short:
        return Markup(f"\\textbf{{Not the drafter alone}}: a tree accepts less than the drafter's own distributions "
                      f"allow: {words}. That loss is not the drafter's (unless it is one of the diagnosis' known "
                      f"biases, Section~\\ref{{sec:headroom}}); {said}.")
    partly = any(state == "unknown" for state, _ in checks)
    lead = "The drafter" + (", as far as the run checks" if partly else "; no sign of a bug")
    return Markup(f"\\textbf{{{lead}}}. The drafter diagnosis: {words}; no tree accepts less than the drafter's "
                  f"distributions allow. Checks for a bug: {said}.")


# ---- (b) does acceptance shift with concurrency? ----------------------------------------------------------------

def acceptance_shift(a) -> Markup:
    s = a.summary
    spec = s[s["kind"] != "ar"].dropna(subset=["tau"]) if len(s) else s
    if spec.empty:
        return Markup("The run has no speculative arm with a $\\tau$: it cannot answer.")
    cs = sorted(int(c) for c in spec["concurrency"].unique())
    if len(cs) == 1:
        return Markup(f"The run cannot answer: it measures one concurrency (C={cs[0]}). Even with several, $\\tau$ at "
                      f"different $C$ is not a matched comparison (each $C$ batches different requests together).")
    parts = []
    for arm, d in spec.groupby("arm", sort=False):
        d = d.sort_values("concurrency")
        if len(d) < 2:
            continue
        lo, hi = d.iloc[0], d.iloc[-1]
        apart = lo["tau_t_hi"] < hi["tau_t_lo"] or hi["tau_t_hi"] < lo["tau_t_lo"]
        parts.append(f"{escape(arm)} {with_ci(lo['tau'], lo['tau_t_lo'], lo['tau_t_hi'], 2)} at "
                     f"C={int(lo['concurrency'])}, {with_ci(hi['tau'], hi['tau_t_lo'], hi['tau_t_hi'], 2)} at "
                     f"C={int(hi['concurrency'])} (" + ("intervals apart" if apart else "intervals overlap") + ")")
    return Markup("$\\tau$ per arm (geometric mean over repetitions, Student-$t$ 95\\% interval): " + "; ".join(parts)
                  + ". The run describes these values but cannot attribute a shift to $C$: $\\tau$ at different $C$ "
                  "is not a matched comparison, since each $C$ batches different requests together and the scheduler "
                  "changes what runs per step (Section~\\ref{sec:acceptance}). The matched comparison is between arms "
                  "at one $C$ (the table above).")


# ---- (c) which budget? ----------------------------------------------------------------------------------------

def _point(r) -> str:
    """A point of a family's budget axis: 'budget 31', or 'the chain (B=15)'."""
    return f"the chain (B={int(r.budget)})" if r.chain else f"budget {int(r.budget)}"


def _versus(r) -> str:
    """The fastest point over another, paired by repetition (standings.ranked), with what its interval supports."""
    if r.verdict == "not compared":
        return f"{_point(r)} {_words(r)}"
    band = ci(r.speedup_lo, r.speedup_hi, 3)
    return (f"{num(r.speedup, 3)}$\\times$ {_point(r)} (" + (f"95\\% CI {band} over " if band else "no interval, ")
            + f"{r.pairs} pair{'s' if r.pairs != 1 else ''}), {_words(r)}")


def _budget_sentence(d: pd.DataFrame, vary: tuple[str, ...]) -> str:
    best = next(d[d["best"]].itertuples())
    where = _where(best, vary) + f", block {int(best.block_size)}" + (f", {best.k}" if "k" in vary else "")
    if len(d) == 1:
        return f"At {where}, only {_point(best)} of the family finished: nothing to compare it with."
    listed = ", ".join(f"{int(r.budget)} ({'the chain, ' if r.chain else ''}{num(r.throughput, 1)} tok/s, "
                       f"$\\tau$ {num(r.tau, 2)})" for r in d.itertuples())
    others = d[~d["best"]]
    vs = "; ".join(_versus(r) for r in others.itertuples())
    # the chain is top-k 1 by definition: only the trees say whether K moves with B
    topk = "" if d[~d["chain"]]["topk"].nunique() <= 1 else \
        " (top-k changes with the budget here, so each is a (B, K) pair)"
    if (others["verdict"] == "faster").all():
        end = f"{_point(best)} is the best of those measured at 95\\% confidence"
        if best.budget in (d["budget"].min(), d["budget"].max()):
            end += ", at the edge of the range: a better one may lie beyond it"
    else:
        open_ = ", ".join(_point(r).removeprefix("budget ") for r in others.itertuples() if r.verdict != "faster")
        end = f"the run does not single out one budget: {_point(best)} is not resolved from {open_}"
    return f"At {where}, budgets {listed}{topk}: {_point(best)} has the highest throughput, {vs}. So {end}."


def _words(r) -> str:
    """A ratio's verdict in words, as far as its interval supports."""
    if r.verdict == "faster":
        return "faster at 95\\% confidence"
    if r.verdict == "within noise":
        return f"within noise ({resolve(r)})"
    if r.verdict == "slower":
        return "slower paired by repetition (the means and the pairs disagree)"
    if r.verdict == "no interval":
        return "no interval (fewer than two repetition pairs)"
    return f"not compared ({escape(r.source)})"


def _have(fams: list) -> str:
    """The budgets each family has, at its block and with whatever else tells two families apart."""
    ks = len({f.k for f in fams}) > 1
    graphs = len({f.graphs for f in fams}) > 1
    settings = len({f.sampling.label for f in fams}) > 1
    return "; ".join(f"budget{'s' if len(f.trees) > 1 else ''} {', '.join(str(b) for b in f.budgets)} at "
                     f"block {f.block_size}" + (f", {f.k}" if ks else "")
                     + (f", CUDA graphs {'on' if f.graphs else 'off'}" if graphs else "")
                     + (f", sampling {escape(f.sampling.label)}" if settings else "")
                     for f in fams)


def block_or_width(a) -> str:
    """Where each speculative arm's steps stop (tables/acceptance_by_position.csv, its lowest C): a step that took
    every draft the block allows was cut by the block, and a longer one would extend it; a step that took none
    stopped at depth 1, where only a tree's siblings can help."""
    t = a.by_position
    if t is None or t.empty:
        return ""
    blocks = {x.id: x.block_size for x in a.run.profile.measured_arms() if x.kind != "ar"}
    out = []
    for arm, g in t.groupby("arm", sort=False):
        if arm not in blocks:
            continue
        g = g[g["concurrency"] == g["concurrency"].min()].set_index("position")
        deepest = blocks[arm] - 1
        full = g["share_stopped"].get(deepest, 0.0)
        tail = g.loc[(g.index > deepest - 3) & (g.index > 0)]
        reached = tail["reached"].sum()
        p_tail = tail["accepted"].sum() / reached if reached else float("nan")
        none = g["share_stopped"].get(0, 0.0)
        out.append(f"{escape(arm)} at C={int(g['concurrency'].iloc[0])}: {num(100 * full, 1)}\\% of steps took all "
                   f"{deepest} drafts (the last three positions, once reached, accepted "
                   f"{num(100 * p_tail, 0)}\\% of the time), {num(100 * none, 1)}\\% took none")
    if not out:
        return ""
    return ("Per draft position (Section~\\ref{sec:acceptance}; steps that took every draft were cut by the block, "
            "so a longer block would extend them; steps that took none stopped at the first draft, where only a "
            "wider tree's siblings help): " + "; ".join(out) + ".")


def which_budget(a) -> Markup:
    return Markup(f"{_which_budget(a)} {block_or_width(a)}".strip())


def _which_budget(a) -> Markup:
    b = standings.budgets(a)
    if b.empty:
        fams = standings.families(a)
        if standings.budget_families(a):
            return Markup("The run cannot answer: no budget of its budget families finished.")
        return Markup(f"The run cannot answer: choosing a budget needs at least {standings.MIN_BUDGETS} tree budgets "
                      f"at one drafter block size, top-k rule, sampling setting and CUDA graphs switch (two give a "
                      f"direction, not a best one); it has {_have(fams) or 'no tree arm'}.")
    vary = varies(b) + (("k",) if b["k"].nunique() > 1 else ())
    return Markup(" ".join(_budget_sentence(d, vary) for _, d in
                           b.groupby(["sampling", "block_size", "cuda_graphs", "family", "concurrency"], sort=True)))


# ---- (d) on which prompts does the tree win? -------------------------------------------------------------------

def _cat(r, with_ratio: bool = True) -> str:
    name = escape(r.category) + (FEW if r.few else "")
    return f"{name} ({flat(r.speedup, r.speedup_lo, r.speedup_hi, 3)})" if with_ratio else name


def category_sentence(d: pd.DataFrame, overall) -> Markup:
    """One tree-over-baseline pair at one C: its categories by verdict, against the overall ratio."""
    r0 = d.iloc[0]
    head = f"{escape(r0['arm'])} over {escape(r0['baseline'])} at C={int(r0['concurrency'])}"
    if overall is not None:
        ratio = flat(overall.speedup, overall.speedup_lo, overall.speedup_hi, 3)
        head += f" (overall {ratio}: {escape(overall.verdict)})"
    groups = {v: [r for r in d.itertuples() if r.verdict == v] for v in ("faster", "slower", "within noise")}
    rest = [r for r in d.itertuples() if r.verdict not in groups]
    parts = [f"{v} on " + ", ".join(_cat(r) for r in rs) for v, rs in groups.items() if rs and v != "within noise"]
    if groups["within noise"]:
        parts.append("within noise on " + ", ".join(_cat(r, False) for r in groups["within noise"]))
    if rest:
        parts.append("no interval for " + ", ".join(_cat(r, False) for r in rest))
    if not groups["faster"] and not groups["slower"]:
        parts.insert(0, "no category resolved")
    return Markup(f"{head}: " + "; ".join(parts) + ".")


def which_prompts(a) -> list[Markup]:
    d = a.categories
    if not any(x.kind == "tree" for x in a.run.profile.arms):
        return [Markup("The run has no tree arm: it cannot answer.")]
    if d.empty or d["category"].nunique() < 2:
        return [Markup("The run cannot answer: its prompt set has one category, or no tree has a matched baseline.")]
    kinds = {x.id: x.kind for x in a.run.profile.arms}
    t = d[(d["arm"].map(kinds) == "tree") & d["baseline_kind"].isin(("linear", "chain"))]
    s = a.speedups
    out = []
    for (arm, base, c), g in t.groupby(["arm", "baseline", "concurrency"], sort=False):
        o = s[(s["arm"] == arm) & (s["baseline"] == base) & (s["concurrency"] == c)] if len(s) else s
        out.append(category_sentence(g, next(o.itertuples()) if len(o) else None))
    return out


def flips_table(f: pd.DataFrame) -> Markup:
    rows = [[escape(r.arm), escape(r.baseline), str(r.concurrency), Markup(escape(r.category)) + (FEW if r.few else ""),
             Markup(f"{r.n} / {r.baseline_n}"), with_ci(r.speedup, r.speedup_lo, r.speedup_hi, 2), escape(r.verdict),
             with_ci(r.overall_speedup, r.overall_lo, r.overall_hi, 3), escape(r.overall_verdict)]
            for r in f.itertuples()]
    cols = _h("arm", "over", "C", "category", "n / n(over)", r"category [95\% CI]", "verdict", r"overall [95\% CI]",
              "overall")
    return tables.latex(pd.DataFrame(rows, columns=cols), "llrlrrlrl")


def flips_note(a, f: pd.DataFrame) -> Markup:
    """What the flips are, and how many a run of this many category intervals shows by chance alone."""
    d = a.categories
    tested = int(d["verdict"].isin(("faster", "slower", "within noise")).sum()) if len(d) else 0
    chance = (1 - stats.LEVEL) * tested
    base = (f"Each category interval is 95\\% on its own: were every one of the {tested} category ratios with an "
            f"interval truly 1, about {num(chance, 1)} would exclude 1 by chance alone, so a lone flip is weak "
            f"evidence.")
    if f.empty:
        return Markup(f"No category's verdict contradicts its overall ratio's (opposite sides of 1, or resolved where "
                      f"the overall ratio is within noise). {base}")
    opposite = int(f["opposite"].sum())
    return Markup(f"{len(f)} category ratio{'' if len(f) == 1 else 's'} flip (below): {opposite} on the opposite side "
                  f"of 1 from the overall ratio, {len(f) - opposite} resolved where the overall ratio is within noise. "
                  f"{base}")


def few_note(a) -> Markup | None:
    d = a.categories
    if d.empty or not d["few"].astype(bool).any():
        return None
    return Markup(f"$\\ddagger$ fewer than {stats.MIN_TAIL} requests on a side: kept, too few to read.")


# ---- between runs: what one run's repetitions cannot see ------------------------------------------------------

def _ratio_name(r) -> str:
    return f"{escape(r.arm)} / {escape(r.baseline)} at C={int(r.concurrency)}"


def between_runs(a) -> Markup:
    """The run against the other analysed runs of its plan beside it (analysis.agreement.between_runs)."""
    b = a.between_runs
    if b.empty:
        return Markup("No other analysed run of this profile on this kind of host lies beside this one, so whether "
                      "its ratios move from run to run is not known here. Its intervals see the noise of its "
                      "repetitions, not a state of the host that lasts a whole run; \\texttt{just agreement} tests "
                      "runs against each other.")
    others = str(b["with_runs"].iloc[0]).split()
    hit = b[b["run_effect"].astype(bool)]
    head = (f"Against {len(others)} other run{'' if len(others) == 1 else 's'} of this profile on this kind of host "
            f"({escape(', '.join(others))}), ratio by ratio, Cochran's Q over the runs' repetition log ratios "
            f"(p $<$ {agreement.FAMILY_LEVEL:g}/{len(b)}, Bonferroni):")
    widened = int((b["between_sd"] > 0).sum())    # where compare.with_between_runs widened the headline interval
    how = (f"Each ratio's headline interval takes in the between-run sd these runs show (DerSimonian--Laird, 0 where "
           f"they agree within noise), beside its repetitions' spread, in quadrature on the log scale: "
           f"widened for {widened} of {len(b)}, so that their verdicts speak for the host, not only for the state it "
           f"was in during this run. The ratio table keeps the repetitions' intervals alone.")
    if hit.empty:
        return Markup(f"{head} no ratio of {len(b)} differs between runs beyond its repetitions' noise. {how}")
    rows = "; ".join(f"{_ratio_name(r)} (runs {escape(r.ratios)}, between-run sd {num(100 * r.between_sd, 1)}\\%)"
                     for r in hit.itertuples())
    return Markup(f"{head} {len(hit)} of {len(b)} ratios differ beyond it: {rows}. A state of the host that lasts "
                  f"a whole run moves them, which no run's repetitions can see. The other {len(b) - len(hit)} show "
                  f"no run effect. {how}")


# ---- the page ---------------------------------------------------------------------------------------------------

def context(a) -> dict:
    p = standings.podium(a)
    flips = compare.category_flips(a.categories, a.speedups)
    bad = a.checks[a.checks["status"] == "fail"]
    return {"podium": podium_table(p), "sentences": podium_sentences(a, p),
            "decomposition": decomposition_table(a), "has_decomposition": not a.decomposition.empty,
            "bug_or_drafter": bug_or_drafter(a), "acceptance_shift": acceptance_shift(a),
            "which_budget": which_budget(a), "which_prompts": which_prompts(a),
            "flips": flips_table(flips) if len(flips) else None, "flips_note": flips_note(a, flips),
            "few_note": few_note(a), "failed_checks": len(bad), "checks": len(a.checks),
            "between_runs": between_runs(a)}
