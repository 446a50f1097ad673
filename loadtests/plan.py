"""Which prompt each request sends, and when an open-loop request is due.

Closed loop: user u's i-th request sends order[(u + i * C) % L], where order is the prompt
set shuffled by seed. Warmup requests (i < W) take the first C*W positions and measured ones
the next C*N, so at a given concurrency every arm sees the same multiset of measured prompts
whatever the order in which users happen to run.

The order does not depend on the repetition: a repetition repeats its cell's requests, so the
spread across repetitions is the host's and the servers', which is what the intervals over
repetitions are for. Where a cell sends fewer requests than the set holds (cpu-tiny at C=1: 12
of 46), a fresh subset per repetition added which prompts a cell drew to that spread: with the
subsets of 12 repetitions, the verify steps alone predicted tree/linear with a 3.4% sd, linear/ar
with 8.6%, against pair sds of 5-6.5% and 5.6-10.5% measured (runs 9c3980 and c31c91 of cpu-tiny,
in git history at commit 01c5dce). Two runs with one subset for all: tree/linear pair sd 3.0% and 3.5%.

Open loop: slot k of the whole cell is due at the k-th arrival of a constant or Poisson
process of the given rate; the slot also picks the prompt, order[k % L].

With an output length distribution (workload.output), a request's slot also gives its output length
(output_target): like the prompt, it does not change with the repetition or the arm, so paired cells ask
for the same lengths. Random prompts draw their lengths per prompt (loadtests/random_prompts.py).

At T>0 a request's slot also gives its sampling seed (request_seed), which does change with the
repetition: a T>0 claim is about the sampler's draws, and their spread belongs in its interval.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ddbench.core.profile import Length
from ddbench.core.prompts import Prompt
from ddbench.core.schedule import PROMPT_ORDER  # noqa: F401  (the order prompt_order keeps)


def prompt_order(prompts: list[Prompt], seed: int) -> list[Prompt]:
    order = list(prompts)
    random.Random(f"order/{seed}").shuffle(order)
    return order


def closed_loop_slot(user: int, i: int, users: int) -> int:
    """The position of user u's i-th request in the cell's sequence of requests."""
    return user + i * users


def closed_loop_prompt(order: list[Prompt], user: int, i: int, users: int) -> Prompt:
    return order[closed_loop_slot(user, i, users) % len(order)]


def output_target(output: Length, cap: int, seed: int, slot: int) -> int:
    """The output length (max_tokens, sent with ignore_eos) of a cell's request in this slot."""
    return output.sample(random.Random(f"output/{seed}/{slot}"), cap)


def request_seed(seed: int, repetition: int, slot: int) -> int:
    """The sampling seed of a cell's request in this slot: the same for every arm's cell of a repetition (its
    paired cells then draw from the same seeds), and recorded, so that a T>0 request can be re-run exactly."""
    return random.Random(f"request/{seed}/{repetition}/{slot}").getrandbits(31)


def arrivals(rate: float, arrival: str, seed: int) -> Iterator[float]:
    """Offsets in seconds from the start of the cell, one per slot, for the whole cell."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if arrival == "constant":
        k = 0
        while True:
            yield k / rate
            k += 1
    elif arrival == "poisson":
        rng, t = random.Random(f"arrivals/{seed}"), 0.0
        while True:
            yield t
            t += rng.expovariate(rate)
    else:
        raise ValueError(f"arrival must be 'constant' or 'poisson', got '{arrival}'")


class Slots:
    """The open-loop slots one Locust process serves: every P-th slot of the cell, from w.

    Splitting one cell-wide schedule between processes (rather than giving each its own
    process at rate/P) keeps the aggregate arrival process the one the profile asked for.
    """

    def __init__(self, rate: float, arrival: str, seed: int, process: int, processes: int,
                 warmup: int, measured: int | None, duration_s: float | None):
        self._times = arrivals(rate, arrival, seed)
        self._next = 0
        self._measure_t: float | None = None
        self.process, self.processes = process, processes
        self.warmup, self.measured, self.duration_s = warmup, measured, duration_s

    def take(self) -> tuple[int, float] | None:
        """The next (slot, offset s) of this process, or None when the cell has no more."""
        while True:
            k, t = self._next, next(self._times)
            self._next += 1
            if k == self.warmup:
                self._measure_t = t
            if self.measured is not None and k >= self.warmup + self.measured:
                return None
            if self.duration_s is not None and self._measure_t is not None and t >= self._measure_t + self.duration_s:
                return None
            if k % self.processes == self.process:
                return k, t
