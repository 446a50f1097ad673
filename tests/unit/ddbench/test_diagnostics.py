"""The overlay check and the stage-cost diagnostic, without a GPU: their inputs, and their JSON with the
server side replaced by a stand-in (the real thing runs on the H200)."""

from __future__ import annotations

import json

import pytest

from containers.offline import device
from ddbench.core.profile import load_profile
from ddbench.diagnostics import overlay_check as overlay
from ddbench.diagnostics import serving
from ddbench.diagnostics import stage_cost as stages

pytestmark = pytest.mark.unit

METRICS = """# HELP sglang:spec_verify_calls_total verify calls
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m",engine_type="unified"} 40.0
sglang:spec_verify_calls_total{model_name="m",engine_type="other"} 2.0
sglang:spec_verify_calls_total_created{model_name="m"} 1.7e9
sglang:num_requests_total 3.0
"""


def test_counter_sums_a_counter_over_its_labels():
    assert serving.counter(METRICS) == 42.0
    assert serving.counter("sglang:other 1\n") is None


@pytest.fixture
def sites(tmp_path):
    stock, shadow, harness = tmp_path / "site-sglang", tmp_path / "site-sglang-ddtree", tmp_path / "site-harness"
    for site, layer in ((stock, "sglang"), (shadow, "sglang-ddtree"), (harness, "harness")):
        site.mkdir()
        (site / device.MARKER).write_text(json.dumps({"layer": layer, "source": {"commit": "c" * 40}
                                                      if layer == "sglang-ddtree" else None}))
    return stock, shadow, harness


def test_the_two_sides_differ_only_by_the_fork_site(sites):
    stock, shadow, harness = (str(s) for s in sites)
    assert serving.split_pythonpath(f"{shadow}:{stock}:{harness}") == ([stock, harness], [shadow, stock, harness])
    with pytest.raises(serving.DiagnosticError, match="setup.sh harness sglang sglang-ddtree"):
        serving.split_pythonpath(f"{stock}:{harness}")
    assert serving.fork_build([stock, shadow]) == {"commit": "c" * 40}


def test_the_stage_profiler_goes_on_one_arm_only(tmp_path):
    p = load_profile("h200-sglang-ddtree")
    labelled = stages.with_stage_profiler(p, p.arm("tree-b31-k31"), tmp_path / "s.jsonl", 10, 0)
    from containers.launch import server_command

    argv = server_command(labelled, labelled.arm("tree-b31-k31")).argv
    i = argv.index("--speculative-ddtree-profile-output")
    assert "--speculative-ddtree-profile" in argv and argv[i + 1] == str(tmp_path / "s.jsonl")
    assert argv[argv.index("--speculative-ddtree-profile-interval") + 1] == "10"
    assert not any(x.startswith("--speculative-ddtree-profile") for x in server_command(p, p.arm("tree-b31-k31")).argv)
    assert not any(x.startswith("--speculative-ddtree-profile") for a in labelled.arms if a.id != "tree-b31-k31"
                   for x in server_command(labelled, a).argv)
    from containers.sglang_flags import load_table, table_for, validate

    validate(argv, load_table(table_for(p, "tree")))  # the fork's parser takes the flags


