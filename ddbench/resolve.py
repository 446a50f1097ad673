"""load.resolve: a rounds sweep spends its time where a comparison is still open.

The first MIN_REPETITIONS repetitions of every level run as planned (a ratio's interval needs rounds at every
level, and the first three always run, as under a budget). After them the resolver chooses each next stretch: of
the levels with a planned repetition left, the one whose targets (Profile.goals) are furthest from met, by the
MDE reached over the MDE asked (a pair with no interval yet first), with only the arms its open targets compare.
A level whose targets are all met stops costing stretches; the sweep ends when every target is met, when the
plan's repetitions run out, or when the next stretch would end past load.budget_s (its length the longest
stretch at that level so far). The resolver reads the rounds so far from disk (analysis.estimate.targets.progress)
and stops on precision, never on significance: an MDE does not depend on the ratio it bounds, so where the sweep
stops cannot pick a ratio. Coverage after such stopping: tests/unit/ddbench/test_resolve.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ddbench.core.budget import MIN_REPETITIONS
from ddbench.core.profile import BEST_LINEAR, Profile
from ddbench.core.schedule import Cell

MET, BUDGET, PLANNED = "every target met", "the budget", "the planned repetitions ran out"


class Resolver:
    """choose(todo) for the sweep's stretches (ddbench/sweep.py run_stretches): todo is the plan's stretches
    not yet run, each a list of cells of one (repetition, C), in plan order; the answer is the index of the next
    one and the arms to run in it, or None to end the sweep."""

    def __init__(self, profile: Profile, run_dir: Path, seconds: float | None = None,
                 progress: Callable[[Path], pd.DataFrame] | None = None, clock: Callable[[], float] = time.monotonic):
        if progress is None:
            from analysis.estimate.targets import progress
        self.profile, self.run_dir, self.seconds, self.progress, self.clock = profile, run_dir, seconds, progress, clock
        self.t0 = clock()
        self.longest: dict[int, float] = {}      # C -> the longest stretch there so far, in seconds
        self.ran: list[dict] = []
        self.skipped: list[Cell] = []
        self.stopped: str | None = None
        self.unread: str | None = None            # why the last reading of the run failed, if it did
        self._open: tuple[int, float] | None = None   # the stretch under way: its C and when it started

    def __call__(self, todo: list[list[Cell]]) -> tuple[int, list[str]] | None:
        now = self.clock()
        if self._open is not None:
            c, t = self._open
            self.longest[c] = max(self.longest.get(c, 0.0), now - t)
            self._open = None
        if not todo:
            return self._stop(PLANNED, todo)
        first = todo[0][0]
        if first[2] <= MIN_REPETITIONS:
            return self._start(todo, 0, [a for a, _, _ in todo[0]], None, now)
        try:
            t = self.progress(self.run_dir)
        except Exception as e:   # a reading that fails must not end a sweep: the plan's order then, as without
            self.unread = f"{type(e).__name__}: {e}"
            return self._start(todo, 0, [a for a, _, _ in todo[0]], None, now)
        gaps = _gaps(t)
        if not gaps:
            return self._stop(MET, todo)
        levels = {cells[0][1] for cells in todo}
        if not (open_levels := [c for c in gaps if c in levels]):
            return self._stop(PLANNED, todo)
        for c in sorted(open_levels, key=lambda c: -gaps[c]):
            length = self.longest.get(c, max(self.longest.values(), default=0.0))
            if self.seconds is not None and now - self.t0 + length > self.seconds:
                continue
            i = next(i for i, cells in enumerate(todo) if cells[0][1] == c)
            arms = self.arms(t, c)
            return self._start(todo, i, [a for a, _, _ in todo[i] if a in arms], gaps[c], now)
        return self._stop(BUDGET, todo)

    def arms(self, t: pd.DataFrame, c: int) -> set[str]:
        """The arms the open targets at C compare; where one is against the best linear arm, every deployable
        linear arm, since which is best may still change."""
        open_ = t[(t["concurrency"] == c) & ~t["met"].astype(bool)]
        out = set(open_["arm"]) | {b for b in open_["baseline"] if isinstance(b, str) and b}
        if open_["target"].str.endswith(f" / {BEST_LINEAR}").any():
            out |= {a.id for a in self.profile.measured_arms() if a.kind == "linear" and not a.ablation}
        return out

    def record(self) -> dict:
        """The manifest's record: each stretch run after the minimum and why, where the sweep stopped and why, and
        the planned cells it did not run."""
        # a sweep that ran every stretch it was given never asked past the last
        return {"budget_s": self.seconds, "stopped": self.stopped or PLANNED, "stretches": self.ran,
                "not_run": [list(x) for x in self.skipped], **({"unread": self.unread} if self.unread else {})}

    def _start(self, todo: list[list[Cell]], i: int, arms: list[str], gap: float | None,
               now: float) -> tuple[int, list[str]]:
        _, c, r = todo[i][0]
        self._open = (c, now)
        self.skipped += [x for x in todo[i] if x[0] not in arms]
        if gap is not None:
            self.ran.append({"concurrency": c, "repetition": r, "arms": arms,
                             "gap": None if math.isinf(gap) else round(gap, 3)})
        return i, arms

    def _stop(self, why: str, todo: list[list[Cell]]) -> None:
        """No more stretches: every cell still planned is left, and why."""
        self.stopped = why
        self.skipped += [x for cells in todo for x in cells]
        return None


def _gaps(t: pd.DataFrame) -> dict[int, float]:
    """Per level with an open target, how far the furthest is from met: MDE reached over MDE asked (inf where a pair
    has no interval yet)."""
    open_ = t[~t["met"].astype(bool)]
    out: dict[int, float] = {}
    for r in open_.itertuples():
        gap = r.mde / r.target_mde if math.isfinite(float(r.mde)) else math.inf
        out[int(r.concurrency)] = max(out.get(int(r.concurrency), 0.0), gap)
    return out

