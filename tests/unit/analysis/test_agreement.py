"""analysis.agreement: two runs' ratios side by side, each interval against the other's point, and the
run A / run B ratio from the two runs' repetition pairs."""

import numpy as np
import pandas as pd
import pytest

from analysis import stats
from analysis.agreement import agreement, main, pair_ratios


def _run(root, name, tree_over_ar: list[float], verdict="faster"):
    t = root / name / "tables"
    t.mkdir(parents=True)
    reps = range(1, len(tree_over_ar) + 1)
    cells = [{"arm": "ar", "concurrency": 1, "repetition": r, "status": "ok", "throughput": 100.0} for r in reps]
    cells += [{"arm": "tree", "concurrency": 1, "repetition": r, "status": "ok", "throughput": 100.0 * x}
              for r, x in zip(reps, tree_over_ar, strict=True)]
    cells.append({"arm": "tree", "concurrency": 1, "repetition": 99, "status": "failed", "throughput": 1.0})
    pd.DataFrame(cells).to_csv(t / "cells.csv", index=False)
    p = stats.paired_log_ratio(np.array(tree_over_ar) * 100, np.full(len(tree_over_ar), 100.0))
    pd.DataFrame([{"arm": "tree", "baseline": "ar", "concurrency": 1, "speedup": p["ratio"],
                   "speedup_lo": p["ratio_lo"], "speedup_hi": p["ratio_hi"], "verdict": verdict}]).to_csv(
        t / "speedups.csv", index=False)
    return root / name


def test_pairs_are_the_repetitions_both_arms_finished():
    cells = pd.DataFrame({"arm": ["ar", "tree", "ar", "tree", "tree"], "concurrency": [1] * 5,
                          "repetition": [1, 1, 2, 3, 2], "status": ["ok", "ok", "ok", "ok", "failed"],
                          "throughput": [100, 150, 100, 170, 1]})
    assert pair_ratios(cells, "tree", "ar", 1).tolist() == [1.5]


def test_runs_within_each_others_noise_agree(tmp_path):
    a = _run(tmp_path, "a", [1.30, 1.34, 1.28, 1.36, 1.31, 1.33])
    b = _run(tmp_path, "b", [1.31, 1.35, 1.29, 1.33, 1.30, 1.36])
    [r] = agreement(a, b).itertuples()
    assert r.a_holds_b and r.b_holds_a and r.same_verdict and r.differ is False
    assert r.a_over_b == pytest.approx(np.exp(np.mean(np.log([1.30, 1.34, 1.28, 1.36, 1.31, 1.33]))
                                              - np.mean(np.log([1.31, 1.35, 1.29, 1.33, 1.30, 1.36]))))


def test_a_shifted_run_is_told_apart_and_printed(tmp_path, capsys):
    a = _run(tmp_path, "a", [1.30, 1.34, 1.28, 1.36, 1.31, 1.33])
    b = _run(tmp_path, "b", [1.20, 1.22, 1.19, 1.23, 1.21, 1.20], verdict="faster")
    [r] = agreement(a, b).itertuples()
    assert not r.a_holds_b and not r.b_holds_a and r.differ is True and r.a_over_b_lo > 1
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "an interval misses the other's point" in out
    assert "1 ratios: both intervals hold the other run's point for 0; the same verdict for 1" in out


def test_a_run_without_tables_is_named(tmp_path, capsys):
    a = _run(tmp_path, "a", [1.3, 1.3])
    assert main([str(a), str(tmp_path / "nothing")]) == 2
    assert "nothing/tables: no speedups.csv, cells.csv" in capsys.readouterr().err
