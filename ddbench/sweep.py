"""Run a profile's cells against its servers, so that a dying server fails its cell, not the sweep.

    run_sweep(profile, run_dir, cell=loadtests.cell.run_cell)

The schedule (ddbench/core/schedule.py) cuts the sweep into blocks: servers that are up together and
the cells that run against them, in order. For each block its servers come up (the first alone,
so that one-time compilation caches are warm, then the rest in parallel; SGLang servers sharing a
GPU one at a time, each sized to its share: containers/gpu_memory.py), they take load.warmup_s of
unmeasured load, its cells run with telemetry, and its servers go down; a time budget (load.budget_s,
ddbench/core/budget.py) may end the sweep between repetitions. An arm that does not come
up, or a server that exits before or during a cell, leaves every affected cell with a failed
status.json that says why; the sweep goes on. Backend 'external' (containers/external.py): no
server is started or stopped; each is checked to answer (one that does not fails its arm's cells,
naming the arm and URL). The cell runner is passed in (the load generator's run_cell), so this
module knows servers, not traffic.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from containers import bringup, external
from containers.telemetry import TELEMETRY, Telemetry
from ddbench.core import formulas, schedule
from ddbench.core.profile import Profile
from ddbench.core.records import CellStatus
from ddbench.core.results import (
    DIAGNOSTICS,
    GPU_TIME,
    HOST_PROFILE,
    STABLE,
    STATUS,
    WARMUP,
    WARMUP_LEVEL,
    cell_name,
    read_records,
    write_json_atomic,
)

# forward steps of each host-profile unit under the profiler: a speculative arm's first ~200 tokens, AR's 32; Python
# stacks make a step's trace thousands of events, and this keeps one to tens of MB
HOST_STEPS = 32
# cell(workload, load, *, url, cell_dir, arm, concurrency, repetition[, unmeasured]) -> CellStatus; the
# workload is the one the measured arm sends (its sampling setting), the url its base arm's server;
# unmeasured=True for a warm-up's load
CellRunner = Callable[..., CellStatus]
# stretch(targets: [(arm, workload, url, cell_dir, request args)], load, *, concurrency, repetition)
#   -> {arm: CellStatus}: the rounds schedule's cells of one (repetition, C), every arm's at once
StretchRunner = Callable[..., dict[str, CellStatus]]
# choose(todo: the stretches not yet run, each [(arm, C, repetition)], in plan order) -> (index, arms) | None
Chooser = Callable[[list[list[schedule.Cell]]], tuple[int, list[str]] | None]


def failed_cell(arm: str, c: int, r: int, cell_dir: Path, reason: str) -> CellStatus:
    """A cell that could not run: its status.json says why."""
    status = CellStatus(arm=arm, concurrency=c, repetition=r, status="failed", reason=reason,
                        started_unix=time.time(), ended_unix=time.time())
    write_json_atomic(cell_dir / STATUS, status.model_dump(mode="json"))
    return status


def run_block(profile: Profile, block: schedule.Block, run_dir: Path, cell: CellRunner, *,
              command: list[str] | None = None, timeout_s: float | None = None,
              telemetry_interval_s: float = 1.0, prepare: Callable[[Path], None] | None = None,
              gate: Callable[[int], bool] | None = None, stretch: StretchRunner | None = None,
              choose: Chooser | None = None) -> list[CellStatus]:
    """prepare(cell_dir) runs just before a cell runs or is marked failed (a resume retires the cell's
    earlier attempt there, so a sweep cut during bring-up loses no finished cell). gate(repetition) is asked
    before each cell: False ends the block there (a time budget, ddbench/core/budget.py; the block's cells run in
    repetition order). choose: the rounds schedule's next stretch (ddbench/resolve.py), in place of plan order."""
    cell_dir = lambda a, c, r: Path(run_dir) / a / cell_name(c, r)  # noqa: E731
    outside = profile.backend.kind == "external"   # servers the user runs: checked, never started or stopped
    if outside:
        servers, down = external.check_all(profile, list(block.arms), run_dir)
    else:
        servers, down = bringup.up_together(profile, list(block.arms), run_dir, command=command, timeout_s=timeout_s)
    out = []
    try:
        warm_up(profile, block, servers, run_dir, cell, outside)
        if stretch is not None and "gpu-time" in profile.diagnostics:
            time_kernels(profile, block, run_dir, servers, stretch, outside)
        if stretch is not None and "host-profile" in profile.diagnostics:
            time_host(profile, block, run_dir, servers, stretch, outside)
        if hasattr(gate, "rebase") and len({r for _, _, r in block.cells}) > 1:
            gate.rebase(block.cells[0][2])   # a bring-up shared by many repetitions is none's own length
        if stretch is not None:
            return run_stretches(profile, block, run_dir, servers, down, stretch, outside=outside, prepare=prepare,
                                 gate=gate, choose=choose, telemetry_interval_s=telemetry_interval_s)
        for a, c, r in block.cells:
            if gate is not None and not gate(r):
                break
            if prepare is not None:
                prepare(cell_dir(a, c, r))
            out.append(_one_cell(profile, (a, c, r), cell_dir(a, c, r), servers, down, cell, outside,
                                 telemetry_interval_s))
    finally:
        for s in servers.values():
            s.stop()
    return out


