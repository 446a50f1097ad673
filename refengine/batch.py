"""Continuous batching over the engine's cache rows: requests join and leave between steps.

Running request i lives in cache row i. A request that leaves hands its row to the last
running one (its committed entries move), so the running requests always fill rows
0..n-1 and a step's forwards cover exactly them.
"""

from __future__ import annotations

from refengine.engine import STEPS, Engine
from refengine.plan import Plan
from refengine.request import Request


class Batch:
    def __init__(self, engine: Engine, plan: Plan):
        self.engine, self.plan = engine, plan
        self.reqs: list[Request] = []

    @property
    def full(self) -> bool:
        return len(self.reqs) >= self.engine.batch

    def add(self, req: Request) -> None:
        """Check and prefill a request into the next free row (its first token is committed)."""
        if self.full:
            raise RuntimeError(f"all {self.engine.batch} cache rows are in use")
        self.engine.check(req, self.plan)
        self.engine.prefill(req, self.plan.speculative, row=len(self.reqs))
        self.reqs.append(req)

    def step(self) -> None:
        """One verify step for every running request (finished ones must have been removed)."""
        self.engine.use_rows(len(self.reqs))
        STEPS[self.plan.kind](self.engine, self.reqs, self.plan)

    def remove(self, req: Request) -> None:
        row, last = self.reqs.index(req), len(self.reqs) - 1
        if row != last:
            self.engine.move_row(last, row)
            self.reqs[row] = self.reqs[last]
        else:
            self.engine.free_row(row)
        self.reqs.pop()


def generate_all(engine: Engine, reqs: list[Request], plan: Plan, join_every: int = 0) -> None:
    """Run requests to completion under continuous batching; each leaves as soon as it is done.

    join_every=0: waiting requests fill every free row before each step (a server under load);
    join_every=k: one joins every k steps (tests: requests at different points of their lives).
    """
    batch, waiting, steps = Batch(engine, plan), list(reqs), 0
    while waiting or batch.reqs:
        while waiting and not batch.full and (not join_every or steps % join_every == 0 or not batch.reqs):
            batch.add(waiting.pop(0))
            if join_every:
                break
        for r in [r for r in batch.reqs if r.done]:
            batch.remove(r)
        if batch.reqs:
            batch.step()
            steps += 1
        for r in [r for r in batch.reqs if r.done]:
            batch.remove(r)
