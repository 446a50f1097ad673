"""The verdict page from hand-made tables: a sentence per concurrency that claims only what its interval supports,
the decomposition's factors in words, the four questions answered or declined with the reason, the categories
(the thin one marked, not dropped) and the flips."""

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd

from analysis.estimate import compare, stats
from analysis.headroom import FILES
from analysis.trust.kinds import FAIL, PASS, Check, Kind, Scope, frame
from ddbench.core.profile import Profile
from report import verdict
from report.tex import environment

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "chain-b15", "kind": "chain", "block_size": 16},
        {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8}]
NAN = float("nan")


def _profile(arms=ARMS, concurrency=(1, 4)) -> Profile:
    return Profile.model_validate({
        "name": "hand", "backend": {"kind": "refengine"}, "models": {"target": "t", "drafter": "d"}, "arms": arms,
        "workload": {"prompt_set": "p.jsonl", "max_tokens": 8},
        "load": {"concurrency": list(concurrency), "requests_per_user": 2}})


def _ratio(r, lo, hi, pairs=6, n_to_resolve=None, mde=0.03):
    return {"speedup": r, "speedup_lo": lo, "speedup_hi": hi, "pairs": pairs, "verdict": compare.verdict(lo, hi),
            "sign_p": 0.03, "mde": mde, "n_to_resolve": n_to_resolve}


def _speedups():
    return pd.DataFrame([
        {"arm": "tree-b15-k8", "baseline": "linear-b16", "baseline_kind": "linear", "concurrency": 1,
         **_ratio(1.09, 1.06, 1.12)},
        {"arm": "tree-b15-k8", "baseline": "chain-b15", "baseline_kind": "chain", "concurrency": 1,
         **_ratio(1.11, 1.08, 1.14)},
        # at C=4 the tree's edge over the linear arm holds 1: within noise, 40 pairs would resolve it
        {"arm": "tree-b15-k8", "baseline": "linear-b16", "baseline_kind": "linear", "concurrency": 4,
         **_ratio(1.01, 0.98, 1.04, n_to_resolve=40)},
        {"arm": "tree-b15-k8", "baseline": "chain-b15", "baseline_kind": "chain", "concurrency": 4,
         **_ratio(1.05, 1.02, 1.08)}])


def _summary():
    rows = []
    for c, thr in ((1, {"ar": 200, "linear-b16": 264, "chain-b15": 258, "tree-b15-k8": 288}),
                   (4, {"ar": 470, "linear-b16": 520, "chain-b15": 497, "tree-b15-k8": 524})):
        for arm, t in thr.items():
            tau = 1.0 if arm == "ar" else {"linear-b16": 5.5, "chain-b15": 5.5, "tree-b15-k8": 6.2}[arm] - 0.1 * (c > 1)
            rows.append({"arm": arm, "kind": arm.split("-")[0], "concurrency": c, "reps": 6, "throughput": t,
                         "tau": tau, "tau_t_lo": tau - 0.2, "tau_t_hi": tau + 0.2})
    return pd.DataFrame(rows)


def _decomposition():
    def row(arm, ref, kind, c, thr, tau, step):
        return {"arm": arm, "reference": ref, "reference_kind": kind, "concurrency": c, "pairs": 6,
                "throughput_ratio": thr[0], "throughput_ratio_lo": thr[1], "throughput_ratio_hi": thr[2],
                "tau_ratio": tau[0], "tau_ratio_lo": tau[1], "tau_ratio_hi": tau[2],
                "step_time_ratio": step[0], "step_time_ratio_lo": step[1], "step_time_ratio_hi": step[2]}
    return pd.DataFrame([
        row("tree-b15-k8", "linear-b16", "linear", 1, (1.09, 1.06, 1.12), (1.13, 1.10, 1.15), (0.965, 0.95, 0.98)),
        row("tree-b15-k8", "chain-b15", "chain", 1, (1.11, 1.08, 1.14), (1.13, 1.10, 1.15), (0.985, 0.96, 1.01)),
        row("tree-b15-k8", "linear-b16", "linear", 4, (1.01, 0.98, 1.04), (1.14, 1.13, 1.15), (0.885, 0.86, 0.91))])


