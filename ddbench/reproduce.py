"""`ddbench reproduce [PROFILE]`: the whole study in one command, resumable.

    validate -> prepare -> for each block of the schedule: its servers up, its cells
             (flush, scrape, load, scrape) in order, down -> analyze -> report -> the PDF's path

The schedule (ddbench/core/schedule.py) interleaves arms repetition by repetition, so that host
drift hits every arm alike; the manifest records the planned order and the order that ran.

Stages talk through the run directory: the sweep writes cells, `python -m analysis` reads
them and writes tables/, `python -m report` reads those and writes report.pdf. A failed arm or
cell is recorded with its reason and the sweep goes on; Ctrl-C leaves no server behind and a
run that `--resume RUN_DIR` completes, redoing only the cells whose status.json is not ok.
"""

from __future__ import annotations

import argparse
import functools
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from analysis.trust.kinds import barring
from ddbench import resolve, timeplan
from ddbench.cli import add_set_option, plan_text, set_args
from ddbench.core import budget, schedule
from ddbench.core.answers import gist
from ddbench.core.manifest import finish_run, git_state, planned_schedule, record_overrides, start_run
from ddbench.core.profile import Profile, ProfileError, load_profile, resolve_path
from ddbench.core.records import CellStatus
from ddbench.core.results import (
    FLUSH,
    OVERLAY_CHECK,
    REDO,
    RESULTS_ROOT,
    STATUS,
    TABLES,
    RunDir,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from ddbench.preflight import problems
from ddbench.progress_lines import ProgressLines
from loadtests import random_prompts

# soft_wrap: a line that is not a terminal's (a log, CI) keeps its length, so a printed command pastes whole
console = Console(stderr=True, soft_wrap=True)
# exit status (README's recipes table and --help say the same); a condition of the host (drift, other work)
# warns in the report and keeps 0
EXIT_NOT_CLEAN = 3     # the report is written, but a planned cell failed or a check that bars an arm failed
EXIT_NOTHING = 4       # the report is written, and says that no cell finished ok
EXIT_INTERRUPTED = 130
EXIT_CODES = ("exit status: 0 every planned cell ok and no check that bars an arm from the recommendation failed; "
              f"1 the profile, a preflight or a stage failed; {EXIT_NOT_CLEAN} the report is written, but a cell "
              f"failed or a barring check failed; {EXIT_NOTHING} the report is written and nothing was measured; "
              f"{EXIT_INTERRUPTED} interrupted (resume with --resume RUN_DIR)")


def outcome(run: RunDir, failed_cells: int) -> tuple[int, str | None]:
    """The exit status the run's own tables call for, and why it is not 0."""
    cells = pd.read_parquet(run.path / TABLES / "cells.parquet", columns=["status"])
    if not (cells["status"] == "ok").any():
        return EXIT_NOTHING, "nothing was measured: no cell finished ok (the report lists each arm's reasons)"
    checks = pd.read_parquet(run.path / TABLES / "checks.parquet", columns=["check", "scope", "status", "bars"])
    barred = barring(checks)
    if failed_cells or len(barred):
        named = ", ".join(dict.fromkeys(f"{x.check} ({x.scope})" for x in barred.itertuples()))
        return EXIT_NOT_CLEAN, (f"{failed_cells} cell(s) failed; {len(barred)} check(s) that bar an arm from the "
                                f"recommendation failed" + (f": {gist(named)}" if named else ""))
    return 0, None


def cell_status(cell_dir: Path) -> CellStatus | None:
    path = cell_dir / STATUS
    return CellStatus.model_validate(read_json(path)) if path.is_file() else None


def pending_cells(profile: Profile, run: RunDir, reps: range | None = None) -> list[tuple[str, int, int]]:
    """Cells without an ok status.json, and every cell of a repetition that an earlier slice began to run
    again and did not finish (redo.json), in run order (only repetitions in reps, when given)."""
    redo = _marked(run)
    out = []
    for arm, c, r in profile.cells():
        if reps is not None and r not in reps:
            continue
        if not _ok(run, (arm, c, r)) or r in redo:
            out.append((arm, c, r))
    return out


def _scrape(url: str, path: Path, headers: dict[str, str] | None = None) -> None:
    try:
        r = httpx.get(url + "/metrics", timeout=10, headers=headers)
        text = r.text if r.status_code == 200 else f"# /metrics answered HTTP {r.status_code}\n"
    except httpx.HTTPError as e:
        text = f"# /metrics could not be read: {type(e).__name__}: {e}\n"
    write_text_atomic(path, text)


# SGLang and the reference engine, then vLLM (its route exists where the server runs in dev mode)
FLUSH_PATHS = ("/flush_cache", "/reset_prefix_cache")


def flush(url: str, enabled: bool, headers: dict[str, str] | None = None) -> dict:
    """Ask the server to drop its prefix cache (prompts cached by one cell would flatter the next); the record
    of what it answered, for the cell's flush.json."""
    if not enabled:
        return {"flushed": False, "why": "load.flush_cache is off"}
    tried = []
    for path in FLUSH_PATHS:
        try:
            r = httpx.post(url + path, timeout=30, headers=headers)
        except httpx.HTTPError as e:
            return {"flushed": False, "path": path, "why": f"{type(e).__name__}: {e}", "tried": tried}
        if r.status_code == 200:
            return {"flushed": True, "path": path, "status": 200, "answer": r.text[:200], "tried": tried}
        tried.append({"path": path, "status": r.status_code})
        if r.status_code not in (404, 405):   # the route exists and refused: another would not be asked
            break
    return {"flushed": False, "why": "no flush route answered 200", "tried": tried}


def _retire(cell_dir: Path) -> None:
    """Move a failed or partial cell aside (kept as evidence) so it can run again; called just before the
    cell runs again, so a resume cut before then leaves the cell where it was."""
    if not cell_dir.exists():
        return
    attempts = cell_dir.parent / "attempts"
    attempts.mkdir(exist_ok=True)
    n = 1 + sum(1 for p in attempts.iterdir() if p.name.startswith(cell_dir.name + "."))
    cell_dir.rename(attempts / f"{cell_dir.name}.{n}")


def make_cell_runner(progress: Progress, task, tokenizer: Path | None = None):
    """tokenizer: the target's tokenizer directory, for random prompts (None: the workload has none)."""
    from loadtests.cell import CellError, probe, run_cell
    from loadtests.client import streams_token_ids

    streams_token_ids = functools.cache(streams_token_ids)   # a server's answer, not a cell's: asked once a sweep

    def run(workload, load, *, url, cell_dir, arm, concurrency, repetition, unmeasured=False, **kw) -> CellStatus:
        cell_dir = Path(cell_dir)
        done = cell_status(cell_dir)
        if done is not None and done.status == "ok":
            return done
        progress.update(task, description=f"{arm} C={concurrency} " + ("warm-up" if unmeasured else f"r{repetition}"))
        from containers.external import headers  # an external arm's API key, by its variable's name

        auth = headers(kw.get("api_key_env"))
        try:   # asked before the flush and the scrape, so that neither the cache nor the counters see the probe
            model = kw.get("model") or probe(url)
            kw.update(model=model, token_ids=streams_token_ids(url, model, workload.api))
        except CellError:
            pass   # run_cell asks again, and records why as the cell's failure
        flushed = flush(url, load.flush_cache, auth)
        _scrape(url, cell_dir / "metrics-before.prom", auth)
        write_json_atomic(cell_dir / FLUSH, flushed)
        try:
            return run_cell(workload, load, url=url, cell_dir=cell_dir, arm=arm, concurrency=concurrency,
                            repetition=repetition, tokenizer=tokenizer, **kw)
        finally:
            _scrape(url, cell_dir / "metrics-after.prom", auth)
            if not unmeasured:
                progress.advance(task)

    return run


def make_stretch_runner(progress: Progress, task, tokenizer: Path | None = None):
    """The rounds schedule's runner (loadtests/rounds.py): every arm's cell of one (repetition, C) at once,
    each server's cache flushed and its metrics scraped around the stretch as around a cell."""
    from containers.external import headers
    from ddbench.sweep import failed_cell
    from loadtests.cell import CellError, probe
    from loadtests.client import streams_token_ids
    from loadtests.rounds import Target, run_stretch

    streams_token_ids = functools.cache(streams_token_ids)   # a server's answer, not a stretch's: asked once a sweep

    def run(targets, load, *, concurrency, repetition, around=None) -> dict[str, CellStatus]:
        out, live, auth = {}, [], {}
        for arm, workload, url, cell_dir, kw in targets:
            auth[arm] = headers(kw.get("api_key_env"))
            done = cell_status(Path(cell_dir))
            if done is not None and done.status == "ok":
                out[arm] = done
                continue
            try:
                model = kw.get("model") or probe(url)
                ids = streams_token_ids(url, model, workload.api)
                live.append(Target(arm, url, Path(cell_dir), workload, model, ids))
            except CellError as e:
                out[arm] = failed_cell(arm, concurrency, repetition, Path(cell_dir), str(e))
        progress.update(task, description=f"rounds C={concurrency} r{repetition}")
        for t in live:
            flushed = flush(t.url, load.flush_cache, auth[t.arm])
            _scrape(t.url, t.cell_dir / "metrics-before.prom", auth[t.arm])
            write_json_atomic(t.cell_dir / FLUSH, flushed)
        try:
            if live:
                out.update(run_stretch(live, load, concurrency=concurrency, repetition=repetition,
                                       tokenizer=tokenizer, around=around))
        finally:
            for t in live:
                _scrape(t.url, t.cell_dir / "metrics-after.prom", auth[t.arm])
            if around is None:   # a profiled stretch is a diagnostic, not one of the plan's cells
                progress.advance(task, len(targets))
        return out

    return run


def whole_repetitions(profile: Profile, todo: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """A repetition left part-done (a failed cell, a slice cut short) runs again whole: a ratio pairs the
    cells of one repetition, and a pair is only worth its name if its cells ran next to each other."""
    if schedule.resolve(profile)[0] == "arm-major":
        return todo
    redo = {r for _, _, r in todo}
    return [cell for cell in profile.cells() if cell[2] in redo]


def sweep(profile: Profile, run: RunDir, reps: range | None = None) -> dict | None:
    """Run the pending cells; returns the time budget's record (ddbench/core/budget.py) or, under load.resolve, the
    resolver's (ddbench/resolve.py; budget.resolved tells them apart), None without either."""
    from ddbench.sweep import run_sweep

    todo = whole_repetitions(profile, pending_cells(profile, run, reps))
    chooser = resolve.Resolver(profile, run.path, profile.load.budget_s) if profile.load.resolve else None
    gate = budget.Budget(profile.load.budget_s) if profile.load.budget_s and chooser is None else None
    # A repetition that runs again over cells of an earlier slice is marked until it ends: a slice cut
    # inside it would leave old and new cells side by side, and the next one must redo it whole.
    marked = _marked(run)
    _mark(run, marked | {r for a, c, r in todo if run.cell_dir(a, c, r).exists()})
    columns = (TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn())
    bar = Progress(*columns, console=console) if console.is_terminal else ProgressLines(console)
    with bar as progress:
        task = progress.add_task("starting", total=len(todo))
        tokenizer = random_prompts.profile_tokenizer(profile)
        runner = make_cell_runner(progress, task, tokenizer)
        run_sweep(profile, run.path, runner, todo=todo, prepare=_unmarking(run, todo), gate=gate,
                  stretch=make_stretch_runner(progress, task, tokenizer), choose=chooser)
    if chooser is not None:
        record, left = chooser.record(), {r for _, _, r in chooser.skipped}
    else:
        record = gate.record({r for _, _, r in todo}) if gate else None
        left = set(record["not_run"]) if record else set()
    # a repetition the budget or the resolver left out keeps its mark: its old cells, if any, must not pair with
    # new ones
    _mark(run, _marked(run) - ({r for _, _, r in todo} - left))
    return record


def unfinished(pending: list[schedule.Cell], spent: dict | None) -> list[schedule.Cell]:
    """The pending cells that did not finish ok, leaving out those the budget (whole repetitions) or the resolver
    (cells, under load.resolve) chose not to run."""
    if not spent:
        return pending
    if budget.resolved(spent):
        skipped = {tuple(x) for x in spent["not_run"]}
        return [x for x in pending if x not in skipped]
    return [x for x in pending if x[2] not in set(spent["not_run"])]


def _unmarking(run: RunDir, todo: list[tuple[str, int, int]]):
    """The sweep's prepare: retire the cell's earlier attempt, and unmark each repetition whose cells of this
    slice have all run ok by now (a cell is prepared only once the one before it ended), so that a slice
    cut later does not send a finished repetition round again."""
    cells = {run.cell_dir(*x): x for x in todo}
    started: set[tuple[str, int, int]] = set()

    def prepare(cell_dir: Path) -> None:
        marked = _marked(run)
        finished = {r for r in marked if all(x in started and _ok(run, x) for x in todo if x[2] == r)}
        if finished:
            _mark(run, marked - finished)
        started.add(cells.get(Path(cell_dir)))
        _retire(cell_dir)

    return prepare


def _ok(run: RunDir, cell: tuple[str, int, int]) -> bool:
    s = cell_status(run.cell_dir(*cell))
    return s is not None and s.status == "ok"


def _marked(run: RunDir) -> set[int]:
    path = run.path / REDO
    return set(read_json(path)["repetitions"]) if path.is_file() else set()


def _mark(run: RunDir, reps: set[int]) -> None:
    if reps:
        write_json_atomic(run.path / REDO, {"repetitions": sorted(reps)})
    else:
        (run.path / REDO).unlink(missing_ok=True)


def ran_order(profile: Profile, run: RunDir) -> list[dict]:
    """The cells as they ran, by start time: what analysis pairs and what the drift check reads."""
    out = []
    for arm, c, r in profile.cells():
        s = cell_status(run.cell_dir(arm, c, r))
        if s is not None and s.started_unix is not None:
            out.append({"arm": arm, "concurrency": c, "repetition": r, "started_unix": s.started_unix,
                        "ended_unix": s.ended_unix, "status": s.status})
    return sorted(out, key=lambda x: x["started_unix"])


def _ran(profile: Profile, run: RunDir, reps: range | None, t0: float) -> dict:
    """The manifest's record of what ran: the cells' order, and each slice of the sweep (a --resume or a
    --repetitions span adds one)."""
    m = run.manifest()
    part = {"repetitions": f"{reps.start}-{reps.stop - 1}" if reps else "all", "started_unix": round(t0, 3),
            "sweep_s": round(time.time() - t0, 1), "git": git_state()}
    return {"schedule": {**m.get("schedule", {}), "ran": ran_order(profile, run)},
            "slices": [*m.get("slices", []), part]}


def extension(made_from: dict, profile: Profile) -> int | None:
    """The repetition count the run was made with, when `profile` is that run's profile with more
    repetitions and nothing else changed: a resume may then add repetitions to the run (each new one a
    block of its own, so no pair straddles the two slices). None when the profiles differ otherwise."""
    old = made_from.get("load", {}).get("repetitions")
    if not isinstance(old, int) or profile.load.repetitions <= old:
        return None
    grown = profile.model_copy(update={"load": profile.load.model_copy(update={"repetitions": old})})
    return old if grown.model_dump(mode="json") == made_from else None


def open_resumed(path: str, profile: Profile) -> RunDir:
    """The run to resume, checked against the profile; grown by repetitions if the profile asks for more."""
    run = RunDir.open(path)
    m = run.manifest()
    if m.get("profile_digest") == profile.digest():
        return run
    old = extension(m.get("profile", {}), profile)
    if old is None:
        raise ProfileError(f"{run.path} was made from a different profile (digest {str(m.get('profile_digest'))[:12]}, "
                           f"this one {profile.digest()[:12]}); resume it with the profile it was made from, or "
                           f"with that profile's repetitions raised and nothing else changed")
    grown = {"repetitions": [old, profile.load.repetitions], "profile_digest_before": m.get("profile_digest")}
    m.update(profile=profile.model_dump(mode="json"), profile_digest=profile.digest(),
             schedule={**m.get("schedule", {}), **planned_schedule(profile)}, extended=[*m.get("extended", []), grown])
    write_json_atomic(run.manifest_path, m)
    console.print(f"reproduce: {run.path} grows from {old} to {profile.load.repetitions} repetitions", highlight=False)
    return run


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _span(text: str) -> range:
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < int(m.group(1))):
        raise argparse.ArgumentTypeError(f"'{text}' is not a repetition or a span A-B (1-based, A <= B)")
    return range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1)


