"""Acceptance per draft position from the records' depth histograms: conditional acceptance S_i / S_(i-1),
the share of steps stopping at each depth, SGLang's histogram where ours is missing, and no curve for AR."""

import pandas as pd
import pytest

from analysis.diagnose import acceptance


def records(rows):
    return pd.DataFrame([{"arm": arm, "concurrency": c, "ok": True, "warmup": False,
                          "spec_accepted_depth_histogram": ours, "spec_correct_drafts_histogram": theirs}
                         for arm, c, ours, theirs in rows])


def test_conditional_acceptance_counts_steps_that_reached_each_position():
    # 10 steps: 2 stop at depth 0, 3 at 1, 5 at 2 -> position 1: 8 of 10, position 2: 5 of 8
    t = acceptance.by_position(records([("linear-b4", 1, [2, 1, 2], None), ("linear-b4", 1, [0, 2, 3], None)]))
    assert list(t["position"]) == [0, 1, 2]
    assert list(t["steps_stopped"]) == [2, 3, 5] and list(t["share_stopped"]) == [0.2, 0.3, 0.5]
    assert t["p_accept"].iloc[1:].tolist() == [pytest.approx(0.8), pytest.approx(5 / 8)]
    assert (t["source"] == "spec_accepted_depth_histogram").all()


def test_warmup_and_failed_requests_do_not_count_and_ar_has_no_curve():
    r = records([("tree-b4-k2", 1, [1, 1], None), ("tree-b4-k2", 1, [9, 0], None), ("ar", 1, [5], None)])
    r.loc[1, "warmup"] = True
    t = acceptance.by_position(r)
    assert set(t["arm"]) == {"tree-b4-k2"} and t["steps_stopped"].tolist() == [1, 1]


def test_sglangs_histogram_serves_where_ours_is_missing():
    t = acceptance.by_position(records([("linear-b16", 8, None, [1, 3])]))
    assert (t["source"] == "spec_correct_drafts_histogram").all() and t["p_accept"].iloc[1] == pytest.approx(0.75)
    assert acceptance.by_position(records([("linear-b16", 8, None, None)])).empty