def _category(cat, lo, hi, n=40, arm="tree-b15-k8", base="linear-b16", kind="linear", c=1):
    return {"arm": arm, "baseline": base, "baseline_kind": kind, "concurrency": c, "category": cat, "n": n,
            "baseline_n": n, "few": n < stats.MIN_TAIL, "tau": 6.0, "baseline_tau": 5.0,
            **_ratio(np.sqrt(lo * hi) if lo == lo else 1.1, lo, hi)}


def _categories():
    return pd.DataFrame([_category("code", 1.10, 1.20),
                         _category("chat", 0.95, 1.06),                           # within noise: named, no claim
                         _category("json", 1.05, 1.25, n=stats.MIN_TAIL - 1),     # thin: kept and marked
                         _category("rare", NAN, NAN, n=1),                        # one pair: no interval
                         _category("code", 0.90, 0.97, c=4),                      # resolved where overall is noise
                         _category("chat", 0.97, 1.03, c=4)], columns=compare.CATEGORY_COLUMNS)


def _analysis(tmp_path, arms=ARMS, concurrency=(1, 4), headroom=False, lossless_fail=False, commit=True):
    (tmp_path / "tables").mkdir(exist_ok=True)
    if headroom:
        _headroom_tables(tmp_path / "tables")
    checks = [Check(Kind.LOSSLESS, Scope("tree-b15-k8"), FAIL if lossless_fail else PASS, "")]
    if commit:
        checks.append(Check(Kind.COMMIT_REQUESTS, Scope("tree-b15-k8"), PASS, ""))
    lossless = pd.DataFrame([{"arm": x["id"], "compared": 10, "match_rate": 0.9 if lossless_fail else 1.0}
                             for x in arms])
    counts = pd.DataFrame([{"comparison": "lossless", "arm": "tree-b15-k8", "ties": 0 if lossless_fail else 1,
                            "failures": 1 if lossless_fail else 0}])
    return SimpleNamespace(
        run=SimpleNamespace(profile=_profile(arms, concurrency), path=tmp_path), summary=_summary(),
        speedups=_speedups(), decomposition=_decomposition(), categories=_categories(), cells=pd.DataFrame(),
        boots={}, lossless=lossless, lossless_note=None, checks=frame(checks),
        triage=SimpleNamespace(counts=counts, note=None, threshold=0.19), between_runs=pd.DataFrame(),
        by_position=pd.DataFrame())


def _headroom_tables(folder):
    frames = {
        "ranks": pd.DataFrame({"depth": [0, 1], "roots": [10, 10], "rank_1": [0.6, 0.8], "rank_2": [0.2, 0.1],
                               "rank_3_4": [0.1, 0.05], "rank_5_8": [0.05, 0.05], "rank_gt_8": [0.05, 0.0]}),
        "first_mismatch": pd.DataFrame([{"topk": 8, "roots": 10, "whole_chain": 3, "mismatches": 7, "sibling": 6,
                                         "sibling_share": 6 / 7, "mean_depth": 1.5, "rank_1": 0.0, "rank_2": 4 / 7,
                                         "rank_3_4": 1 / 7, "rank_5_8": 1 / 7, "rank_gt_8": 1 / 7}]),
        "after_sibling": pd.DataFrame([{"topk": 8, "prefix": "spine", "depth": 0, "sibling_n": 4, "sibling_next": 2,
                                        "sibling_rate": 0.5, "spine_n": 20, "spine_next": 18, "spine_rate": 0.9}]),
        # the tree accepts 2.2 drafts per position to the chain's 2.0: a τ ratio of 3.2 / 3.0
        "headroom": pd.DataFrame([{"budget": 15, "topk": 8, "roots": 10, "chain_expected": 2.0, "tree_expected": 2.5,
                                   "ratio_mean": 1.3, "ratio_of_means": 1.25, "chain_accepted": 2.0,
                                   "tree_accepted": 2.2, "accepted_ratio": 1.1}]),
        "setup": pd.DataFrame([{"prompts": 2, "roots": 10, "stride": 1, "depth": 2, "max_tokens": 5, "cpu_s": 1.25,
                                "wall_s": 1.3, "threads": 1}])}
    for key, df in frames.items():
        df.to_csv(folder / FILES[key], index=False)


def _plain(m) -> str:
    """The TeX as words: whitespace runs as one space, arm ids without the ligature breaks escape() puts in."""
    return re.sub(r"\s+", " ", str(m)).replace("-{}", "-")


