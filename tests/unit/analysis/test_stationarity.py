"""Stationarity: one arm slowing down halfway through a run fails its ratios' check and is named; noise passes."""

import numpy as np
import pandas as pd
import pytest

from analysis.analyze import analyze
from analysis.synth import Plan, write_run
from analysis.trust import stationarity
from analysis.trust.kinds import Kind

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16}]
SCOPE = "linear-b16/ar C=1"


def _run(tmp_path, repetitions=8, **kw):
    plan = Plan(arms=[dict(a) for a in ARMS], concurrency=[1], repetitions=repetitions, requests_per_user=40,
                failed_cell=None, seed=0, **kw)
    return analyze(write_run(tmp_path, plan), bootstrap=20)


def _check(a, scope=SCOPE):
    c = a.checks[(a.checks["key"] == Kind.STATIONARY.name) & (a.checks["scope"] == scope)]
    assert len(c) == 1
    return c.iloc[0]


@pytest.mark.parametrize("slow", ["linear-b16", "ar"])
def test_an_arm_slower_in_the_second_half_fails_and_is_named(tmp_path, slow):
    a = _run(tmp_path, slow_arm=slow, slow_by=0.10)
    c = _check(a)
    assert c["status"] == "fail"
    assert c["evidence"].startswith(f"{slow} moved")
    row = a.stationarity.iloc[0]
    assert row["moved"] == slow
    # the slow arm's own throughput fell by about 10% (less its prefill share); the other held still
    own = row["arm_shift"] if slow == "linear-b16" else row["baseline_shift"]
    other = row["baseline_shift"] if slow == "linear-b16" else row["arm_shift"]
    assert -0.13 < own < -0.06 and abs(other) < 0.03
    assert abs(np.log1p(row["shift"])) > np.log1p(row["mde"]) and row["p_holm"] < 0.05
    for word in ("MDE", "rho", "Holm", "%"):
        assert word in c["evidence"]
    # the table travels with the others, and the failure reaches checks.csv
    assert (a.checks["status"] == "fail").any()


def test_a_stationary_run_passes(tmp_path):
    a = _run(tmp_path)
    c = _check(a)
    assert c["status"] == "pass", c["evidence"]
    assert a.stationarity.iloc[0]["order"] == "cell start and end times"


def test_fewer_than_four_pairs_is_na_with_the_reason(tmp_path):
    a = _run(tmp_path, repetitions=3)
    c = _check(a)
    assert c["status"] == "n/a"
    assert "3 repetition pair(s)" in c["evidence"] and "4 are needed" in c["evidence"]


def test_spearman_is_exact_for_few_pairs():
    rho, p = stationarity.spearman(np.array([1.0, 2.0, 3.0, 4.0]))
    assert rho == pytest.approx(1.0) and p == pytest.approx(2 / 24)   # two of 24 orders are as extreme
    rho, p = stationarity.spearman(np.array([3.0, 1.0, 4.0, 2.0, 5.0]))
    assert -1 <= rho <= 1 and 0 < p <= 1
    assert np.isnan(stationarity.spearman(np.array([1.0, 1.0, 1.0, 1.0]))[1])


def test_holm_adjusts_step_down():
    p = pd.Series([0.01, 0.04, np.nan, 0.03])
    out = stationarity.holm(p)
    assert out[0] == pytest.approx(0.03) and out[3] == pytest.approx(0.06) and out[1] == pytest.approx(0.06)
    assert np.isnan(out[2])


def test_run_order_falls_back_to_the_manifest_schedule():
    cells = pd.DataFrame({"arm": ["a", "b", "a", "b"], "concurrency": [1] * 4, "repetition": [1, 1, 2, 2],
                          "started_unix": [np.nan] * 4, "ended_unix": [np.nan] * 4})
    ran = [{"arm": a, "concurrency": 1, "repetition": r} for r, arms in ((2, "ab"), (1, "ba")) for a in arms]
    pos, source = stationarity.positions(cells, {"ran": ran})
    assert source == "the manifest's schedule.ran order" and list(pos) == [3.0, 2.0, 0.0, 1.0]
    pos, source = stationarity.positions(cells, {"planned": [["b", 1, 1], ["a", 1, 1], ["a", 1, 2], ["b", 1, 2]]})
    assert source == "the manifest's schedule.planned order" and list(pos) == [1.0, 0.0, 2.0, 3.0]
    pos, source = stationarity.positions(cells, None)
    assert source.startswith("repetition numbers") and list(pos) == [1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("loss", [0.10, 0.05])
def test_a_common_drift_does_not_hide_the_arm_that_fell_behind(loss):
    # every arm speeds up 9% over the run (about 5% from the first half to the second); the tree also loses
    # `loss` in its second half: every ratio with the tree steps, and each must name the tree, never the arm that
    # drifted with the run. At 5% the tree's own shift is about 0, smaller than its partner's: the arm whose own
    # shift is larger is then the wrong one
    arms = ["ar", "linear-b16", "chain-b15", "tree-b15-k8"]
    rng = np.random.default_rng(3)
    rows = []
    for r in range(1, 11):
        drift = 1 + 0.09 * (r - 1) / 9
        for i, arm in enumerate(arms):
            slow = 1 - loss if arm == "tree-b15-k8" and r > 5 else 1.0
            t = 100.0 * (1 + i) * drift * slow * np.exp(rng.normal(0, 0.003))
            start = 10.0 * (4 * (r - 1) + i)
            rows.append({"arm": arm, "concurrency": 1, "repetition": r, "status": "ok", "throughput": t,
                         "started_unix": start, "ended_unix": start + 5})
    cells = pd.DataFrame(rows)
    speedups = pd.DataFrame([{"arm": x, "baseline": y, "concurrency": 1, "mde": 0.02, "paired": True}
                             for x, y in [("linear-b16", "ar"), ("chain-b15", "ar"), ("chain-b15", "linear-b16"),
                                          ("tree-b15-k8", "ar"), ("tree-b15-k8", "linear-b16"),
                                          ("tree-b15-k8", "chain-b15")]])
    t = stationarity.stationarity(cells, speedups)
    stepped = t[t.apply(stationarity.shifted, axis=1)]
    assert set(zip(stepped["arm"], stepped["baseline"], strict=True)) == {
        ("tree-b15-k8", "ar"), ("tree-b15-k8", "linear-b16"), ("tree-b15-k8", "chain-b15")}
    assert (stepped["moved"] == "tree-b15-k8").all()
    if loss == 0.05:
        assert (stepped["arm_shift"].abs() < stepped["baseline_shift"].abs()).all()
    assert t["common_shift"].between(0.03, 0.08).all()   # the run's own drift over the halves, not zero
