"""The cross-check's generated text, from tables written by hand: the numbers it states, a gap line
only where τ differs beyond 5%, and no cause it did not measure."""

from types import SimpleNamespace

import pandas as pd

from analysis.trust.crosscheck import ARM_COLUMNS, THROUGHPUT_COLUMNS, VERDICT_COLUMNS, CrossCheck
from report.crosscheck import caveats, reading, summary_sentence, title, verdict_sentence


def _x(arms, thr=(), kinds=("sglang", "refengine"), labels=("SGLang 0.5.15", "reference engine")):
    sides = pd.DataFrame({"side": ["this", "other"], "label": list(labels), "backend": list(kinds)})
    return CrossCheck(sides, pd.DataFrame(arms, columns=ARM_COLUMNS),
                      pd.DataFrame(list(thr), columns=THROUGHPUT_COLUMNS))


def _arm(arm, kind, tx, ty, lo, hi, pairs=10, same=10):
    gap = 100 * (tx / ty - 1)
    return {"arm": arm, "kind": kind, "temperature": 0.0, "tau_this": tx, "tau_other": ty, "tau_gap_pct": gap,
            "tau_gap_pct_lo": lo, "tau_gap_pct_hi": hi, "tau_within_tolerance": abs(gap) <= 5, "pairs": pairs,
            "identical": same, "agreement_rate": same / pairs, "prefix_chars_mean": 100.0}


def _plain(tex) -> str:
    """TeX as escape() wrote it, with the ligature breaks in arm names taken out."""
    return str(tex).replace("-{}", "-")


ARMS = [_arm("ar", "ar", 1, 1, 0, 0, same=9), _arm("linear-b16", "linear", 3.0, 2.9, -1, 8),
        _arm("tree-b15-k8", "tree", 4.4, 4.0, 4, 16, same=6)]
THR = [{"arm": "ar", "concurrency": 1, "ratio": 0.8}, {"arm": "tree-b15-k8", "concurrency": 8, "ratio": 1.25}]


def test_reading_states_the_numbers():
    text = _plain(reading(_x(ARMS, THR)))
    assert ("At T=0 and C=1, 1 of 2 speculative arms judged on both sides agree in $\\tau$ within 5\\% between "
            "A (SGLang 0.5.15) and B (reference engine) (gap A/B$-$1: linear-b16 +3.4\\%, "
            "tree-b15-k8 +10.0\\%).") in text
    assert "identical for 25 of 30 paired requests (83.3\\%); per arm from 60.0\\% (tree-b15-k8) to 100.0\\% " \
           "(linear-b16)" in text
    assert "from 0.800$\\times$ (ar, C=1) to 1.250$\\times$ (tree-b15-k8, C=8)" in text


def test_gap_line_only_beyond_tolerance_and_without_a_cause():
    lines = [_plain(c) for c in caveats(_x(ARMS))]
    assert len(lines) == 1
    assert lines[0].startswith("$\\tau$ of tree-b15-k8 differs by +10.0\\% (95\\% CI 4.0--16.0\\%: the interval "
                               "excludes 0): 4.40 on A against 4.00 on B")
    assert lines[0].endswith("This run measured the gap, not its cause.")
    for word in ("because", "due to", "caused by", "explained"):
        assert word not in lines[0]


def test_no_gap_line_when_all_agree():
    assert caveats(_x(ARMS[:2])) == []


def test_title_names_the_backends():
    assert title(_x(ARMS)) == "Cross-check: SGLang vs reference engine"
    same = _x(ARMS, kinds=("refengine", "refengine"), labels=("reference engine (r1)", "reference engine (r2)"))
    assert title(same) == "Cross-check: reference engine (r1) vs reference engine (r2)"


def test_nothing_measured_says_so():
    text = reading(_x([{"arm": "ar", "kind": "ar", "note": "refused"}]))
    assert "No speculative arm has $\\tau$ measured at C=1" in text and "No request pair at C=1" in text


def test_sampled_runs_do_not_claim_greedy():
    arms = [{**a, "temperature": 0.7} for a in ARMS]
    assert _plain(reading(_x(arms))).startswith("At T=0.7 and C=1, 1 of 2 speculative arms")


def test_an_arm_over_another_prompt_mix_is_not_judged():
    unjudged = {**_arm("tree-b31-k31", "tree", 5.0, 4.0, 20, 30), "tau_within_tolerance": None}
    text = _plain(reading(_x([*ARMS, unjudged])))
    assert "1 of 2 speculative arms judged" in text and "1 not judged: the two runs' C=1 cells sent different " \
           "prompt mixes" in text
    assert [c for c in caveats(_x([*ARMS, unjudged])) if "tree-b31-k31" in str(c)] == []