def test_one_sentence_per_concurrency_each_as_far_as_its_interval_goes(tmp_path):
    a = _analysis(tmp_path)
    lines = [_plain(x) for x in verdict.context(a)["sentences"]]
    assert len(lines) == 2
    one, four = lines
    assert one.startswith("At C=1, tree-b15-k8 is fastest") and "faster at 95\\% confidence" in one
    assert "1.090$\\times$ the runner-up linear-b16 (95\\% CI 1.060--1.120 over 6 repetition pairs" in one
    # the decomposition's factors, each in the words its interval supports
    assert "accepts more ($\\tau$ ratio 1.130$\\times$, 95\\% CI 1.100--1.150)" in one
    # the step-time factor reads forwards: the tree's step over the linear arm's, as a cost (1 / 0.965: +4%)
    assert "its step costs more (+4\\% [+2 to +5])" in one
    # within noise: no winner named, the pairs that would resolve it given
    assert "within noise of each other" in four and "does not say which is faster" in four
    assert "is fastest" not in four and "faster at 95" not in four
    assert "about 40 pairs would resolve an effect this size" in four


def test_the_podium_sentence_for_each_verdict():
    base = dict(concurrency=1, cuda_graphs=True, sampling="t0", fastest="x", fastest_throughput=10.0, runner_up="y",
                runner_up_throughput=9.0, source="speedups table")
    d = pd.DataFrame()
    slower = _plain(verdict.podium_sentence(SimpleNamespace(**base, **_ratio(0.97, 0.95, 0.99)), (), d))
    assert "but paired by repetition it is slower" in slower and "no arm is named fastest" in slower
    none = _plain(verdict.podium_sentence(SimpleNamespace(**base, **{**_ratio(1.1, NAN, NAN), "pairs": 1}), (), d))
    assert "too few for an interval, so no claim" in none
    refused = SimpleNamespace(**{**base, "source": "refusing: temperature differs"},
                              **{**_ratio(NAN, NAN, NAN), "verdict": "not compared"})
    assert "not compared: refusing: temperature differs" in _plain(verdict.podium_sentence(refused, (), d))
    alone = SimpleNamespace(**{**base, "runner_up": NAN, "cuda_graphs": False}, **_ratio(NAN, NAN, NAN))
    assert _plain(verdict.podium_sentence(alone, ("cuda_graphs",), d)).startswith(
        "At C=1, CUDA graphs off, only x ran")


def test_the_decomposition_read_backwards_inverts_every_factor():
    d = _decomposition()
    words = _plain(verdict.edge(d, "linear-b16", "tree-b15-k8", 1))
    assert "accepts less ($\\tau$ ratio 0.885$\\times$, 95\\% CI 0.870--0.909)" in words
    assert "costs less" in words


def test_the_decomposition_table_carries_the_within_noise_pairs(tmp_path):
    tex = str(verdict.decomposition_table(_analysis(tmp_path)))
    assert "1.130 [1.100--1.150]" in tex and "+4\\% [+2 to +5]" in tex   # step cost, not its inverse
    assert "within noise; $\\approx$40 pairs would resolve it" in tex


def test_the_categories_a_thin_one_marked_within_noise_named_and_no_interval_apart(tmp_path):
    lines = [_plain(x) for x in verdict.which_prompts(_analysis(tmp_path))]
    one = next(x for x in lines if "at C=1" in x and "over linear-b16" in x)
    assert "faster on code (1.149$\\times$, 95\\% CI 1.100--1.200), json" + str(verdict.FEW) in one
    assert "within noise on chat" in one and "chat (" not in one         # no ratio is claimed for it
    assert "no interval for rare" + str(verdict.FEW) in one
    four = next(x for x in lines if "at C=4" in x)
    assert "(overall 1.010$\\times$, 95\\% CI 0.980--1.040: within noise)" in four
    assert "slower on code" in four
    note = _plain(verdict.few_note(_analysis(tmp_path)))
    assert f"fewer than {stats.MIN_TAIL} requests on a side: kept" in note


def test_all_within_noise_resolves_no_category():
    d = pd.DataFrame([_category("code", 0.9, 1.1), _category("chat", 0.95, 1.05)])
    assert "no category resolved; within noise on code, chat" in _plain(verdict.category_sentence(d, None))


