"""The order cells run in, and which servers are up while they run.

A host drifts (thermal state, a neighbour's load, a CPU's boost budget). When an arm's cells
run back to back, the drift between arms becomes an arm effect that no interval over one arm's
repetitions can see. So cells run repetition-major, arm order reversed on alternate repetitions
(A B C, C B A, A B C, ...): within a repetition, the cells that a ratio pairs are adjacent in
time, and linear drift cancels over two repetitions.

    interleaved     every arm's server is up for the whole sweep; within each (repetition, C)
                    the arms' cells alternate. For servers that start in seconds and fit together.
    interleaved-fresh  as interleaved, but every repetition starts all the servers afresh (together)
                    and stops them after it: a server process has its own speed (memory layout,
                    placement, allocator state), which one process per arm for the whole sweep
                    turns into a run effect no interval sees. On cpu-tiny, three runs of one commit
                    on a quiet host moved chain / linear at C=4 by 3%, outside each other's intervals.
    per-repetition  each repetition brings each arm up in turn, runs its cells at every C and
                    takes it down: for servers that cost a minute to start or cannot share the GPU.
    arm-major       each arm up once, all its cells, then the next (the old order; drift between
                    arms is then unmeasured, and the drift check says so).
    rounds          every arm's server up for the whole sweep, as interleaved; each (repetition, C)
                    is one stretch in which the arms take turns unit by unit (C requests at once,
                    the same prompts for every arm of a round, the order rotated each round:
                    loadtests/rounds.py). A server's slow and fast states last seconds, so whole
                    cells sample a few of them and a ratio carries their spread; units of about a
                    second sample many, alike for every arm. Intervals then come from the rounds
                    (analysis/estimate/rounds.py) as well as from the repetitions, never from both at once.

`auto` picks interleaved when all the servers can be up together, else per-repetition; a
profile's `load.schedule` overrides it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

# The prompt order loadtests/plan.py keeps, as a manifest records it; sibling runs must share it
# (analysis/agreement.py): runs that sent other prompts at the same profile are not repetitions of one
# experiment. Change it when a profile's cells would send other requests.
PROMPT_ORDER = "shuffled by seed; the same in every repetition"

Mode = Literal["auto", "interleaved", "interleaved-fresh", "per-repetition", "arm-major", "rounds"]
MODES = get_args(Mode)
# SGLang servers on one GPU: what their static memory fractions may add up to, leaving room
# for each process's CUDA context and graphs outside the fraction
GPU_SHARE = 0.9


class Profile(Protocol):
    """What the schedule reads of a profile (ddbench.core.profile.Profile is one). The schedule sits below the
    profile: the profile's load.schedule field takes its Mode from here, and Profile.cells() is order()."""

    # read-only: a frozen model's fields are (.load: .schedule, a Mode, .concurrency, .repetitions; .backend:
    # .kind; .runtime: .mem_fraction_static; .placement: .device)
    @property
    def load(self) -> Any: ...
    @property
    def backend(self) -> Any: ...
    @property
    def runtime(self) -> Any: ...
    @property
    def placement(self) -> Any: ...
    @property
    def arms(self) -> Sequence[Any]: ...

    def measured_arms(self) -> list[Any]: ...


Cell = tuple[str, int, int]  # (measured arm id, concurrency, repetition): the arm carries the sampling setting


@dataclass(frozen=True)
class Block:
    """Servers (base arm ids) brought up together, then these cells in this order, then the servers go down."""

    arms: tuple[str, ...]
    cells: tuple[Cell, ...]


