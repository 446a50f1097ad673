"""load.resolve (ddbench/resolve.py): after the minimum, each stretch goes to the level furthest from its targets,
with only the arms its open targets compare; a met level costs nothing more; the sweep stops when every target is
met or the next stretch would overrun the budget. That stopping on precision keeps the rounds interval's coverage:
tests/unit/analysis/test_rounds.py."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from ddbench import resolve, sweep
from ddbench.core import budget, schedule
from ddbench.core.profile import Profile

pytestmark = pytest.mark.unit

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8}]
TARGETS = [("linear-b16 / ar", "linear-b16", "ar"), ("tree-b15-k8 / ar", "tree-b15-k8", "ar"),
           ("tree-b15-k8 / best-linear", "tree-b15-k8", "linear-b16")]


def profile(**load) -> Profile:
    return Profile.model_validate({
        "name": "p", "backend": {"kind": "refengine"}, "models": {"target": "t", "drafter": "d"}, "arms": ARMS,
        "workload": {"prompt_set": "p.jsonl", "max_tokens": 8},
        "load": {"concurrency": [1, 8, 32], "requests_per_user": 2, "repetitions": 8, "schedule": "rounds",
                 "resolve": True, **load}})


def progress(mde: dict):
    """A stand-in reading of the run: per (target, C) the MDE reached (NaN: no interval yet); each target 3%."""
    def read(_run_dir):
        rows = [{"target": t, "arm": x, "baseline": y, "concurrency": c, "target_mde": 0.03, "mde": mde[(t, c)]}
                for t, x, y in TARGETS for c in (1, 8, 32)]
        df = pd.DataFrame(rows)
        return df.assign(met=df["mde"] <= df["target_mde"])
    return read


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def todo(p: Profile, first_rep: int = 1) -> list[list[schedule.Cell]]:
    return [s for s in schedule.stretches(schedule.order(p)) if s[0][2] >= first_rep]


def test_a_sweep_that_ran_every_stretch_says_so(tmp_path):
    assert resolve.Resolver(profile(), tmp_path, progress=progress({})).record()["stopped"] == resolve.PLANNED


def test_a_reading_that_fails_falls_back_to_the_plan_s_order(tmp_path):
    def broken(_run_dir):
        raise OSError("records.jsonl: truncated")
    p = profile()
    r = resolve.Resolver(p, tmp_path, progress=broken)
    left = todo(p, first_rep=budget.MIN_REPETITIONS + 1)
    assert r(left) == (0, [a for a, _, _ in left[0]])
    assert r.record()["unread"] == "OSError: records.jsonl: truncated"


def test_the_minimum_runs_in_plan_order_with_every_arm(tmp_path):
    p = profile()
    r = resolve.Resolver(p, tmp_path, progress=lambda _: pytest.fail("no reading during the minimum"))
    left = todo(p)
    for rep in range(1, budget.MIN_REPETITIONS + 1):
        for c in (1, 8, 32):
            i, arms = r(left)
            assert (left[i][0][1], left[i][0][2]) == (c, rep) and sorted(arms) == ["ar", "linear-b16", "tree-b15-k8"]
            left.pop(i)


def test_stretches_go_to_the_level_furthest_from_its_targets_with_the_arms_still_needed(tmp_path):
    p = profile()
    mde = {(t, c): 0.01 for t, _, _ in TARGETS for c in (1, 8, 32)}
    mde[("tree-b15-k8 / best-linear", 8)] = 0.09        # 3x its target
    mde[("tree-b15-k8 / best-linear", 32)] = math.nan    # no interval yet: first
    r = resolve.Resolver(p, tmp_path, progress=progress(mde))
    left = todo(p, first_rep=budget.MIN_REPETITIONS + 1)
    i, arms = r(left)
    assert left[i][0][1] == 32 and sorted(arms) == ["linear-b16", "tree-b15-k8"]   # AR's targets are met there
    left.pop(i)
    mde[("tree-b15-k8 / best-linear", 32)] = 0.02
    i, arms = r(left)
    assert left[i][0][1] == 8 and left[i][0][2] == budget.MIN_REPETITIONS + 1
    left.pop(i)
    mde[("tree-b15-k8 / best-linear", 8)] = 0.029
    assert r(left) is None and r.stopped == resolve.MET
    rec = r.record()
    assert [(s["concurrency"], s["gap"]) for s in rec["stretches"]] == [(32, None), (8, 3.0)]
    # the cells it left: AR's at the two stretches it ran, and every cell of the stretches after
    assert ("ar", 32, 4) in map(tuple, rec["not_run"]) and ("tree-b15-k8", 1, 8) in map(tuple, rec["not_run"])
    assert ("tree-b15-k8", 32, 4) not in map(tuple, rec["not_run"])
    assert budget.text(rec).endswith(f"the sweep stopped: every target met, leaving {len(rec['not_run'])} "
                                     "planned cell(s) not run")


def test_a_stretch_that_would_end_past_the_budget_does_not_start(tmp_path):
    p = profile()
    clock = Clock()
    mde = {(t, c): 0.06 for t, _, _ in TARGETS for c in (1, 8, 32)}
    for seconds, fits in ((100, True), (95, False)):
        clock.t, left = 0.0, todo(p)
        r = resolve.Resolver(p, tmp_path, seconds=seconds, progress=progress(mde), clock=clock)
        while left[0][0][2] <= budget.MIN_REPETITIONS:   # the minimum, whatever the budget: 9 stretches of 10 s
            left.pop(r(left)[0])
            clock.t += 10
        # 90 s gone, and a stretch at any level has taken 10 s: it ends at 100 s
        assert (r(left) is not None) == fits
        assert r.stopped == (None if fits else resolve.BUDGET)


def test_the_sweep_runs_only_what_it_is_told(tmp_path):
    p = profile()
    cells = schedule.order(p)
    ran = []

    def stretch(targets, load, *, concurrency, repetition):
        ran.append((concurrency, repetition, [t[0] for t in targets]))
        return {t[0]: sweep.failed_cell(t[0], concurrency, repetition, t[3], "stand-in") for t in targets}

    picks = iter([(2, ["tree-b15-k8"]), (0, ["ar", "linear-b16"]), None])
    block = schedule.Block(("ar", "linear-b16", "tree-b15-k8"), tuple(cells))
    up = SimpleNamespace(url="http://127.0.0.1:1", exited=lambda: None)
    sweep.run_stretches(p, block, tmp_path, dict.fromkeys(block.arms, up), {}, stretch, outside=False,
                        choose=lambda todo: next(picks))
    assert ran == [(32, 1, ["tree-b15-k8"]), (1, 1, ["ar", "linear-b16"])]