def _unrunnable(profile: Profile, arm: str, servers: dict, down: dict[str, str], outside: bool) -> str | None:
    """Why the arm's server cannot take a cell now (it never came up, or it exited), or None."""
    base = profile.arm(arm).server
    if base in down:
        return down[base] if outside else f"the arm did not come up: {down[base]}"
    gone = servers[base].exited()
    return f"the server {gone} before this cell" if gone is not None else None


def _one_cell(profile: Profile, key: tuple[str, int, int], cell_dir: Path, servers: dict, down: dict[str, str],
              cell: CellRunner, outside: bool, telemetry_interval_s: float) -> CellStatus:
    """One cell against its arm's server, or the cell failed with why: the server never came up, or exited
    before or during it."""
    a, c, r = key
    why = _unrunnable(profile, a, servers, down, outside)
    if why:
        return failed_cell(a, c, r, cell_dir, why)
    server = servers[profile.arm(a).server]
    with Telemetry(cell_dir / TELEMETRY, gpus=profile.placement.gpus or None, interval_s=telemetry_interval_s):
        status = cell(profile.workload_for(a), profile.load_for(a), url=server.url, cell_dir=cell_dir,
                      arm=a, concurrency=c, repetition=r, **_request_args(server, outside))
    gone = server.exited()
    if gone is not None:
        why = f"the server {gone} during the cell" + (f"; {status.reason}" if status.reason else "")
        status = status.model_copy(update={"status": "failed", "reason": why})
        write_json_atomic(cell_dir / STATUS, status.model_dump(mode="json"))
    return status


def run_stretches(profile: Profile, block: schedule.Block, run_dir: Path, servers: dict, down: dict[str, str],
                  stretch: StretchRunner, *, outside: bool, prepare=None, gate=None, choose: Chooser | None = None,
                  telemetry_interval_s: float = 1.0) -> list[CellStatus]:
    """The rounds schedule: each (repetition, C) of the block as one stretch over the arms that are up (one
    telemetry record for the stretch, copied into each of its cells); an arm that is down fails its cell. With
    choose, it says which stretch runs next and with which arms, or that none does."""
    cell_dir = lambda a, c, r: Path(run_dir) / a / cell_name(c, r)  # noqa: E731
    out = []
    todo = schedule.stretches(block.cells)
    while (cells := _next_stretch(todo, choose)) is not None:
        c, r = cells[0][1], cells[0][2]
        if gate is not None and not gate(r):
            break
        live = []
        for a, _, _ in cells:
            if prepare is not None:
                prepare(cell_dir(a, c, r))
            why = _unrunnable(profile, a, servers, down, outside)
            if why:
                out.append(failed_cell(a, c, r, cell_dir(a, c, r), why))
            else:
                live.append(a)
        if not live:
            continue
        targets = [(a, profile.workload_for(a), servers[profile.arm(a).server].url, cell_dir(a, c, r),
                    _request_args(servers[profile.arm(a).server], outside)) for a in live]
        first = cell_dir(live[0], c, r)
        with Telemetry(first / TELEMETRY, gpus=profile.placement.gpus or None, interval_s=telemetry_interval_s):
            statuses = stretch(targets, profile.load, concurrency=c, repetition=r)
        for a in live:
            status = statuses[a]
            gone = servers[profile.arm(a).server].exited()
            if gone is not None:
                status = status.model_copy(update={"status": "failed", "reason": f"the server {gone} during the cell"})
                write_json_atomic(cell_dir(a, c, r) / STATUS, status.model_dump(mode="json"))
            if a != live[0] and (first / TELEMETRY).is_file():
                shutil.copyfile(first / TELEMETRY, cell_dir(a, c, r) / TELEMETRY)
            out.append(status)
    return out


