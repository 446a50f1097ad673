"""Matched comparisons: refusals name the differing condition; the decomposition is an identity."""

import pytest
from handrun import profile, write_hand_run

from analysis.analyze import analyze
from analysis.estimate import compare, metrics
from analysis.read import ingest


def test_refuses_different_concurrency(synth_analysis):
    run = synth_analysis.run
    with pytest.raises(compare.MismatchError, match=r"concurrency differs \(1 vs 4\)"):
        compare.require_matched(compare.conditions(run, "tree-b15-k8", 1), compare.conditions(run, "chain-b16", 4),
                                "tree-b15-k8 at C=1 with chain-b16 at C=4")


def _side(tmp_path, name, **over):
    a = analyze(write_hand_run(tmp_path / name, prof=profile(**over)), bootstrap=50)
    return a, compare.Side(a.run, a.cells, a.boots, "tree-b4-k2"), compare.Side(a.run, a.cells, a.boots, "ar")


def test_refuses_across_runs_with_another_model(tmp_path):
    _, tree, _ = _side(tmp_path, "x")
    _, _, ar_other = _side(tmp_path, "z", models={"target": "other-target", "drafter": "d"})
    with pytest.raises(compare.MismatchError, match=r"target model differs \('t' vs 'other-target'\)"):
        compare.speedup(tree, ar_other, 1)


def test_refuses_when_sent_temperature_differs(tmp_path):
    from handrun import hand_records
    _, tree, _ = _side(tmp_path, "x")
    ar, _ = hand_records()
    for r in ar:
        r.temperature = 0.7
    b = analyze(write_hand_run(tmp_path / "y", ar=ar), bootstrap=50)
    with pytest.raises(compare.MismatchError, match=r"temperature differs \(\(0.0,\) vs \(0.7,\)\)"):
        compare.speedup(tree, compare.Side(b.run, b.cells, b.boots, "ar"), 1)


def test_refuses_when_sent_max_tokens_differ(tmp_path):
    from handrun import hand_records
    _, tree, _ = _side(tmp_path, "x")
    ar, t = hand_records()
    for r in ar:
        r.max_tokens = 16
    b = analyze(write_hand_run(tmp_path / "y", ar=ar), bootstrap=50)
    with pytest.raises(compare.MismatchError, match=r"max_tokens differs \(\(8,\) vs \(16,\)\)"):
        compare.speedup(tree, compare.Side(b.run, b.cells, b.boots, "ar"), 1)


def test_refuses_runtime_switch_unless_under_study(tmp_path):
    _, tree, _ = _side(tmp_path, "x")
    _, _, ar_eager = _side(tmp_path, "y", runtime={"overlap_scheduler": False})
    with pytest.raises(compare.MismatchError, match="overlap scheduler differs"):
        compare.speedup(tree, ar_eager, 1)
    assert compare.speedup(tree, ar_eager, 1, vary=("overlap scheduler",))["speedup"] == pytest.approx(10 / 8)


def test_matched_pair_across_runs_is_compared(tmp_path):
    _, tree, _ = _side(tmp_path, "x")
    _, _, ar = _side(tmp_path, "y")
    assert compare.speedup(tree, ar, 1)["speedup"] == pytest.approx(10 / 8)


def test_decomposition_identity(synth_analysis):
    d = synth_analysis.decomposition
    # each tree against its chain and its linear arm, each chain against its linear arm, at C = 1 and 4
    assert sorted(zip(d["arm"], d["reference_kind"], strict=True)) == sorted(
        [("tree-b15-k8", "chain")] * 2 + [("tree-b15-k8", "linear")] * 2 + [("chain-b16", "linear")] * 2)
    for r in d.itertuples():
        # per cell throughput = τ × C / step time, so the geometric means over pairs keep the identity
        assert r.product == pytest.approx(r.throughput_ratio, rel=1e-9)
        if r.arm == "chain-b16":   # a chain verifies linear's drafts: the same steps, τ ratio exactly 1
            assert r.tau_ratio == r.tau_ratio_lo == r.tau_ratio_hi == pytest.approx(1.0, abs=1e-12)
        elif r.pairs >= 2:
            assert r.tau_ratio_lo < r.tau_ratio < r.tau_ratio_hi
            assert r.step_time_ratio_lo < r.step_time_ratio < r.step_time_ratio_hi
    cells = synth_analysis.cells
    ok = cells[(cells["status"] == "ok") & (cells["kind"] != "ar")]
    assert ((ok["throughput"] - ok["tau"] / ok["step_time_s"] * ok["concurrency"]).abs() < 1e-9).all()