def stage(module: str, run: RunDir, *verb: str) -> int:
    """Run a later stage as its own process: stages share files, not memory."""
    return subprocess.run([sys.executable, "-m", module, *verb, str(run.path)]).returncode


# a profile's diagnostics: (module, just recipe); each writes its tables into the run, the report reads them
DIAGNOSTICS = {"headroom": ("analysis.headroom", "headroom"), "sampling-law": ("analysis.sampling_law", "lossless")}


def check_build(profile: Profile, run: RunDir) -> None:
    """The overlay check, on the serving host once the sweep's servers are down. Its verdict is a trust check
    (analysis/trust/checks.py reads the record), so a build that fails it, or a check that cannot run, never
    stops the analysis: the check then fails and says why."""
    if "overlay-check" not in profile.diagnostics or (run.path / OVERLAY_CHECK).is_file():
        return
    console.print("diagnostics: overlay-check (ddbench.diagnostics)", highlight=False)
    rc = stage("ddbench.diagnostics", run, "overlay-check")
    if rc:
        console.print(f"overlay check: exit {rc} (the trust check reports it)", highlight=False)


def diagnose(profile: Profile, run: RunDir) -> int:
    """The profile's offline diagnostics, in order; the first that fails stops the report."""
    for d in profile.diagnostics:
        if d not in DIAGNOSTICS:   # taken on the serving host (gpu-time, overlay-check)
            continue
        console.print(f"diagnostics: {d} ({DIAGNOSTICS[d][0]})", highlight=False)
        rc = stage(DIAGNOSTICS[d][0], run)
        if rc:
            return rc
    return 0