def _next_stretch(todo: list[list[schedule.Cell]], choose: Chooser | None) -> list[schedule.Cell] | None:
    """The next stretch's cells, taken off todo (only the arms choose names), or None: none left, or choose ends
    the sweep."""
    while todo:
        if choose is None:
            return todo.pop(0)
        if (pick := choose(todo)) is None:
            return None
        if cells := [x for x in todo.pop(pick[0]) if x[0] in pick[1]]:
            return cells
    return None


def time_kernels(profile: Profile, block: schedule.Block, run_dir: Path, servers: dict, stretch: StretchRunner,
                 outside: bool) -> None:
    """The gpu-time diagnostic: before the measured stretches, one unmeasured round per C with each unit under
    SGLang's profiler (containers/kernel_time.py), into RUN_DIR/diagnostics/gpu-time/: <arm>/c<C>/ holds the
    round's records, <arm>-c<C>.json the GPU's busy time over the unit. Nothing here is read as a cell."""
    from containers.kernel_time import KernelTimer

    root = Path(run_dir) / DIAGNOSTICS / GPU_TIME
    for c in dict.fromkeys(c for _, c, _ in block.cells):
        _profiled_round(profile, block, servers, stretch, outside, root, c,
                        lambda t, c=c: KernelTimer(t.url, root / f"{t.arm}-c{c}.json"))


def time_host(profile: Profile, block: schedule.Block, run_dir: Path, servers: dict, stretch: StretchRunner,
              outside: bool) -> None:
    """The host-profile diagnostic: one unmeasured round at C=1 and at C=8 (where the run has them), each unit's
    first HOST_STEPS forward steps under SGLang's profiler with CPU activity and Python stacks, into
    RUN_DIR/diagnostics/host-profile/<arm>-c<C>.json: the GPU's idle time per step and the frames the scheduler
    was in meanwhile (containers/host_time.py)."""
    from containers import host_time
    from containers.kernel_time import KernelTimer

    root = Path(run_dir) / DIAGNOSTICS / HOST_PROFILE
    for c in [c for c in dict.fromkeys(c for _, c, _ in block.cells) if c in (1, 8)]:
        _profiled_round(profile, block, servers, stretch, outside, root, c,
                        lambda t, c=c: KernelTimer(t.url, root / f"{t.arm}-c{c}.json", activities=("CPU", "GPU"),
                                                   num_steps=HOST_STEPS, summarize=host_time.summarize))


def _profiled_round(profile: Profile, block: schedule.Block, servers: dict, stretch: StretchRunner, outside: bool,
                    root: Path, c: int, timer) -> None:
    """One unmeasured round at C of every arm that is up, each unit inside timer(target); its records go to
    root/<arm>/c<C>/. A resumed sweep keeps the round it has."""
    arms = [a for a in dict.fromkeys(x for x, _, _ in block.cells) if profile.arm(a).server in servers]
    if not arms or (root / f"{arms[-1]}-c{c}.json").is_file():
        return
    targets = [(a, profile.workload_for(a), servers[profile.arm(a).server].url, root / a / f"c{c}",
                _request_args(servers[profile.arm(a).server], outside)) for a in arms]
    load = profile.load.model_copy(update={"warmup_requests": 0, "requests_per_user": 1})
    stretch(targets, load, concurrency=c, repetition=0, around=timer)


def _request_args(server, outside: bool) -> dict:
    """An external server's model name and API key go with each request (the key by its variable's name)."""
    return {"model": server.model, "api_key_env": server.api_key_env} if outside else {}


