"""load.budget_s: how many of its repetitions a sweep runs on a host slower than its plan assumed.

A repetition starts only while the longest repetition so far would still end inside the budget (the clock
starts before the first bring-up, so a repetition's own bring-ups count; one bring-up shared by every
repetition counts against the budget but not as the first repetition's length: rebase), and the first
MIN_REPETITIONS always run: a ratio's interval needs pairs. Whole repetitions only, so every pair stays as
the schedule made it; what is left runs on `reproduce --resume`. The rule reads the clock, never a result,
so stopping early widens intervals but cannot bias an estimate.

    gate = Budget(720)
    gate(r)        # True: repetition r may start (asked again for the same r: True)
    gate.record(todo_repetitions)   # the manifest's record
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from itertools import pairwise
from typing import TypeGuard

MIN_REPETITIONS = 3


class Budget:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds, self.clock = seconds, clock
        self.t0 = clock()
        self.started: dict[int, float] = {}   # repetition -> when it started, in run order
        self.stopped = False

    def __call__(self, repetition: int) -> bool:
        if repetition in self.started:
            return True
        if self.stopped:
            return False
        now = self.clock()
        longest = max(_lengths([*self.started.values(), now]), default=0.0)
        if len(self.started) >= MIN_REPETITIONS and now - self.t0 + longest > self.seconds:
            self.stopped = True
            return False
        self.started[repetition] = now
        return True

    def rebase(self, repetition: int) -> None:
        """The repetition's cells start now: a bring-up that serves many repetitions (one block for the whole
        sweep) is the sweep's cost, not the first repetition's length. The budget's clock keeps counting it."""
        if repetition in self.started:
            self.started[repetition] = self.clock()

    def record(self, planned: Iterable[int]) -> dict:
        """What the budget let run of the repetitions this sweep was asked for, and what it left."""
        return {"budget_s": self.seconds, "ran": sorted(self.started),
                "not_run": sorted(set(planned) - set(self.started)),
                "repetition_s": [round(x, 1) for x in _lengths([*self.started.values(), self.clock()])]}


def _lengths(starts: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(starts)]


def resolved(record: dict | None) -> TypeGuard[dict]:
    """Whether a sweep's record is a resolver's (load.resolve, ddbench/resolve.py: it says why the sweep stopped,
    and its not_run lists cells) rather than a budget's (not_run lists repetitions)."""
    return record is not None and "stopped" in record


def text(record: dict | None) -> str:
    """One clause for a reader of the run, or '' when the budget stopped nothing; under load.resolve (a record
    with 'stopped', ddbench/resolve.py), how many stretches went where a target was open, and why the sweep
    stopped."""
    if resolved(record):
        n, left = len(record.get("stretches") or []), len(record.get("not_run") or [])
        return (f"after the first {MIN_REPETITIONS} repetitions, {n} stretch(es) went where a target was open "
                f"(load.resolve); the sweep stopped: {record['stopped']}"
                + (f", leaving {left} planned cell(s) not run" if left else ""))
    if not record or not record.get("not_run"):
        return ""
    ran = len(record["ran"])
    return (f"the {record['budget_s']:g} s budget (load.budget_s) stopped the sweep after {ran} of "
            f"{ran + len(record['not_run'])} repetitions; repetition(s) {_span(record['not_run'])} did not run")


def _span(reps: list[int]) -> str:
    return f"{reps[0]}-{reps[-1]}" if reps == list(range(reps[0], reps[-1] + 1)) and len(reps) > 1 \
        else ", ".join(map(str, reps))
