"""GPU state per cell: a cell whose clock or power leaves the run's own band is flagged, with what it touches."""

import pandas as pd

from analysis.trust import stability


def _telemetry(cells, clock, power):
    rows = []
    for (arm, c, r), mhz, w in zip(cells, clock, power, strict=True):
        rows += [{"arm": arm, "concurrency": c, "repetition": r, "source": "gpu", "sm_clock_mhz": mhz + d,
                  "power_w": w + d} for d in (-2, 0, 2)]
    return pd.DataFrame(rows)


CELLS = [("ar", 1, r) for r in (1, 2, 3)] + [("tree", 1, r) for r in (1, 2, 3)]


def _frame(cells):
    return pd.DataFrame([{"arm": a, "concurrency": c, "repetition": r, "status": "ok"} for a, c, r in cells])


SPEEDUPS = pd.DataFrame([{"arm": "tree", "baseline": "ar", "concurrency": 1},
                         {"arm": "tree", "baseline": "ar", "concurrency": 8}])


def test_a_throttled_cell_is_flagged_with_the_comparisons_it_touches():
    clock = [1980, 1980, 1975, 1980, 1650, 1980]          # tree rep 2 ran 17% slow
    power = [300, 310, 305, 500, 450, 505]                 # power follows the arm: only like cells compare
    b = stability.gpu_band(_telemetry(CELLS, clock, power), _frame(CELLS), SPEEDUPS)
    flagged = b[b["outside"].astype(bool)]
    assert list(zip(flagged["arm"], flagged["repetition"], strict=True)) == [("tree", 2)]
    assert flagged.iloc[0]["outside"] == "SM clock"
    assert flagged.iloc[0]["comparisons"] == "tree/ar"


def test_power_outside_its_arms_band_is_flagged_and_a_steady_run_is_not():
    steady = stability.gpu_band(_telemetry(CELLS, [1980] * 6, [300, 310, 305, 500, 505, 495]), _frame(CELLS),
                                SPEEDUPS)
    assert not steady["outside"].astype(bool).any()
    capped = stability.gpu_band(_telemetry(CELLS, [1980] * 6, [300, 310, 305, 500, 380, 495]), _frame(CELLS),
                                SPEEDUPS)
    assert capped[capped["outside"].astype(bool)][["arm", "repetition", "outside"]].values.tolist() == [
        ["tree", 2, "power"]]


def test_no_gpu_samples_no_band():
    assert stability.gpu_band(pd.DataFrame(), _frame(CELLS), SPEEDUPS).empty


def test_gpu_busy_is_the_utilization_inside_the_measured_window():
    cells = _frame(CELLS[:2]).assign(window_start_ns=[10e9, 40e9], window_end_ns=[20e9, 50e9])
    rows = []
    for (arm, c, r), t0 in zip(CELLS[:2], (10, 40), strict=True):
        # idle before and after the window (setup, warm-up requests), busy inside it
        rows += [{"arm": arm, "concurrency": c, "repetition": r, "source": "gpu", "sm_clock_mhz": 1980,
                  "power_w": 300, "t_ns": (t0 + dt) * 1e9, "utilization_gpu_pct": u}
                 for dt, u in ((-3, 0), (2, 60), (5, 50), (9, 40), (14, 0))]
    b = stability.gpu_band(pd.DataFrame(rows), cells, SPEEDUPS)
    assert b["gpu_busy_pct"].tolist() == [50.0, 50.0]
    # without a window, or without utilization samples, no figure rather than a guess
    assert stability.gpu_band(pd.DataFrame(rows), _frame(CELLS[:2]), SPEEDUPS)["gpu_busy_pct"].isna().all()
    no_util = pd.DataFrame(rows).drop(columns="utilization_gpu_pct")
    assert stability.gpu_band(no_util, cells, SPEEDUPS)["gpu_busy_pct"].isna().all()