def warm_up(profile: Profile, block: schedule.Block, servers: dict, run_dir: Path, cell: CellRunner,
            outside: bool = False) -> None:
    """Unmeasured load after a bring-up, for each of the block's (arm, concurrency) pairs in the order they run,
    into <arm>/warmup/c<C>.<k>/ (never read as a cell; k counts bring-ups): load.warmup_s shared evenly over
    the pairs, then with load.warmup_levels one whole request per user in level/. A warm-up that fails is left
    at that: the measured cells say what is wrong."""
    load = profile.load
    pairs = list(dict.fromkeys((a, c) for a, c, _ in block.cells if profile.arm(a).server in servers))
    if not pairs or not (load.warmup_s or load.warmup_levels):
        return
    share = load.warmup_s / len(pairs)
    for a, c in pairs:
        server = servers[profile.arm(a).server]
        if server.exited() is not None:
            continue
        where, args = warmup_dir(run_dir, a, c), _request_args(server, outside)

        def window(d: Path, update: dict, a=a, c=c, server=server, args=args) -> None:
            cell(profile.workload_for(a), profile.load_for(a).model_copy(update={"warmup_requests": 0, **update}),
                 url=server.url, cell_dir=d, arm=a, concurrency=c, repetition=0, unmeasured=True, **args)

        timed = {"duration_s": load.warmup_until_stable.window_s if load.warmup_until_stable else share,
                 "requests_per_user": None}
        if load.warmup_until_stable is not None:
            warm_until_stable(lambda d, w=window, t=timed: w(d, t), where, load.warmup_until_stable, share)
        elif share:
            window(where, timed)
        if load.warmup_levels:   # every user's request runs to max_tokens: the level's every shape, once
            window(where / WARMUP_LEVEL, {"requests_per_user": 1, "duration_s": None, "unit_s": None})


def warm_until_stable(window: Callable[[Path], None], where: Path, stable, cap_s: float) -> dict:
    """Windows of unmeasured load into where/w<i>/ until two in a row agree within stable.within_pct, or until
    cap_s is spent; what each window's throughput was and when the server became stable go to stable.json."""
    rates, t0 = [], time.monotonic()
    record = {"within_pct": stable.within_pct, "window_s": stable.window_s, "cap_s": cap_s, "stable_after_s": None}
    while True:
        d = where / f"w{len(rates) + 1}"
        window(d)
        rates.append(window_throughput(d))
        if len(rates) >= 2 and all(map(math.isfinite, rates[-2:])) and rates[-2] > 0 \
                and abs(rates[-1] / rates[-2] - 1) * 100 <= stable.within_pct:
            record["stable_after_s"] = round(time.monotonic() - t0, 1)
            break
        if (len(rates) + 1) * stable.window_s > cap_s:   # the next window would overrun this pair's share
            break
    record.update(windows=[round(r, 3) if math.isfinite(r) else None for r in rates],
                  spent_s=round(time.monotonic() - t0, 1))
    write_json_atomic(where / STABLE, record)
    return record


def window_throughput(d: Path) -> float:
    """Output tokens per second of a warm-up window: its finished requests' tokens over first send to last end."""
    done = [r for r in read_records(d) if r.ok and r.usage is not None and r.end_ns]
    if not done:
        return float("nan")
    start, stop = formulas.span([r.send_ns for r in done], [r.end_ns for r in done])
    return formulas.throughput(sum(r.usage.completion_tokens for r in done), formulas.window_s(start, stop))


def warmup_dir(run_dir: Path, arm: str, concurrency: int) -> Path:
    d = Path(run_dir) / arm / WARMUP
    k = 1 + (sum(1 for p in d.iterdir() if p.name.startswith(f"c{concurrency}.")) if d.is_dir() else 0)
    return d / f"c{concurrency}.{k}"


def run_sweep(profile: Profile, run_dir: Path, cell: CellRunner, *, todo: list[schedule.Cell] | None = None,
              mode: str | None = None, gate: Callable[[int], bool] | None = None, stretch: StretchRunner | None = None,
              **kw) -> dict[str, list[CellStatus]]:
    """Every cell of the schedule (or only those in todo), block by block; statuses by arm, in run order.
    gate(repetition): whether a repetition may start, asked before a block's bring-up and before each cell.
    stretch: the rounds schedule's runner, used when the schedule is 'rounds' (cells otherwise)."""
    wanted = set(todo) if todo is not None else None
    if (mode or schedule.resolve(profile)[0]) != "rounds":
        stretch = None
    elif stretch is None:
        raise ValueError("schedule 'rounds' needs a stretch runner (loadtests/rounds.py)")
    out: dict[str, list[CellStatus]] = {a.id: [] for a in profile.measured_arms()}
    for block in schedule.blocks(profile, mode):
        cells = tuple(x for x in block.cells if wanted is None or x in wanted)
        if not cells or (gate is not None and not gate(cells[0][2])):
            continue
        arms = tuple(a for a in block.arms if any(profile.arm(x[0]).server == a for x in cells))
        for status in run_block(profile, schedule.Block(arms, cells), run_dir, cell, gate=gate, stretch=stretch,
                                **kw):
            out[status.arm].append(status)
    return out
