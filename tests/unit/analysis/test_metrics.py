"""Golden values: every per-request and per-cell metric on a run computed by hand (conftest.py)."""

import math

import pytest
from handrun import hand_records, write_hand_run

from analysis.analyze import analyze


@pytest.fixture
def result(hand_run):
    return analyze(hand_run, bootstrap=200)


def req(a, rid):
    r = a.requests
    return r[r["request_id"] == rid].iloc[0]


def test_per_request_metrics(result):
    A, B = req(result, "A"), req(result, "B")
    assert A["ttft_s"] == pytest.approx(0.100)
    assert A["e2e_s"] == pytest.approx(0.300)
    assert A["tpot_s"] == pytest.approx(0.200 / 3)
    assert A["tokens_per_chunk"] == pytest.approx(1.0)
    assert A["output_rate"] == pytest.approx(4 / 0.3)
    assert A["gap_mean_s"] == pytest.approx((0.05 + 0.05 + 0.06) / 3)
    assert A["tau"] == 1.0 and A["verify_steps"] == 4      # AR: τ = 1 by definition
    assert B["ttft_s"] == pytest.approx(0.120)               # the empty first chunk does not count
    assert B["tpot_s"] == pytest.approx((0.320 - 0.120) / 3)
    assert B["content_chunks"] == 4


def test_spec_tau_per_request(result):
    assert req(result, "E")["tau"] == pytest.approx(4.0)
    assert req(result, "F")["tau"] == pytest.approx(2.0)
    assert req(result, "F")["tokens_per_chunk"] == pytest.approx(6 / 4)


def test_per_cell_metrics(result):
    cells = result.cells.set_index("arm")
    ar, tree = cells.loc["ar"], cells.loc["tree-b4-k2"]
    assert (ar["n"], ar["errors"], ar["warmup_n"]) == (2, 1, 1)
    assert ar["error_rate"] == pytest.approx(1 / 3)
    assert ar["window_s"] == pytest.approx(1.0) and ar["window_source"] == "status"
    assert ar["throughput"] == pytest.approx(8.0)           # (4 + 4) tokens / 1 s window
    assert tree["throughput"] == pytest.approx(10.0)        # (4 + 6) / 1 s
    assert tree["tau"] == pytest.approx(10 / 4)             # token-weighted: Σ N / Σ steps
    assert tree["tau_mean"] == pytest.approx(3.0)           # mean of 4 and 2
    assert tree["step_time_s"] == pytest.approx(1.0 * 1 / 4)  # W·C / Σ steps
    assert ar["step_time_s"] == pytest.approx(1.0 / 8)
    assert ar["ttft_mean"] == pytest.approx(0.110)
    assert ar["gap_n"] == 6
    # two samples: no percentile may be printed
    assert math.isnan(ar["ttft_p50"]) and math.isnan(ar["gap_p50"])
    # throughput = τ / step time × C, exactly
    assert tree["throughput"] == pytest.approx(tree["tau"] / tree["step_time_s"])


def test_speedup_point_values(result):
    s = result.speedups.set_index(["arm", "baseline"]).loc[("tree-b4-k2", "ar")]
    assert s["speedup"] == pytest.approx(10 / 8)
    # TPOT at C=1: ar mean (200/3 + 200/3)/2 ms; tree E: (210−100)/3, F: (650−500)/5 ms
    tpot_ar = (0.2 / 3 + 0.2 / 3) / 2
    tpot_tree = (0.110 / 3 + 0.150 / 5) / 2
    assert s["tpot_ratio"] == pytest.approx(tpot_ar / tpot_tree)


def test_window_derived_when_status_has_none(tmp_path):
    a = analyze(write_hand_run(tmp_path, window=False), bootstrap=50)
    ar = a.cells.set_index("arm").loc["ar"]
    assert ar["window_source"] == "derived"
    assert ar["window_s"] == pytest.approx(0.620)           # first measured send (0) to last end (620 ms)
    assert ar["throughput"] == pytest.approx(8 / 0.620)


def test_lossless_exact_and_prefix(tmp_path):
    ar, tree = hand_records()
    tree[1].chunks[-1].text = " X"     # F diverges at its last chunk: "a b c d e X" vs ar's "a b c d"
    a = analyze(write_hand_run(tmp_path, tree=tree), bootstrap=50)
    row = a.lossless.set_index("arm").loc["tree-b4-k2"]
    assert (row["compared"], row["exact"]) == (2, 1)
    assert row["prefix_chars_mean"] == pytest.approx((7 + 7) / 2)   # "a b c d" is ar's output for p1
