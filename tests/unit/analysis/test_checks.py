"""Trust checks catch what they are for; planted faults fail, clean data passes."""

import json

import pytest
from handrun import hand_records, write_hand_run

from analysis.analyze import analyze
from analysis.synth import Plan, write_run
from analysis.trust import checks


def status_of(a, check, scope=None):
    c = a.checks[a.checks["check"] == check]
    if scope is not None:
        c = c[c["scope"] == scope]
    return set(c["status"])


@pytest.fixture(scope="module")
def violated(tmp_path_factory):
    plan = Plan(requests_per_user=8, repetitions=1, concurrency=[1], failed_cell=None,
                commit_violation="tree-b15-k8", lossy_arm="linear-b16", dtype="float32")
    return analyze(write_run(tmp_path_factory.mktemp("v"), plan), bootstrap=50)


def test_planted_commit_violation_is_caught_in_requests_and_log(violated):
    assert status_of(violated, "commit = depth + 1 (requests)", "tree-b15-k8") == {"fail"}
    assert status_of(violated, "commit = depth + 1 (server log)", "tree-b15-k8") == {"fail"}
    assert status_of(violated, "commit = depth + 1 (requests)", "chain-b16") == {"pass"}
    assert status_of(violated, "commit = depth + 1 (server log)", "chain-b16") == {"pass"}
    first = violated.checks.iloc[0]
    assert first["status"] == "fail"           # failures come first


def test_commit_violations_names_requests(violated):
    n, nbad, bad, source = checks.commit_violations(violated.requests, "tree-b15-k8")
    assert n == 10 and nbad == 3 and all(b.startswith("tree-b15-k8-") for b in bad)
    assert source == "spec_commit_length_histogram"


def test_commit_check_from_sglang_drafts_histogram(tmp_path):
    # the reference engine sends the depth histogram but no commit-length one: commit = drafts + 1
    ar, tree = hand_records()
    for r in tree:
        del r.spec["spec_commit_length_histogram"]
    a = analyze(write_hand_run(tmp_path / "ok", tree=tree), bootstrap=20)
    assert status_of(a, "commit = depth + 1 (requests)", "tree-b4-k2") == {"pass"}
    tree[1].spec["spec_accepted_depth_histogram"] = [0, 1, 2, 0]     # one level deeper than what was accepted
    a = analyze(write_hand_run(tmp_path / "bad", tree=tree), bootstrap=20)
    ev = a.checks[(a.checks["check"] == "commit = depth + 1 (requests)") & (a.checks["scope"] == "tree-b4-k2")]
    assert ev.iloc[0]["status"] == "fail"
    assert ev.iloc[0]["evidence"] == ("1 of 2 requests break it (spec_correct_drafts_histogram + 1 vs "
                                      "spec_accepted_depth_histogram), e.g. F")


def test_lossy_arm_fails_the_lossless_check_in_float32(violated):
    assert status_of(violated, "lossless at T=0", "linear-b16") == {"fail"}
    assert status_of(violated, "lossless at T=0", "chain-b16") == {"pass"}


def test_clean_synthetic_run(synth_analysis):
    a = synth_analysis
    fails = a.checks[a.checks["status"] == "fail"]
    # the only failures are the planted failed cell's
    assert set(fails["scope"]) == {"tree-b15-k8 C=4 rep 2"}
    assert set(fails["check"]) >= {"cell finished"}
    assert status_of(a, "tau server vs client") == {"pass", "n/a"}
    assert status_of(a, "cache flushed or server restarted") == {"pass"}
    assert status_of(a, "GPU clocks and temperature stable") == {"pass"}
    assert status_of(a, "profile digest") == {"pass"}


def test_hand_run_checks(hand_run):
    a = analyze(hand_run, bootstrap=50)
    assert status_of(a, "errors <= 1%", "ar C=1 rep 1") == {"fail"}          # 1 of 3
    assert status_of(a, "minimum requests", "ar C=1") == {"fail"}            # 2 < 20
    assert status_of(a, "spec histograms sum to verify steps", "tree-b4-k2") == {"pass"}
    assert status_of(a, "commit = depth + 1 (requests)", "tree-b4-k2") == {"pass"}
    assert status_of(a, "GPU clocks and temperature stable") == {"n/a"}
    assert status_of(a, "cache flushed or server restarted") == {"fail"}     # no server.log at all
    ev = a.checks[(a.checks["check"] == "output length within 10% of ar")].iloc[0]["evidence"]
    assert ev == "mean 5.0 tokens vs ar 4.0 (+25.0%)"


