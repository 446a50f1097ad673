"""compare.with_between_runs through analyze: a run's headline interval takes in the between-run sd that the
other analysed runs of its plan show, and keeps its repetitions' own interval beside it."""

import numpy as np
import pandas as pd
import pytest

from analysis.analyze import analyze
from analysis.estimate import compare, stats
from analysis.saved import write as write_tables
from analysis.synth import Plan, write_run


def _plan(prefill_ms: float) -> Plan:
    # the prefill's cost moves between runs while a step's does not, and so does every ratio, as on a host whose
    # state lasts a whole run; the seed is the profile's, so all three runs draw alike
    return Plan(requests_per_user=6, repetitions=4, prefill_ms=prefill_ms, failed_cell=None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("host")
    alone = analyze(write_run(tmp_path_factory.mktemp("alone"), _plan(60.0)), bootstrap=50)
    for i, prefill in enumerate((20.0, 400.0), start=1):
        write_tables(analyze(write_run(root, _plan(prefill), run_id=f"20261129T08000{i}Z-sib{i}"), bootstrap=50))
    me = analyze(write_run(root, _plan(60.0)), bootstrap=50)
    return alone, me


def test_a_run_alone_keeps_its_repetitions_interval(runs):
    alone, _ = runs
    s = alone.speedups
    assert alone.between_runs.empty
    assert (s["between_n"] == 1).all() and s["between_sd"].isna().all()
    assert np.allclose(s["speedup_lo"], s["within_lo"]) and np.allclose(s["speedup_hi"], s["within_hi"])
    assert (s["verdict"] == s["within_verdict"]).all()


def test_siblings_that_differ_widen_the_headline_interval_by_their_between_run_sd(runs):
    _, me = runs
    s = me.speedups.set_index(["arm", "baseline", "concurrency"])
    b = me.between_runs.set_index(["arm", "baseline", "concurrency"])
    over_ar = s.xs("ar", level="baseline")
    assert (over_ar["between_n"] == 3).all() and (over_ar["between_sd"] > 0.02).all()
    for k, r in s.iterrows():
        assert r["between_sd"] == b.at[k, "between_sd"]
        want = stats.with_between_sd(r["speedup"], r["within_lo"], r["within_hi"], r["between_sd"])
        assert (r["speedup_lo"], r["speedup_hi"]) == pytest.approx(want)
        assert r["verdict"] == compare.verdict(r["speedup_lo"], r["speedup_hi"])
        assert r["speedup_lo"] <= r["within_lo"] and r["speedup_hi"] >= r["within_hi"]
    widened = over_ar["speedup_hi"] / over_ar["speedup_lo"] > over_ar["within_hi"] / over_ar["within_lo"] * 1.01
    assert widened.all()


def test_with_between_runs_reads_a_verdict_the_wider_interval_no_longer_supports():
    s = pd.DataFrame([{"arm": "tree", "baseline": "ar", "concurrency": 1, "speedup": 1.05, "speedup_lo": 1.02,
                       "speedup_hi": 1.08, "verdict": "faster"}])
    b = pd.DataFrame([{"arm": "tree", "baseline": "ar", "concurrency": 1, "between_sd": 0.06, "runs": 4}])
    [r] = compare.with_between_runs(s, b).itertuples()
    assert r.within_verdict == "faster" and r.verdict == "within noise" and r.speedup_lo < 1 and r.between_n == 4
    [r] = compare.with_between_runs(s, b.assign(between_sd=0.0)).itertuples()    # the runs agree: as it was
    assert (r.speedup_lo, r.speedup_hi, r.verdict) == (1.02, 1.08, "faster")