def test_speedup_intervals_bracket_the_truth(synth_analysis):
    # the simulator's tree accepts more than its chain with the same drafter: the CI must say so
    s = synth_analysis.speedups.set_index(["arm", "baseline", "concurrency"])
    r = s.loc[("tree-b15-k8", "linear-b16", 1)]
    assert 1 < r["speedup_lo"] < r["speedup"] < r["speedup_hi"]
    assert not ((synth_analysis.speedups["arm"] == "ar").any())


def test_failed_cell_is_left_out_of_comparisons(synth_analysis):
    s = synth_analysis.speedups.set_index(["arm", "baseline", "concurrency"])
    assert s.loc[("tree-b15-k8", "ar", 4)]["reps"] == 2        # rep 2 of 3 failed in the synthetic run
    summary = synth_analysis.summary.set_index(["arm", "concurrency"])
    assert summary.loc[("tree-b15-k8", 4)]["reps"] == 2


def test_category_table(synth_analysis):
    c = synth_analysis.categories
    assert set(c["category"]) == {"chat", "code", "math"}
    over_ar = c[(c["arm"] == "tree-b15-k8") & (c["baseline_kind"] == "ar") & (c["concurrency"] == 1)]
    code = over_ar[over_ar["category"] == "code"].iloc[0]
    chat = over_ar[over_ar["category"] == "chat"].iloc[0]
    assert code["speedup"] > chat["speedup"] and code["tau"] > chat["tau"]   # code is easier to draft in the simulator


def test_ingest_and_metrics_agree_on_window(synth_run):
    run = ingest.load(synth_run)
    req = metrics.per_request(run.requests, run.chunks, {a.id: a.kind for a in run.profile.arms})
    req, cells = metrics.mark_window(req, run.cells)
    assert (cells["window_source"] == "status").all()
    assert not req.loc[req["warmup"].astype(bool), "in_window"].any()


def _pairs(monkeypatch, arms: list[dict]) -> list[tuple[str, str, bool]]:
    """(arm, baseline, ablation) of each speedups row of an SGLang profile with these arms."""
    from types import SimpleNamespace

    from ddbench.core.profile import Profile

    p = Profile.model_validate({
        "name": "hand", "backend": {"kind": "sglang"}, "models": {"target": "t", "drafter": "d"},
        "placement": {"device": "cuda", "gpus": [0]}, "arms": arms,
        "workload": {"prompt_set": "p.jsonl", "max_tokens": 8}, "load": {"concurrency": [1], "requests_per_user": 2}})
    monkeypatch.setattr(compare, "speedup", lambda x, y, c: {"arm": x.arm, "baseline": y.arm, "concurrency": c})
    rows, refusals = compare.speedups(SimpleNamespace(profile=p), None, {})
    assert refusals == []
    return [(r["arm"], r["baseline"], r["ablation"]) for r in rows.to_dict("records")]


AR, LINEAR = {"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16}
TREE = {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8}
OFF = {"overlap_scheduler": False, "ablation": "overlap held off"}


def test_ablation_arms_are_compared_beside_the_deployable_baseline_never_instead(monkeypatch):
    pairs = _pairs(monkeypatch, [AR, {"id": "ar-no-overlap", "kind": "ar", **OFF}, LINEAR, TREE])
    assert pairs == [("ar-no-overlap", "ar", True),
                     ("linear-b16", "ar", False), ("linear-b16", "ar-no-overlap", True),
                     ("tree-b15-k8", "ar", False), ("tree-b15-k8", "ar-no-overlap", True),
                     ("tree-b15-k8", "linear-b16", False)]


def test_a_speculative_ablation_is_set_against_its_deployable_self_and_the_arms_that_hold_its_switch(monkeypatch):
    """linear-b16-no-overlap against linear-b16 says what overlap is worth to DFLASH; the tree held off against
    DFLASH held off is the comparison as the synchronous path runs it; both also against deployable AR."""
    pairs = _pairs(monkeypatch, [AR, LINEAR, TREE, {**LINEAR, "id": "linear-b16-no-overlap", **OFF},
                                 {**TREE, "id": "tree-b15-k8-no-overlap", **OFF}])
    assert pairs == [("linear-b16", "ar", False),
                     ("tree-b15-k8", "ar", False), ("tree-b15-k8", "linear-b16", False),
                     ("tree-b15-k8", "linear-b16-no-overlap", True),
                     ("linear-b16-no-overlap", "linear-b16", True), ("linear-b16-no-overlap", "ar", True),
                     ("tree-b15-k8-no-overlap", "tree-b15-k8", True), ("tree-b15-k8-no-overlap", "ar", True),
                     ("tree-b15-k8-no-overlap", "linear-b16", True),
                     ("tree-b15-k8-no-overlap", "linear-b16-no-overlap", True)]
