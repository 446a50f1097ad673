"""Drift: planted in a synthetic host that slows down, caught in an arm-major run, cancelled by interleaving."""

import math

import pytest

from analysis.analyze import analyze
from analysis.synth import Plan, write_run

# linear and chain with one drafter cost the same per step and accept the same in the simulator:
# the true ratio between them is 1
ARMS = [{"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "chain-b16", "kind": "chain", "block_size": 16}]
DRIFT = 0.10    # every step 10% slower per minute


def _run(tmp_path, schedule):
    plan = Plan(arms=[dict(a) for a in ARMS], concurrency=[1], repetitions=4, requests_per_user=30,
                failed_cell=None, schedule=schedule, drift_per_min=DRIFT, profile_name=f"drift-{schedule}")
    return analyze(write_run(tmp_path, plan), bootstrap=50)


def _check(a):
    row = a.checks[a.checks["check"] == "drift below the smallest effect claimed"]
    assert len(row) == 1
    return row.iloc[0]


@pytest.fixture(scope="module")
def arm_major(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("am"), "arm-major")


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("il"), "interleaved")


def test_the_planted_drift_is_measured_over_the_runs_own_span(arm_major, interleaved):
    for a in (arm_major, interleaved):
        d = a.drift.iloc[0]
        want = 100 * ((1 + DRIFT) ** -(d["span_s"] / 60) - 1)   # throughput over the span: the steps' slowdown
        assert d["estimable"] and d["over_run_lo"] < want < d["over_run_hi"]
        assert d["over_run_hi"] < 0


def test_a_run_too_short_states_no_drift():
    from analysis.trust import checks, stability

    d = {"cells": 8, "groups": 4, "span_s": 75.0, "slope": -0.05, "slope_lo": -0.09, "slope_hi": -0.01, "df": 3}
    t = stability.drift_table(d).iloc[0]
    assert not t["estimable"] and math.isnan(t["over_run"])
    c = checks._drift(None, d)
    assert c.status == "n/a" and "75 s: too short to estimate" in c.evidence
    # over a span long enough, the figure is the span's own, never 10 minutes'
    t = stability.drift_table({**d, "span_s": 300.0}).iloc[0]
    assert t["estimable"] and t["over_run"] == pytest.approx(100 * math.expm1(-0.05 * 300))


def test_a_drift_beyond_100_percent_is_said_not_printed():
    from report.tex import drift_pct

    assert drift_pct(1.5e20) == r"$>$+100\%" and drift_pct(-3.456) == r"-3.46\%"


def test_arm_major_order_makes_drift_an_arm_effect_and_the_check_fails(arm_major):
    r = arm_major.speedups.set_index(["arm", "baseline"]).loc[("chain-b16", "linear-b16")]
    assert r["verdict"] == "slower"          # the chain ran later on a slower host, and looks slower
    assert r["dt_mean_s"] > 60 and r["drift_bias"] > 0.05
    c = _check(arm_major)
    assert c["status"] == "fail", c["evidence"]
    assert "smallest effect claimed" in c["evidence"]


def test_interleaving_cancels_the_drift_and_the_check_passes(interleaved):
    r = interleaved.speedups.set_index(["arm", "baseline"]).loc[("chain-b16", "linear-b16")]
    assert r["speedup_lo"] < 1 < r["speedup_hi"] and abs(math.log(r["speedup"])) < 0.03
    assert abs(r["dt_mean_s"]) < 5          # cells last about 20 s: alternation leaves seconds, not cells
    assert r["drift_bias"] < 0.01
    c = _check(interleaved)
    assert c["status"] == "pass", c["evidence"]


def test_the_order_that_ran_is_the_schedule(interleaved):
    cells = interleaved.cells.sort_values("started_unix")
    assert list(zip(cells["arm"], cells["repetition"], strict=True)) == [
        ("linear-b16", 1), ("chain-b16", 1), ("chain-b16", 2), ("linear-b16", 2),
        ("linear-b16", 3), ("chain-b16", 3), ("chain-b16", 4), ("linear-b16", 4)]