def test_the_flips_come_onto_the_page_with_the_chance_count(tmp_path):
    ctx = verdict.context(_analysis(tmp_path))
    flips = str(ctx["flips"])
    assert "code" in flips and "within noise" in flips and "slower" in flips
    note = _plain(ctx["flips_note"])
    tested = 5                               # the category rows with an interval
    assert "1 category ratio flip (below): 0 on the opposite side" in note
    assert f"of the {tested} category ratios" in note and f"about {(1 - stats.LEVEL) * tested:.1f} would" in note


def test_acceptance_across_concurrency_states_values_but_not_an_effect(tmp_path):
    text = _plain(verdict.acceptance_shift(_analysis(tmp_path)))
    assert "tree-b15-k8 6.20 [6.00--6.40] at C=1, 6.10 [5.90--6.30] at C=4 (intervals overlap)" in text
    assert "cannot attribute a shift to $C$" in text and "not a matched comparison" in text
    one = _analysis(tmp_path, concurrency=(1,))
    one.summary = one.summary[one.summary["concurrency"] == 1]
    assert _plain(verdict.acceptance_shift(one)).startswith("The run cannot answer: it measures one concurrency (C=1)")


def test_which_budget_needs_three(tmp_path, monkeypatch):
    text = _plain(verdict.which_budget(_analysis(tmp_path)))
    assert text.startswith("The run cannot answer: choosing a budget needs at least 3 tree budgets")
    assert "it has budget 15 at block 16." in text
    arms = ARMS + [{"id": f"tree-b{b}-k8", "kind": "tree", "block_size": 16, "budget": b, "topk": 8} for b in (31, 63)]
    a = _analysis(tmp_path, arms=arms)
    a.summary = pd.concat([a.summary, pd.DataFrame([
        {"arm": "tree-b31-k8", "kind": "tree", "concurrency": 1, "reps": 6, "throughput": 300, "tau": 6.8},
        {"arm": "tree-b63-k8", "kind": "tree", "concurrency": 1, "reps": 6, "throughput": 295, "tau": 7.1}])])
    monkeypatch.setattr(compare, "speedup", lambda x, y, c: {**_ratio(1.02, 0.97, 1.08, n_to_resolve=60),
                                                             "arm": x.arm, "baseline": y.arm})
    text = _plain(verdict.which_budget(a))
    # the chain is the family's budget L-1, as on the budget section's axis (standings.points)
    assert "At C=1, block 16, budgets 15 (the chain, 258.0 tok/s, $\\tau$ 5.50), 15 (288.0 tok/s" in text
    assert "budget 31 has the highest throughput" in text
    assert "within noise (the minimum detectable effect at 6 pairs is 3.0\\%, and about 60 pairs" in text
    assert "the run does not single out one budget: budget 31 is not resolved from the chain (B=15), 15, 63" in text
    # at C=4 only B=15 and the chain finished: the tree over the chain from the speedups table, 1.05 [1.02, 1.08]
    assert "budget 15 has the highest throughput, 1.050$\\times$ the chain (B=15) (95\\% CI 1.020--1.080 over 6 " \
           "pairs), faster at 95\\% confidence. So budget 15 is the best of those measured" in text


def test_bug_or_drafter_without_a_diagnosis_says_what_to_run(tmp_path):
    text = _plain(verdict.bug_or_drafter(_analysis(tmp_path)))
    assert text.startswith("No sign of a bug in what the run checks")
    assert "the run cannot say" in text and "just headroom" in text


def test_bug_or_drafter_a_failure_leaves_a_bug_open(tmp_path):
    text = _plain(verdict.bug_or_drafter(_analysis(tmp_path, headroom=True, lossless_fail=True)))
    assert text.startswith("\\textbf{A bug is not ruled out}") and "1 of 1 differing outputs are failures" in text


def test_bug_or_drafter_with_the_diagnosis(tmp_path):
    text = _plain(verdict.bug_or_drafter(_analysis(tmp_path, headroom=True)))
    assert text.startswith("\\textbf{The drafter; no sign of a bug}")
    assert "right in 50.0\\% of cases, against 90.0\\% after a rank-1 match" in text
    # (1 + 2.2) / (1 + 2.0) from the diagnosis against the measured 1.13 [1.10, 1.15] over the chain
    assert "B=15, K=8 1.067$\\times$ along the target's greedy path, 1.130$\\times$ (95\\% CI 1.100--1.150) " \
           "measured over chain-b15 at C=1, above it" in text
    unchecked = _plain(verdict.bug_or_drafter(_analysis(tmp_path, headroom=True, commit=False)))
    assert unchecked.startswith("\\textbf{The drafter, as far as the run checks}") and "was not checked" in unchecked


