"""Page 1's wording: a ratio's verdict is what its interval says, and a step's cost reads forwards."""

from report import front, tables


def test_a_ratio_cell_says_no_more_than_its_interval():
    assert str(front.ratio_cell(1.05, 0.98, 1.12, "within noise")) == "1.05 (0.98--1.12) within noise"
    assert "faster" not in str(front.ratio_cell(1.05, 0.98, 1.12, "within noise"))
    assert str(front.ratio_cell(0.69, 0.58, 0.82, "slower")) == r"0.69 (0.58--0.82) \textbf{slower}"
    assert str(front.ratio_cell(float("nan"), float("nan"), float("nan"), "not compared")) == "--"


def test_step_cost_reads_as_the_arms_step_over_the_references():
    # the analysis' step-time ratio is the reference's step over the arm's: 0.5 means the arm's step costs twice
    row = {"step_time_ratio": 0.5, "step_time_ratio_lo": 0.4, "step_time_ratio_hi": 0.625}
    assert front.step_cost(row) == "its step costs 100\\% more, 95\\% CI 60 to 150\\%"
    assert str(tables.step_cost(row)) == "+100\\% [+60 to +150]"
    cheaper = {"step_time_ratio": 1.25, "step_time_ratio_lo": 1.0, "step_time_ratio_hi": 1.6}
    assert front.step_cost(cheaper).startswith("its step costs 20\\% less")
    assert str(tables.step_cost(cheaper)) == "$-$20\\% [$-$38 to +0]"


def _ablation_analysis(c: int = 1, models: dict | None = None):
    """ar, the ablation ar-no-overlap and linear-b16 at one C; the ablation reports the highest throughput."""
    from types import SimpleNamespace

    import pandas as pd

    from analysis import recommend
    from ddbench.core.profile import Profile

    profile = Profile.model_validate({
        "name": "hand", "backend": {"kind": "sglang"}, "models": {"target": "t", "drafter": "d"},
        "placement": {"device": "cuda", "gpus": [0]},
        "arms": [{"id": "ar", "kind": "ar"},
                 {"id": "ar-no-overlap", "kind": "ar", "overlap_scheduler": False, "ablation": "overlap held off"},
                 {"id": "linear-b16", "kind": "linear", "block_size": 16}],
        "workload": {"prompt_set": "p.jsonl", "max_tokens": 8}, "load": {"concurrency": [c], "requests_per_user": 2}})

    def row(arm, base, r, lo, hi, ablation):
        return {"arm": arm, "baseline": base, "baseline_kind": "ar", "concurrency": c, "speedup": r,
                "speedup_lo": lo, "speedup_hi": hi, "verdict": "faster" if lo > 1 else "within noise",
                "pairs": 4, "sign_p": 0.1, "mde": 0.05, "n_to_resolve": None, "ablation": ablation}

    # the ablation's row first: the reference AR of linear-b16 must still be the deployable ar
    speedups = pd.DataFrame([row("linear-b16", "ar-no-overlap", 2.6, 2.4, 2.8, True),
                             row("linear-b16", "ar", 2.0, 1.8, 2.2, False),
                             row("ar-no-overlap", "ar", 0.76, 0.74, 0.78, True)])
    summary = pd.DataFrame({"arm": ["ar", "ar-no-overlap", "linear-b16"], "concurrency": c,
                            "throughput": [190.0, 400.0, 380.0]})
    cells = pd.DataFrame([{"arm": x, "concurrency": c, "repetition": r, "status": "ok"}
                          for x in summary["arm"] for r in (1, 2, 3, 4)])
    a = SimpleNamespace(run=SimpleNamespace(profile=profile, manifest=SimpleNamespace(models=models or {})),
                        speedups=speedups, summary=summary, cells=cells,
                        checks=pd.DataFrame(columns=["check", "scope", "status", "evidence"]),
                        kinds={x.id: x.kind for x in profile.arms})
    a.recommendation = recommend.recommendation(a)
    return a


def test_an_ablation_arm_is_shown_never_recommended_and_never_the_ar_reference():
    a = _ablation_analysis()
    pick, sentence = front.recommend(a, front.groups(a)[0])
    assert pick == "linear-b16"
    assert "2.00$\\times$ AR" in str(sentence)
    assert "an ablation, never deployed: not recommended" in str(sentence).replace("-{}", "-")
    assert front._ar(a, "linear-b16", 1)["baseline"] == "ar"
    assert "cheaper than a dense model" not in str(sentence)   # not a twin


def test_a_twin_runs_wide_verifies_carry_its_discount_beside_the_recommendation():
    twin = {"twin": {"shape": "qwen3-8b", "seed": 0}}
    for c, said in ((8, False), (32, True)):   # 8 x 16 = 128 verify rows; 32 x 16 = 512
        a = _ablation_analysis(c, twin)
        _, sentence = front.recommend(a, front.groups(a)[0])
        assert ("a verify of up to 512 rows runs up to about 5\\% cheaper" in str(sentence)) == said, sentence
    _, plain = front.recommend(*(lambda a: (a, front.groups(a)[0]))(_ablation_analysis(32)))
    assert "cheaper" not in str(plain)