def _open_run(a: argparse.Namespace, profile: Profile, source: str, root: Path) -> RunDir | None:
    """The run to sweep: a new one, or the one --resume names; None (and why, printed) when it cannot start."""
    issues = problems(profile, report=not a.no_report)
    if issues:
        console.print("reproduce: cannot start:\n" + "\n".join(f"  - {p}" for p in issues), highlight=False)
        return None
    if not a.resume:
        run = RunDir.create(profile.name, root=root)
        start_run(profile, source, run, overrides=a.overrides)
        return run
    try:
        run = open_resumed(a.resume, profile)
    except ProfileError as e:
        console.print(f"reproduce: {e}", highlight=False)
        return None
    record_overrides(run, a.overrides)
    return run


def _print_where(profile: Profile, run: RunDir, no_report: bool) -> None:
    if no_report:
        later = "".join(f"just {DIAGNOSTICS[d][1]} {run.path} && " for d in profile.diagnostics if d in DIAGNOSTICS)
        console.print(f"\ntables: {run.path / 'tables'}; build the PDF with: {later}just report {run.path}",
                      highlight=False)
    else:
        console.print(f"\nreport: {run.report}", highlight=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench reproduce", description=__doc__.split("\n")[0], epilog=EXIT_CODES)
    ap.add_argument("profile", nargs="?", default="cpu-tiny")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and a time estimate; change nothing")
    ap.add_argument("--resume", metavar="RUN_DIR", help="complete this run: redo only cells that are not ok")
    ap.add_argument("--repetitions", metavar="A-B", type=_span,
                    help="run only repetitions A..B (a slice of device time; join slices with --resume, whole "
                         "repetitions each, so that every pair's cells stay adjacent in time)")
    ap.add_argument("--no-report", action="store_true",
                    help="sweep and analyze only, on a machine without TeX; then `just report RUN_DIR` elsewhere")
    add_set_option(ap)
    ap.add_argument("--results-root", default=str(RESULTS_ROOT), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    root = Path(a.results_root)
    again = f"just reproduce {a.profile}{set_args(a.overrides)}"   # the command that resumes this run
    try:
        source = str(resolve_path(a.profile))
        profile = load_profile(a.profile, a.overrides)
    except ProfileError as e:
        console.print(f"[red]reproduce:[/red] {e}", markup=True, highlight=False)
        return 1
    if a.dry_run:
        print(plan_text(profile, source, a.overrides))
        print("\ntime plan:\n" + "\n".join(f"  {line}" for line in timeplan.plan(profile, root)))
        issues = problems(profile, report=not a.no_report)
        print("\n".join(["", "not ready:"] + [f"  - {p}" for p in issues]) if issues else "\nready to run")
        return 0
    run = _open_run(a, profile, source, root)
    if run is None:
        return 1
    console.print(f"run {run.path}", highlight=False)
    t0 = time.time()
    ran, spent = {}, None
    if pending_cells(profile, run, a.repetitions):
        # `timeout` (a slice of device time cut short) sends SIGTERM: treat it as Ctrl-C, so that the servers
        # go down and the manifest records what ran
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            spent = sweep(profile, run, a.repetitions)
        except KeyboardInterrupt:
            finish_run(run, interrupted=True, **_ran(profile, run, a.repetitions, t0))
            console.print(f"\ninterrupted; no server is left running. Resume with:\n"
                          f"  {again} --resume {run.path}", highlight=False)
            return EXIT_INTERRUPTED
        finally:
            signal.signal(signal.SIGTERM, previous)
        ran = {"sweep_s": round(time.time() - t0, 1), **_ran(profile, run, a.repetitions, t0),
               **({"budget": spent} if spent else {})}
    else:
        # a slice cut after its last cell (while servers went down): nothing to run, no slice to add; a budget's
        # record of repetitions it left is stale now that they all ran
        console.print("every cell is ok already: nothing to run", highlight=False)
        ran = {"budget": None} if run.manifest().get("budget") else {}
    pending = pending_cells(profile, run)
    left = unfinished(pending, spent)
    finish_run(run, interrupted=False,
               cells={"total": len(profile.cells()), "ok": len(profile.cells()) - len(pending),
                      "not_ok": len(left), "not_run": len(pending) - len(left)}, **ran)
    check_build(profile, run)
    rc = stage("analysis", run) or (0 if a.no_report else diagnose(profile, run) or stage("report", run))
    if rc:
        console.print(f"reproduce: a stage after the sweep failed (exit {rc}); the cells are kept in {run.path}",
                      highlight=False)
        return rc
    _print_where(profile, run, a.no_report)
    if left:
        console.print(f"{len(left)} cell(s) did not finish ok; the report lists them. "
                      f"Retry them with: {again} --resume {run.path}", highlight=False)
    if spent and (line := budget.text(spent)):
        console.print(line if budget.resolved(spent) else f"{line}; run them with: {again} --resume {run.path}",
                      highlight=False)
    code, why = outcome(run, len(left))
    if code:
        console.print(f"exit {code}: {why}", highlight=False)
    return code


if __name__ == "__main__":
    sys.exit(main())
