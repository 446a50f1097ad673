"""A twin run cross-checks against a run of the pair it was built from (outputs, τ, tok/s), though its model
paths and weights differ, and the report's section says what it compares; change one file of the pair and the
arms are refused as for any two model sets."""

import json

from analysis.analyze import analyze
from analysis.synth import Plan, write_run
from analysis.trust.crosscheck import TWIN_NOTE
from report import crosscheck as report_crosscheck

FILES = {"target": {"config.json": "a1", "model.safetensors": "a2"},
         "drafter": {"config.json": "b1", "model.safetensors": "b2"}}


def _edit(run, change):
    path = run / "manifest.json"
    m = json.loads(path.read_text())
    change(m)
    path.write_text(json.dumps(m))


def _pair_models(files):
    def change(m):
        m["models"] = {r: {"path": f"models/tiny-{r}", "sha256": f"{r}-pair", "files": dict(f)}
                       for r, f in files.items()}
    return change


def _twin_models(m):
    m["profile"]["models"].update(target=".twins/t/target", drafter=".twins/t/drafter")
    m["models"] = {r: {"path": f".twins/t/{r}", "sha256": f"{r}-twin", "files": {"x": "1"}} for r in FILES}
    m["models"]["twin"] = {"shape": "small", "seed": 0, "pair": {r: {**f, "README.md": "r"} for r, f in FILES.items()}}


def test_a_twin_and_its_pair_cross_check_and_another_pair_is_refused(tmp_path):
    plan = dict(requests_per_user=6, repetitions=2, concurrency=[1], failed_cell=None)
    pair = write_run(tmp_path, Plan(**plan, profile_name="pair", seed=1))
    twin = write_run(tmp_path, Plan(**plan, profile_name="twin", compare_with=str(pair)))
    _edit(pair, _pair_models(FILES))
    _edit(twin, _twin_models)

    a = analyze(twin, bootstrap=50)
    x = a.crosscheck
    assert TWIN_NOTE in x.notes and not any("refusing" in n for n in x.notes)
    assert x.arms["tau_this"].notna().all() and len(x.throughput) == len(x.arms)
    assert report_crosscheck.context(a)["twin"] is True
    # each tree's verdict on both sides, factor by factor, from the two runs' own decompositions
    b = analyze(pair, bootstrap=50).decomposition.set_index(["arm", "reference", "concurrency"])
    assert x.twin == "this" and len(x.verdicts) == len(a.decomposition) > 0
    for v in x.verdicts.itertuples():
        mine = a.decomposition.set_index(["arm", "reference", "concurrency"]).loc[(v.arm, v.reference, v.concurrency)]
        theirs = b.loc[(v.arm_other, v.reference_other, v.concurrency)]
        assert (v.ratio_this, v.tau_ratio_this) == (mine["throughput_ratio"], mine["tau_ratio"])
        assert (v.ratio_other, v.step_cost_other) == (theirs["throughput_ratio"], 1 / theirs["step_time_ratio"])
    assert "differ most for" in str(report_crosscheck.context(a)["verdict"])

    _edit(pair, _pair_models({**FILES, "target": {**FILES["target"], "model.safetensors": "other"}}))
    x = analyze(twin, bootstrap=50).crosscheck
    assert TWIN_NOTE not in x.notes and any("refusing" in n and "target weights differs" in n for n in x.notes)
    assert x.throughput.empty and x.verdicts.empty and x.twin is None