def _run_of(backend: dict, extra: dict | None = None, gpus=()):
    from types import SimpleNamespace

    from ddbench.core.profile import Profile

    arm = {"id": "ar", "kind": "ar"} | ({"url": "http://h:1"} if backend["kind"] == "external" else {})
    profile = Profile.model_validate({
        "name": "hand", "backend": backend, "models": {"target": "t", "drafter": "d"}, "arms": [arm],
        "workload": {"prompt_set": "p.jsonl", "max_tokens": 8}, "load": {"concurrency": [1], "requests_per_user": 2}})
    host = SimpleNamespace(gpus=list(gpus), driver="580", cpu="Xeon", cores=16)
    manifest = SimpleNamespace(host=host, model_extra=extra or {})
    return SimpleNamespace(run=SimpleNamespace(profile=profile, manifest=manifest))


FORK = {"sglang_source": {"source": {"repo": "https://github.com/x/sglang", "commit": "abcdef1234567"}}}


def test_the_engine_row_names_only_the_engine_that_served():
    # a manifest records the SGLang build the host carries; a reference-engine run did not use it
    assert "build x/sglang" in front.engine(_run_of({"kind": "sglang", "runtime": "local"}, FORK))
    assert "sglang" not in front.engine(_run_of({"kind": "refengine", "runtime": "local"}, FORK))


def test_the_hardware_row_of_external_servers_is_the_load_generators_host():
    text = str(front.hardware(_run_of({"kind": "external"}, gpus=["NVIDIA H200"])))
    assert text.startswith("load generator's host: Xeon, 16 cores") and "servers' hardware is theirs" in text
    assert "H200" in str(front.hardware(_run_of({"kind": "sglang", "runtime": "local"}, gpus=["NVIDIA H200"])))


def test_a_speculative_ablation_reads_against_deployable_ar_and_is_never_the_best_linear():
    """linear-b16-no-overlap (DFLASH on SGLang's synchronous path) faster than linear-b16 in a row: page 1 still
    sets it against deployable AR and measures the tree against the deployable DFLASH."""
    import pandas as pd

    a = _ablation_analysis()
    profile = a.run.profile.model_copy(update={"arms": [*a.run.profile.arms, a.run.profile.arm("linear-b16").model_copy(
        update={"id": "linear-b16-no-overlap", "overlap_scheduler": False, "ablation": "overlap held off"})]})
    a.run.profile, a.kinds = profile, {x.id: x.kind for x in profile.arms}
    a.speedups = pd.concat([a.speedups, pd.DataFrame([
        {**a.speedups.iloc[1].to_dict(), "arm": "linear-b16-no-overlap", "baseline": "ar", "speedup": 2.2,
         "ablation": True}])], ignore_index=True)
    a.summary = pd.concat([a.summary, pd.DataFrame({"arm": ["linear-b16-no-overlap"], "concurrency": 1,
                                                    "throughput": [420.0]})], ignore_index=True)
    assert front._ar(a, "linear-b16-no-overlap", 1)["speedup"] == 2.2
    assert front.best_linear(a, {"rows": a.summary}) == "linear-b16"


def test_page_one_says_when_fewer_repetitions_ran_than_planned():
    from types import SimpleNamespace

    import pandas as pd

    def analysis(ran, planned, record=None):
        cells = pd.DataFrame({"repetition": ran, "status": ["ok"] * len(ran)})
        run = SimpleNamespace(profile=SimpleNamespace(load=SimpleNamespace(repetitions=planned)),
                              manifest=SimpleNamespace(model_extra={"budget": record} if record else {}))
        return SimpleNamespace(cells=cells, run=run)

    assert front.cut_short(analysis([1, 2, 3], 3)) is None
    assert front.cut_short(analysis([1, 1], 3)) == \
        "1 of 3 planned repetitions ran (the rest run with reproduce --resume RUN_DIR)"
    cut = front.cut_short(analysis([1, 2, 3, 4, 5], 10, {"budget_s": 600, "ran": [1, 2, 3, 4, 5],
                                                          "not_run": [6, 7, 8, 9, 10]}))
    assert cut.startswith("5 of 10 planned repetitions ran: the 600 s budget (load.budget_s) stopped the sweep")
    assert cut.endswith("repetition(s) 6-10 did not run")
    # a resolver's sweep says how it spent the time and why it stopped
    record = {"budget_s": 600, "stopped": "every target met", "stretches": [{"concurrency": 8}],
              "not_run": [["ar", 8, 5]]}
    assert front.resolved(analysis([1, 2, 3, 4], 10, record))
    assert front.cut_short(analysis([1, 2, 3, 4], 10, record)) == (
        "after the first 3 repetitions, 1 stretch(es) went where a target was open (load.resolve); the sweep "
        "stopped: every target met, leaving 1 planned cell(s) not run")