def test_summarize_stages_weights_by_count(tmp_path):
    path = tmp_path / "stages.jsonl"
    recs = [{"profiled_rounds": 10, "stages": {"target_verify": {"gpu_count": 10, "gpu_sum_ms": 10.0},
                                               "prepare_verify": {"cpu_count": 10, "cpu_sum_ms": 5.0}}},
            {"profiled_rounds": 30, "stages": {"target_verify": {"gpu_count": 30, "gpu_sum_ms": 90.0}}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + "not json\n")
    got = stages.summarize_stages(path)
    assert got["records"] == 2 and got["rounds"] == 40
    assert got["stages"]["target_verify"] == {"cpu_avg_ms": None, "gpu_avg_ms": 2.5, "count": 40}
    assert got["stages"]["prepare_verify"]["cpu_avg_ms"] == 0.5
    assert stages.summarize_stages(tmp_path / "absent.jsonl") == {"records": 0, "rounds": 0, "stages": {}}


def test_the_overlay_check_picks_a_graphed_dflash_arm():
    p = load_profile("h200-sglang-ddtree")
    assert overlay.pick_linear(p, None).id == "linear-b16"
    with pytest.raises(serving.DiagnosticError, match="'tree-b15-k15' is a 'tree' arm"):
        overlay.pick_linear(p, "tree-b15-k15")


def fake_serve(steps: dict[str, int], texts: dict[str, str]):
    calls = []

    def serve(profile, arm_id, run_dir, prompts, timeout_s, command=None, token_ids=True):
        side = run_dir.name
        # stock SGLang 0.5.17 refuses token ids on a chat stream: the check asks neither side for them
        assert token_ids is False
        calls.append((side, arm_id, __import__("os").environ["PYTHONPATH"]))
        rows = [{"id": q.id, "verify_steps": steps[side] / len(prompts), "spec_verify_ct": None,
                 "completion_tokens": 128, "finish_reason": "length", "error": None, "text": texts[side]}
                for q in prompts]
        return {"status": "ok", "reason": None, "ready_s": 1.0, "verify_steps": steps[side],
                "completion_tokens": 128 * len(prompts), "requests": rows}
    return serve, calls


@pytest.mark.parametrize("steps, passed", [({"stock": 57, "fork": 57}, True), ({"stock": 57, "fork": 168}, False)])
def test_the_overlay_check_writes_its_json(tmp_path, sites, monkeypatch, steps, passed):
    stock, shadow, harness = (str(s) for s in sites)
    monkeypatch.setenv("PYTHONPATH", f"{shadow}:{stock}:{harness}")
    serve, calls = fake_serve(steps, {"stock": "x", "fork": "x"})
    monkeypatch.setattr(overlay, "serve", serve)
    monkeypatch.setattr(overlay, "resolve_sglang", lambda entries: {"site": entries[0]})
    run = tmp_path / "run"
    p = load_profile("h200-sglang-ddtree")
    doc = overlay.overlay_check(run, p, "h200-sglang-ddtree", None, 3)
    assert [c[:2] for c in calls] == [("stock", "linear-b16"), ("fork", "linear-b16")]
    assert calls[0][2] == f"{stock}:{harness}" and calls[1][2] == f"{shadow}:{stock}:{harness}"
    on_disk = json.loads((run / "diagnostics" / "overlay-check.json").read_text())
    assert on_disk == json.loads(json.dumps(doc))
    assert doc["passed"] is passed and doc["same_verify_steps"] is passed and doc["same_outputs"] is True
    assert doc["diagnostic"] == "overlay-check" and doc["arm"] == "linear-b16" and doc["build"] == {"commit": "c" * 40}
    assert doc["prompts"]["max_tokens"] == 128 and len(doc["prompts"]["ids"]) == 3
    assert doc["sides"]["fork"]["server_log"] == "diagnostics/overlay-check/fork/linear-b16/server.log"
    assert "DFLASH" in doc["argv"] and "--speculative-ddtree-profile" not in doc["argv"]


def test_stage_cost_needs_the_fork_on_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(stages, "resolve_sglang", lambda entries: {"site": "/tmp/site-sglang", "layer": "sglang"})
    with pytest.raises(serving.DiagnosticError, match="not the sglang-ddtree layer"):
        stages.stage_cost(tmp_path, load_profile("h200-sglang-ddtree"), "x", [], 2, 10, 0)
    with pytest.raises(serving.DiagnosticError, match="not on the DDTree fork"):
        stages.stage_cost(tmp_path, load_profile("h200-sglang-tiny"), "x", [], 2, 10, 0)


def test_stock_sglang_is_served_without_the_forks_own_flags(tmp_path, sites, monkeypatch):
    # stock SGLang refuses a flag only the fork knows (--speculative-ddtree-step-stats, a ddbench patch)
    from containers.launch import server_command

    assert overlay.without_fork_flags(["--a", "--speculative-ddtree-x", "8", "--speculative-ddtree-on", "--b",
                                           "1"]) == (["--a", "--b", "1"],
                                                     ["--speculative-ddtree-x", "8", "--speculative-ddtree-on"])
    stock, shadow, harness = (str(s) for s in sites)
    monkeypatch.setenv("PYTHONPATH", f"{shadow}:{stock}:{harness}")
    seen = {}

    def serve(profile, arm_id, run_dir, prompts, timeout_s, command=None, token_ids=True):
        seen[run_dir.name] = server_command(profile, profile.arm(arm_id)).argv
        return fake_serve({"stock": 9, "fork": 9}, {"stock": "x", "fork": "x"})[0](profile, arm_id, run_dir,
                                                                                   prompts, timeout_s,
                                                                                   token_ids=token_ids)
    monkeypatch.setattr(overlay, "serve", serve)
    monkeypatch.setattr(overlay, "resolve_sglang", lambda entries: {"site": entries[0]})
    base = load_profile("h100-twin8b-sglang")
    flags = ["--speculative-ddtree-step-stats", "--speculative-ddtree-profile-interval", "10"]
    profile = base.model_copy(update={"runtime": base.runtime.model_copy(
        update={"extra_args": [*base.runtime.extra_args, *flags]})})
    doc = overlay.overlay_check(tmp_path / "run", profile, "p", None, 3)
    assert "--speculative-ddtree-step-stats" in seen["fork"]
    assert not any(a.startswith("--speculative-ddtree-") for a in seen["stock"])
    assert doc["stock_drops"] == flags and doc["passed"]
    assert [a for a in seen["fork"] if a not in seen["stock"]] == flags