def test_a_tree_below_the_diagnosis_is_not_the_drafter_alone(tmp_path):
    a = _analysis(tmp_path, headroom=True)
    a.decomposition.loc[a.decomposition["reference"] == "chain-b15", ["tau_ratio", "tau_ratio_lo", "tau_ratio_hi"]] = \
        [1.02, 1.01, 1.03]
    assert _plain(verdict.bug_or_drafter(a)).startswith("\\textbf{Not the drafter alone}")


def test_the_page_renders_through_the_template(tmp_path):
    ctx = verdict.context(_analysis(tmp_path, headroom=True))
    env = environment()
    page = env.from_string("((( v.podium )))((* for s in v.sentences *))((( s )))((* endfor *))"
                           "((( v.decomposition )))((( v.bug_or_drafter )))((( v.which_budget )))").render(v=ctx)
    assert "tree-b15-k8" in _plain(page) and "\\begin{tabular}" in page


def test_between_runs_says_what_one_run_cannot_know_and_names_the_ratios_that_move(tmp_path):
    a = _analysis(tmp_path)
    alone = _plain(verdict.between_runs(a))
    assert "No other analysed run of this profile" in alone and "not known here" in alone
    assert "\\texttt{just agreement}" in alone and "\t" not in str(verdict.between_runs(a))  # a TeX macro, not a tab
    row = {"arm": "linear-b16", "baseline": "ar", "concurrency": 4, "ratios": "1.041 0.934", "runs": 2, "q": 30.0,
           "q_p": 1e-7, "i2": 0.97, "between_sd": 0.052, "pooled": 0.99, "pooled_lo": 0.5, "pooled_hi": 2.0,
           "run_effect": True, "with_runs": "20261201T173525Z-447a7c"}
    calm = {**row, "arm": "tree-b15-k8", "baseline": "linear-b16", "ratios": "1.090 1.090", "q_p": 0.97,
            "between_sd": 0.0, "run_effect": False}
    a.between_runs = pd.DataFrame([row, calm])
    both = _plain(verdict.between_runs(a))
    assert "Against 1 other run of this profile" in both and "20261201T173525Z-447a7c" in both
    assert "1 of 2 ratios differ beyond it: linear-b16 / ar at C=4 (runs 1.041 0.934, between-run sd 5.2\\%)" in both
    assert "The other 1 show no run effect" in both
    assert "headline interval takes in the between-run sd" in both and "widened for 1 of 2" in both
    a.between_runs = pd.DataFrame([calm])
    assert "no ratio of 1 differs between runs" in _plain(verdict.between_runs(a))


def test_where_the_steps_stop_says_whether_a_longer_block_or_a_wider_tree_would_pay(tmp_path):
    a = _analysis(tmp_path)
    # linear-b16 at C=1, 100 steps: 20 took no draft, 30 took all 15; positions 13-15 were reached 37, 37 and 33
    # times and accepted 37, 33 and 30 times (100 of 107). Its C=4 rows are another picture, not read.
    stopped = np.array([20, 10, 0, 0, 0, 33, 0, 0, 0, 0, 0, 0, 0, 4, 3, 30])
    reach = stopped[::-1].cumsum()[::-1]                     # steps that took at least i drafts
    t = pd.DataFrame({"arm": "linear-b16", "concurrency": 1, "position": range(16), "steps_stopped": stopped,
                      "share_stopped": stopped / 100, "reached": np.r_[100, reach[:-1]], "accepted": reach})
    a.by_position = pd.concat([t, t.assign(concurrency=4, share_stopped=0.5)])
    text = _plain(verdict.which_budget(a))
    assert text.startswith("The run cannot answer")           # the budget question as before, then the positions
    assert ("linear-b16 at C=1: 30.0\\% of steps took all 15 drafts (the last three positions, once reached, "
            "accepted 93\\% of the time), 20.0\\% took none") in text
    a.by_position = pd.DataFrame()
    assert "Per draft position" not in _plain(verdict.which_budget(a))