def test_the_gap_line_splits_tau_by_output_agreement_where_one_side_can():
    split = {**ARMS[2], "tau_other_where_identical": 4.3, "tau_other_where_differing": 3.5}
    line = _plain(caveats(_x([ARMS[0], split]))[0])
    assert "Outputs are identical on 6 of 10 pairs. Over those, B's $\\tau$ is 4.30 (3.50 over the rest" in line
    assert "within 5\\% of A's 4.40: the split of outputs accounts for the gap" in line
    far = {**split, "tau_other_where_identical": 4.0}
    assert "does not account for the gap" in _plain(caveats(_x([ARMS[0], far]))[0])


CHUNKS = "steps from stream chunks, equal to /metrics in 8 of 8 cells"


def test_the_gap_line_splits_both_sides_the_same_way_and_names_the_steps():
    split = {**ARMS[2], "tau_this_where_identical": 4.02, "tau_other_where_identical": 4.0,
             "tau_this_where_differing": 4.9, "tau_other_where_differing": 4.1, "split_pairs": 10,
             "split_steps_this": CHUNKS, "split_steps_other": "spec_verify_ct"}
    line = _plain(caveats(_x([ARMS[0], split]))[0])
    assert ("Outputs are identical on 6 of 10 pairs. Over those, $\\tau$ is 4.02 on A and 4.00 on B (A/B$-$1 "
            "+0.5\\%; over the rest, whose tokens differ between the engines, 4.90 on A and 4.10 on B), within 5\\% "
            "of each other: the split of outputs accounts for the gap.") in line
    assert ("A from its stream chunks (one per verify step after the first), equal to /metrics in 8 of 8 cells; "
            "B from its records' spec\\_verify\\_ct.") in line
    assert "returns no per-request" not in line
    far = {**split, "tau_this_where_identical": 4.4}
    assert "still beyond 5\\% of each other: the split of outputs does not account for the gap" in \
        _plain(caveats(_x([ARMS[0], far]))[0])
    text = _plain(reading(_x([ARMS[0], split])))
    assert ("Split the same way on both sides, over the pairs whose greedy outputs are identical, $\\tau$ A/B is "
            "tree-b15-k8 4.02/4.00 (A's verify steps from its stream chunks") in text


def _verdicts(tau_twin, cost_twin, tau_pair, cost_pair, c=8):
    return pd.DataFrame([{"arm": "tree-b31-k31", "reference": "linear-b16", "arm_other": "tree-b31-k31",
                          "reference_other": "linear-b16", "concurrency": c,
                          "ratio_this": tau_twin / cost_twin, "tau_ratio_this": tau_twin, "step_cost_this": cost_twin,
                          "ratio_other": tau_pair / cost_pair, "tau_ratio_other": tau_pair,
                          "step_cost_other": cost_pair}], columns=VERDICT_COLUMNS)


def test_the_verdict_sentence_names_the_factor_that_parts_a_twin_from_its_pair():
    x = _x(ARMS, THR)
    x.twin, x.verdicts = "this", _verdicts(1.20, 1.36, 1.21, 1.02)
    text = _plain(verdict_sentence(x))
    assert "differ most for tree-b31-k31 over linear-b16 at C=8: 0.882 against 1.186" in text
    assert "mostly through the step, which costs 1.36x its reference's on the twin and 1.02x on the pair" in text
    x.verdicts = _verdicts(1.30, 1.03, 1.08, 1.07, c=1)
    text = _plain(verdict_sentence(x))
    assert "mostly through acceptance ($\\tau$ ratio 1.300 against 1.080)" in text
    x.twin = None           # two runs of one pair: no verdict to set side by side
    assert str(verdict_sentence(x)) == ""


def test_no_arm_judged_is_not_read_as_disagreement():
    unjudged = [{**a, "tau_within_tolerance": None} if a["kind"] != "ar" else a for a in ARMS]
    text = _plain(reading(_x(unjudged)))
    assert "no speculative arm's $\\tau$ is judged between A (SGLang 0.5.15) and B (reference engine)" in text
    assert "2 not judged: the two runs' C=1 cells sent different prompt mixes" in text
    assert "0 of" not in text
    summary = _plain(summary_sentence(SimpleNamespace(crosscheck=_x(unjudged))))
    assert "no speculative arm's $\\tau$ is judged at C=1 (the two runs' C=1 cells sent different" in summary


def test_summary_counts_only_the_judged_arms():
    unjudged = {**_arm("tree-b31-k31", "tree", 5.0, 4.0, 20, 30), "tau_within_tolerance": None}
    summary = _plain(summary_sentence(SimpleNamespace(crosscheck=_x([*ARMS, unjudged]))))
    assert "1 of 2 judged speculative arm(s) agree in $\\tau$ within 5\\% at C=1, 1 not judged; greedy outputs " \
           "identical for 35 of 40 paired C=1 requests." in summary
