"""load.budget_s: a repetition starts only while the longest one so far would end inside the budget, the
first three always run, whole repetitions only; the budget is no condition of the experiment (not in the
digest), and a sweep it stops leaves the rest for --resume, saying so."""

import pytest

from ddbench import reproduce
from ddbench.core import budget
from ddbench.core.manifest import start_run
from ddbench.core.profile import ProfileError, load_profile
from ddbench.core.records import CellStatus
from ddbench.core.results import REDO, STATUS, RunDir, write_json_atomic


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_the_first_three_repetitions_run_however_long_they_take():
    clock = Clock()
    gate = budget.Budget(10, clock=clock)
    for r in (1, 2, 3):
        assert gate(r)
        clock.t += 100
    assert not gate(4) and gate.stopped


def test_a_repetition_starts_only_if_the_longest_so_far_would_end_inside_the_budget():
    clock = Clock()
    gate = budget.Budget(100, clock=clock)
    for r, length in zip((1, 2, 3, 4), (10, 20, 10, 10), strict=True):
        assert gate(r)
        assert gate(r)          # asked again inside its repetition: still yes, and nothing changes
        clock.t += length
    # the longest so far is 20 s: at 50, 60 and 70 s the next one fits
    for r in (5, 6, 7):
        assert gate(r)
        clock.t += 10
    assert gate(8)             # 80 + 20 = 100: ends exactly inside
    clock.t += 10
    assert not gate(9)         # 90 + 20 > 100
    assert not gate(10) and not gate(9)   # once stopped, nothing more starts
    rec = gate.record(range(1, 11))
    assert rec["ran"] == list(range(1, 9)) and rec["not_run"] == [9, 10] and rec["budget_s"] == 100
    assert rec["repetition_s"] == [10, 20, 10, 10, 10, 10, 10, 10]


def test_a_bring_up_shared_by_every_repetition_is_not_the_first_repetitions_length():
    clock = Clock()
    gate = budget.Budget(300, clock=clock)
    assert gate(1)        # asked before the one bring-up of an interleaved sweep
    clock.t += 200        # bring-up and warm-up
    gate.rebase(1)        # the first cell starts now
    for r in (1, 2, 3):
        assert gate(r)
        clock.t += 20
    # without the rebase the first repetition would have been 220 s long and nothing more would start
    assert gate(4)        # 260 + 20 <= 300: the bring-up still counts against the budget
    clock.t += 20
    assert gate(5)        # 280 + 20 = 300: ends exactly inside
    clock.t += 20
    assert not gate(6)    # 300 + 20 > 300
    assert gate.record(range(1, 7))["repetition_s"] == [20, 20, 20, 20, 20]


def test_the_text_says_what_did_not_run_and_nothing_when_all_ran():
    assert budget.text(None) == "" and budget.text({"budget_s": 60, "ran": [1, 2, 3], "not_run": []}) == ""
    said = budget.text({"budget_s": 720, "ran": [1, 2, 3, 4, 5], "not_run": [6, 7, 8, 9, 10]})
    assert "720 s budget" in said and "after 5 of 10 repetitions" in said and "6-10 did not run" in said
    assert "3, 7 did not run" in budget.text({"budget_s": 9, "ran": [1, 2, 4], "not_run": [3, 7]})


def test_the_budget_is_not_in_the_digest_and_arm_major_refuses_it(write_profile):
    plain = load_profile(write_profile())
    timed = load_profile(write_profile(lambda d: d["load"].update(budget_s=600)))
    assert timed.load.budget_s == 600 and timed.digest() == plain.digest()
    assert "budget_s" not in plain.model_dump(mode="json")["load"]
    with pytest.raises(ProfileError, match="budget_s.*arm-major"):
        load_profile(write_profile(lambda d: d["load"].update(budget_s=600, schedule="arm-major")))


def test_a_stopped_sweep_records_what_ran_and_keeps_the_rest_pending(monkeypatch, write_profile, tmp_path):
    profile = load_profile(write_profile(lambda d: d["load"].update(repetitions=5, budget_s=1)))
    run = RunDir.create("t", root=tmp_path / "results")
    start_run(profile, "profile.yaml", run)
    clock = Clock()
    real = budget.Budget
    monkeypatch.setattr(budget, "Budget", lambda s: real(s, clock=clock))

    def fake(profile, run_dir, cell, *, todo, prepare, gate, stretch=None, choose=None):
        for arm, c, r in todo:
            if not gate(r):
                break
            prepare(run_dir / arm / f"c{c}-r{r}")
            write_json_atomic(run_dir / arm / f"c{c}-r{r}" / STATUS,
                              CellStatus(arm=arm, concurrency=c, repetition=r, status="ok").model_dump(mode="json"))
            clock.t += 1
    monkeypatch.setattr("ddbench.sweep.run_sweep", fake)
    record = reproduce.sweep(profile, run)
    assert record["ran"] == [1, 2, 3] and record["not_run"] == [4, 5]
    assert {r for _, _, r in reproduce.pending_cells(profile, run)} == {4, 5}
    assert not (run.path / REDO).exists()
