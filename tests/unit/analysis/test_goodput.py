"""Goodput under an SLO: requests that met every objective per second of the window, failed ones missing, the
paired ratio over a baseline, and no ratio (said so) where a cell met no SLO."""

import numpy as np
import pandas as pd
import pytest

from analysis.estimate import goodput
from ddbench.core.profile import Slo


def req(arm, rep, ttft_ms, tpot_ms, ok=True, in_window=True, tokens=100):
    return {"arm": arm, "concurrency": 1, "repetition": rep, "warmup": False, "ok": ok, "in_window": in_window,
            "ttft_s": ttft_ms / 1e3, "tpot_s": tpot_ms / 1e3, "e2e_s": (ttft_ms + 99 * tpot_ms) / 1e3,
            "n_tokens": tokens}


def cells(arms, reps, window=10.0):
    return pd.DataFrame([{"arm": a, "concurrency": 1, "repetition": r, "status": "ok", "window_s": window}
                         for a in arms for r in reps])


SLO = Slo(ttft_ms=100, tpot_ms=20)


def test_a_request_meets_the_slo_only_within_every_objective_and_a_failed_one_misses():
    r = pd.DataFrame([req("x", 1, 50, 10), req("x", 1, 150, 10), req("x", 1, 50, 30), req("x", 1, 50, 10, ok=False),
                      req("x", 1, 50, 10, in_window=False)])
    g = goodput.per_cell(r, cells(["x"], [1]), SLO).iloc[0]
    # counted: the 3 finished in the window and the failed one; met: the first alone
    assert (g["slo_requests"], g["slo_met"]) == (4, 1)
    assert g["slo_share"] == 0.25 and g["goodput"] == pytest.approx(0.1) and g["goodput_tokens"] == pytest.approx(10)
    assert goodput.per_cell(r, cells(["x"], [1]), None).empty


def test_the_ratio_is_paired_by_repetition_and_refused_where_a_cell_met_nothing():
    rows = []
    for rep, (nx, ny) in enumerate([(4, 2), (6, 3), (8, 4)], start=1):
        rows += [req("x", rep, 50, 10)] * nx + [req("y", rep, 50, 10)] * ny
    good = goodput.per_cell(pd.DataFrame(rows), cells(["x", "y"], [1, 2, 3]), SLO)
    speedups = pd.DataFrame([{"arm": "x", "baseline": "y", "concurrency": 1}])
    r = goodput.ratios(good, speedups).iloc[0]
    assert r["goodput_ratio"] == pytest.approx(2.0) and r["goodput_pairs"] == 3
    rows += [req("y", 4, 500, 10)] + [req("x", 4, 50, 10)]
    good = goodput.per_cell(pd.DataFrame(rows), cells(["x", "y"], [1, 2, 3, 4]), SLO)
    r = goodput.ratios(good, speedups).iloc[0]
    assert np.isnan(r["goodput_ratio"]) and r["goodput_verdict"] == "a cell met no SLO: no ratio"


def test_an_slo_needs_an_objective_and_stays_out_of_the_digest():
    from ddbench.core.profile import load_profile

    with pytest.raises(ValueError, match="at least one of ttft_ms"):
        Slo()
    assert Slo(e2e_ms=500).text == "E2E <= 500 ms"
    assert load_profile("cpu-tiny", ["slo.tpot_x_ar=3"]).digest() == load_profile("cpu-tiny").digest()
    with pytest.raises(ValueError, match="ttft_ms and ttft_x_ar both set"):
        Slo(ttft_ms=80, ttft_x_ar=4)


def test_a_relative_slo_is_set_by_ars_medians_at_the_lowest_c_of_the_run():
    from types import SimpleNamespace

    arms = [SimpleNamespace(id=a, kind=k, ablation=False) for a, k in (("ar", "ar"), ("tree", "tree"))]
    profile = SimpleNamespace(arms=arms)
    rows = [req("ar", 1, t, p) for t, p in ((10, 5), (20, 6), (30, 7))] + [req("tree", 1, 500, 1)]
    rows += [{**req("ar", 1, 900, 90), "concurrency": 8}]    # not the lowest C: no say in the bar
    slo, text = goodput.resolve(Slo(ttft_x_ar=4, tpot_x_ar=2, e2e_ms=5000), pd.DataFrame(rows), profile)
    assert (slo.ttft_ms, slo.tpot_ms, slo.e2e_ms) == (80, 12, 5000)
    assert text == ("TTFT <= 80 ms (4x ar's median 20 ms at C=1), TPOT <= 12 ms (2x ar's median 6 ms at C=1), "
                    "E2E <= 5000 ms")
    assert goodput.resolve(SLO, pd.DataFrame(rows), profile) == (SLO, "TTFT <= 100 ms, TPOT <= 20 ms")
    none, why = goodput.resolve(Slo(tpot_x_ar=2), pd.DataFrame([req("tree", 1, 10, 1)]), profile)
    assert none is None and why == "TPOT <= 2x AR's, but no AR request finished to set it by: no goodput"