def resolve(profile: Profile) -> tuple[str, str]:
    """(mode, why): the profile's own choice, or what `auto` decides for it."""
    asked = profile.load.schedule
    if asked != "auto":
        return asked, "set by the profile (load.schedule)"
    if profile.backend.kind == "refengine":
        return "interleaved", "reference-engine servers start in seconds and are small: all stay up"
    if profile.backend.kind == "external":
        return "interleaved", "external servers are already running: ddbench starts and stops none"
    frac = profile.runtime.mem_fraction_static
    n = len(profile.arms)
    if profile.placement.device == "cuda" and frac is not None and frac * n <= GPU_SHARE:
        return "interleaved", (f"{n} SGLang servers x mem_fraction_static {frac:g} = {frac * n:.2f} of the GPU "
                               f"(<= {GPU_SHARE:g}): all stay up, started once")
    why = ("mem_fraction_static is unset (SGLang takes most of the GPU)" if frac is None
           else f"{n} servers x mem_fraction_static {frac:g} = {frac * n:.2f} of the GPU (> {GPU_SHARE:g})")
    return "per-repetition", f"{why}: each arm restarts once per repetition"


def _arm_order(arms: list[str], repetition: int) -> list[str]:
    return arms if repetition % 2 == 1 else arms[::-1]


def blocks(profile: Profile, mode: str | None = None) -> list[Block]:
    """Cells are those of the measured arms (an arm under each sampling setting, setting-major, so that a
    ratio's two cells, same setting, stay adjacent); a block's servers are their base arms'."""
    mode = mode or resolve(profile)[0]
    arms = [a.id for a in profile.measured_arms()]
    servers = {a.id: a.server for a in profile.measured_arms()}
    levels, reps = profile.load.concurrency, range(1, profile.load.repetitions + 1)

    def block(cells) -> Block:
        return Block(tuple(dict.fromkeys(servers[a] for a, _, _ in cells)), tuple(cells))

    if mode in ("interleaved", "rounds"):
        return [block([(a, c, r) for r in reps for c in levels for a in _arm_order(arms, r)])]
    if mode == "interleaved-fresh":
        return [block([(a, c, r) for c in levels for a in _arm_order(arms, r)]) for r in reps]
    # an arm's server serves its measured arms' cells in one bring-up
    by_server = {s: [a for a in arms if servers[a] == s] for s in dict.fromkeys(servers.values())}
    if mode == "per-repetition":
        return [block([(a, c, r) for a in by_server[s] for c in levels])
                for r in reps for s in _arm_order(list(by_server), r)]
    if mode == "arm-major":
        return [block([(a, c, r) for a in by_server[s] for c in levels for r in reps]) for s in by_server]
    raise ValueError(f"unknown schedule '{mode}' (one of {', '.join(MODES)})")


def stretches(cells: Sequence[Cell]) -> list[list[Cell]]:
    """The rounds schedule's stretches: consecutive cells of one (repetition, C), every arm's, in order."""
    out: list[list[Cell]] = []
    for cell in cells:
        if out and (out[-1][0][1], out[-1][0][2]) == (cell[1], cell[2]):
            out[-1].append(cell)
        else:
            out.append([cell])
    return out


def order(profile: Profile, mode: str | None = None) -> list[Cell]:
    """Every cell, in run order."""
    return [cell for b in blocks(profile, mode) for cell in b.cells]


def bring_ups(profile: Profile, mode: str | None = None) -> int:
    return sum(len(b.arms) for b in blocks(profile, mode))


def warm_up_text(profile: Profile, mode: str | None = None) -> str:
    """The plan's warm-up after each block's bring-up (load.warmup_s, load.warmup_levels), or '' without one."""
    load = profile.load
    if not (load.warmup_s or load.warmup_levels):
        return ""
    ups = len(blocks(profile, mode))
    stable = load.warmup_until_stable
    if stable is not None:
        timed = (f"per arm and C in {stable.window_s:g} s windows until two in a row agree within "
                 f"{stable.within_pct:g}% (at most {load.warmup_s:g} s in all)")
    else:
        timed = f"{load.warmup_s:g} s shared over the arms and C" if load.warmup_s else ""
    level = "one whole request per user at each arm and C" if load.warmup_levels else ""
    return f"unmeasured warm-up after each of {ups} bring-up(s): " + ", then ".join(x for x in (timed, level) if x)