def test_edited_manifest_fails_the_digest_check(tmp_path):
    a = analyze(write_hand_run(tmp_path, digest="0" * 64), bootstrap=50)
    assert status_of(a, "profile digest") == {"fail"}


def test_histogram_inconsistency(tmp_path):
    ar, tree = hand_records()
    tree[1].spec["spec_correct_drafts_histogram"] = [1, 1, 0, 0]    # sums to 2, verify_ct is 3
    a = analyze(write_hand_run(tmp_path, tree=tree), bootstrap=50)
    assert status_of(a, "spec histograms sum to verify steps", "tree-b4-k2") == {"fail"}


def test_tau_consistency_fails_when_server_counters_disagree(tmp_path):
    run = write_run(tmp_path, Plan(requests_per_user=6, repetitions=1, concurrency=[1], failed_cell=None))
    after = run / "tree-b15-k8" / "c1-r1" / "metrics-after.prom"
    text = after.read_text().splitlines()
    text = [ln if not ln.startswith("sglang:spec_verify_calls_total") else
            ln.rsplit(" ", 1)[0] + " " + str(float(ln.rsplit(" ", 1)[1]) * 1.5) for ln in text]
    after.write_text("\n".join(text) + "\n")
    a = analyze(run, bootstrap=50)
    assert status_of(a, "tau server vs client", "tree-b15-k8 C=1 rep 1") == {"fail"}


def test_throttling_gpu_is_flagged(tmp_path):
    run = write_run(tmp_path, Plan(requests_per_user=6, repetitions=1, concurrency=[1], failed_cell=None))
    tel = run / "ar" / "c1-r1" / "telemetry.jsonl"
    rows = [json.loads(x) for x in tel.read_text().splitlines()]
    for r in rows[len(rows) // 2:]:
        for g in r.get("gpus", []):
            g.update(sm_clock_mhz=1400, temperature_c=89, throttle_mask=0x40, throttle=["hw_thermal_slowdown"])
    tel.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a = analyze(run, bootstrap=50)
    ev = a.checks[(a.checks["check"] == "GPU clocks and temperature stable") & (a.checks["scope"] == "ar C=1 rep 1")]
    assert ev.iloc[0]["status"] == "fail"
    assert ev.iloc[0]["evidence"].startswith("SM clock varies 41% (limit 10%); GPU reached 89 C; "
                                             "throttled: hw_thermal_slowdown")


def test_telemetry_without_gpu_says_why(tmp_path):
    run = write_run(tmp_path, Plan(requests_per_user=6, repetitions=1, concurrency=[1], failed_cell=None))
    tel = run / "ar" / "c1-r1" / "telemetry.jsonl"
    tel.write_text('{"kind": "source", "gpu": "absent", "reason": "NVML: driver not loaded", "t_unix": 1}\n'
                   '{"kind": "sample", "t_unix": 2, "t_ns": 5, "host": {"cpu_pct": 10.0}}\n')
    a = analyze(run, bootstrap=50)
    ev = a.checks[(a.checks["check"] == "GPU clocks and temperature stable") & (a.checks["scope"] == "ar C=1 rep 1")]
    assert ev.iloc[0]["status"] == "n/a"
    assert ev.iloc[0]["evidence"] == "no GPU samples (telemetry source absent: NVML: driver not loaded)"


def test_cell_without_any_record_is_reported_not_fatal(hand_run):
    from ddbench.core.records import CellStatus
    from ddbench.core.results import write_json_atomic
    st = CellStatus(arm="tree-b4-k2", concurrency=1, repetition=2, status="failed",
                    reason="server did not come up: CUDA out of memory")
    write_json_atomic(hand_run / "tree-b4-k2" / "c1-r2" / "status.json", st.model_dump(mode="json"))
    a = analyze(hand_run, bootstrap=50)
    row = a.cells[(a.cells["arm"] == "tree-b4-k2") & (a.cells["repetition"] == 2)].iloc[0]
    assert row["n"] == 0 and row["status"] == "failed"
    fails = a.checks[(a.checks["status"] == "fail") & (a.checks["scope"] == "tree-b4-k2 C=1 rep 2")]
    assert "server did not come up: CUDA out of memory" in " ".join(fails["evidence"])
    # the failed repetition is left out: the comparison still uses rep 1
    assert a.speedups.set_index(["arm", "baseline"]).loc[("tree-b4-k2", "ar")]["reps"] == 1
