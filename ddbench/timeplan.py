"""`reproduce --dry-run`'s time plan: what a sweep of this profile spends on bring-ups, warm-up and repetitions,
against its budget, from the earlier runs of the profile under the results root (committed ones included).

A bring-up is timed by its arm's status.json (ready_s: start to the first answer), its level rounds by their
records, a repetition by the union of
its cells' spans (cells that ran side by side, as a rounds stretch, count once). Each figure is the median over
what was recorded; a figure never recorded is said to be unknown rather than guessed."""

from __future__ import annotations

import statistics
from pathlib import Path

from ddbench.core import budget, formulas, schedule
from ddbench.core.profile import Profile
from ddbench.core.records import CellStatus
from ddbench.core.results import MANIFEST, STATUS, WARMUP, WARMUP_LEVEL, RunDir, read_json, read_records


def bring_up_seconds(runs: list[Path], servers: list[str]) -> dict[str, float]:
    """Median seconds to ready per server (arm) over the runs that brought it up."""
    seen: dict[str, list[float]] = {}
    for run in runs:
        for s in servers:
            try:
                ready = read_json(RunDir(run).arm_dir(s) / STATUS).get("ready_s")
            except (OSError, ValueError):
                continue
            if isinstance(ready, int | float) and ready > 0:
                seen.setdefault(s, []).append(float(ready))
    return {s: statistics.median(v) for s, v in seen.items()}


def repetition_seconds(runs: list[Path]) -> list[float]:
    """Each recorded repetition's wall time: the union of its finished cells' spans."""
    out = []
    for run in runs:
        spans: dict[int, set[tuple[float, float]]] = {}
        for *_, cell in RunDir(run).cells():
            try:
                s = CellStatus.model_validate(read_json(cell / STATUS))
            except (OSError, ValueError):
                continue
            if s.status == "ok" and s.started_unix and s.ended_unix:
                spans.setdefault(s.repetition, set()).add((s.started_unix, s.ended_unix))
        out += [_union(sorted(v)) for v in spans.values()]
    return out


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def level_seconds(runs: list[Path]) -> float | None:
    """Median seconds of one bring-up's level rounds (load.warmup_levels): from its rounds' first send to their
    last end, summed over its (arm, C) pairs."""
    per: dict[tuple[Path, str], float] = {}
    for run in runs:
        for d in Path(run).glob(f"*/{WARMUP}/c*.*/{WARMUP_LEVEL}"):
            done = [r for r in read_records(d) if r.end_ns]
            if done:
                k = (run, d.parent.name.split(".", 1)[1])
                per[k] = per.get(k, 0.0) + float(formulas.window_s(*formulas.span([r.send_ns for r in done],
                                                                                   [r.end_ns for r in done])))
    return statistics.median(per.values()) if per else None


def plan(profile: Profile, root: Path) -> list[str]:
    """The plan's lines: bring-ups and warm-up (once, or per repetition where the schedule brings servers up
    afresh each repetition), a repetition, and what the budget lets run."""
    runs = sorted(p for p in (root / profile.name).glob("*") if (p / MANIFEST).is_file())
    servers = list(dict.fromkeys(a.server for a in profile.measured_arms()))
    blocks, n = schedule.blocks(profile), profile.load.repetitions
    ready = bring_up_seconds(runs, servers)
    lines = [f"from {len(runs)} earlier run(s) of {profile.name} under {root}" if runs
             else f"no earlier run of {profile.name} under {root}: bring-up and repetition times unknown"]
    told = ", ".join(f"{s} {ready[s]:.0f} s" for s in servers if s in ready) or "none timed"
    lines.append(f"bring-ups: {schedule.bring_ups(profile)} in {len(blocks)} block(s) ({told})")
    if warm := schedule.warm_up_text(profile):
        lines.append(warm)
    level = level_seconds(runs) if profile.load.warmup_levels else None
    if profile.load.warmup_levels:
        lines.append(f"a bring-up's level rounds: {level:.0f} s (median)" if level is not None
                     else "a bring-up's level rounds: never recorded here")
    reps = repetition_seconds(runs)
    lines.append(f"a repetition's cells: {statistics.median(reps):.0f} s (median of {len(reps)} recorded)" if reps
                 else "a repetition's cells: never recorded here")
    if not reps or any(s not in ready for s in servers) or (profile.load.warmup_levels and level is None):
        return lines
    # a block within one repetition is that repetition's cost; one spanning several is paid once, up front
    once = each = 0.0
    for b in blocks:
        cost = sum(ready[s] for s in b.arms) + profile.load.warmup_s + (level or 0.0)
        if len({r for _, _, r in b.cells}) == 1:
            each += cost / n
        else:
            once += cost
    rep = statistics.median(reps) + each
    lines.append(f"up front: {once:.0f} s of bring-up and warm-up; each repetition {rep:.0f} s with its own; "
                 f"all {n}: {once + n * rep:.0f} s ({(once + n * rep) / 60:.1f} min)")
    if profile.load.resolve:
        floor = once + budget.MIN_REPETITIONS * rep
        goals = sum(1 for t in profile.goals() for c in profile.load.concurrency if t.at(c) is not None)
        lines.append(f"resolve: the first {budget.MIN_REPETITIONS} repetitions about {floor:.0f} s, then stretches "
                     f"go to the levels whose targets are open ({goals} target(s) over {len(profile.load.concurrency)} "
                     f"level(s)) until every one is met"
                     + (f" or {profile.load.budget_s:g} s are spent" if profile.load.budget_s else "")
                     + f", at most {n} repetitions of each level")
    elif profile.load.budget_s:
        fit = max(int((profile.load.budget_s - once) // rep), 0)
        ran = min(n, max(fit, budget.MIN_REPETITIONS))
        lines.append(f"budget {profile.load.budget_s:g} s: {ran} of {n} repetitions (the first "
                     f"{budget.MIN_REPETITIONS} always run), about {once + ran * rep:.0f} s"
                     + (", past the budget" if fit < ran else ""))
    return lines
