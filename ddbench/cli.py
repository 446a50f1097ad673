"""The `ddbench` command: `check` lives here; every other verb runs its stage's own module.

A verb whose stage is not built says which stage is missing and exits 2, so the front door
never prints output that no stage produced.
"""

from __future__ import annotations

import argparse
import importlib.util
import runpy
import sys

from containers.launch import server_command
from ddbench import init as init_profile
from ddbench import preflight
from ddbench.core import budget, builds, schedule
from ddbench.core.profile import ProfileError, load_profile, resolve_path
from ddbench.core.prompts import prompt_set_label

EXIT_ERROR, EXIT_MISSING_STAGE = 1, 2

# verb -> (module run as __main__, the stage that builds it)
STAGES = {
    "reproduce": ("ddbench.reproduce", "Reproduce (`just reproduce`)"),
    "verify": ("ddbench.verify", "Reproduce (`just verify`)"),
    "bench": ("ddbench.bench", "Reproduce (servers you run, in one line)"),
    "pack": ("ddbench.pack", "Reproduce (packing a run to commit)"),
    "up": ("containers.up", "Containers (bring-up)"),
    "down": ("containers.down", "Containers (bring-up)"),
    "load": ("ddbench.onecell", "Load generation + Containers (one cell)"),
    "ui": ("ddbench.ui", "Load generation (web UI)"),
    "analyze": ("analysis", "Analysis and report (analysis)"),
    "report": ("report", "Analysis and report (report)"),
    "train-models": ("refengine.train", "Model pair (training)"),
    "serve": ("refengine.serve", "Reference engine, server"),
}


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def run_stage(verb: str, argv: list[str]) -> int:
    module, stage = STAGES[verb]
    if not _module_exists(module):
        print(f"ddbench {verb}: the '{stage}' stage is not built yet ({module} is missing); "
              "nothing was run.", file=sys.stderr)
        return EXIT_MISSING_STAGE
    sys.argv = [f"ddbench {verb}", *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_ERROR)
    return 0


def _cells_of_ui_session(argv: list[str]) -> None:
    """A web UI session's directory (it has phases.json) is analysed as a run of its phases: write its cells
    first (loadtests/adhoc.py), so that a session the UI could not close still reads whole."""
    from pathlib import Path

    dirs = [Path(a) for a in argv if not a.startswith("-") and (Path(a) / "phases.json").is_file()]
    if dirs:
        from loadtests.adhoc import materialize

        for d in dirs:
            materialize(d)


SET_HELP = ("change one profile field, as if the file said so (repeatable): PATH=VALUE, VALUE read as YAML, "
            "e.g. --set load.concurrency=[1,8,32] --set arms.tree-b15-k8.topk=8 (ddbench/core/overrides.py, "
            "docs/profile.md)")


def add_set_option(ap: argparse.ArgumentParser) -> None:
    """`--set PATH=VALUE`, for every verb that loads a profile to run or check it."""
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE", help=SET_HELP)


def set_args(overrides: list[str]) -> str:
    """The overrides as a command line repeats them: ' --set a=1 --set b=2' ('' for none)."""
    import shlex

    return "".join(f" --set {shlex.quote(o)}" for o in overrides)


def plan_text(profile, source: str, overrides: list[str] | tuple[str, ...] = ()) -> str:
    load, wl = profile.load, profile.workload
    mode, why = schedule.resolve(profile)
    cells = schedule.order(profile, mode)
    lines = [f"profile {profile.name}  ({source})",
             *([f"  overrides{set_args(list(overrides))}"] if overrides else []),
             f"  digest {profile.digest()[:16]}",
             f"  backend {profile.backend.kind} ({profile.backend.runtime}"
             + (f", image {profile.backend.image}" if profile.backend.runtime == "docker" else "") + ")",
             f"  build {builds.describe(profile)}",
             f"  models  target {profile.models.target}  drafter {profile.models.drafter or '-'}",
             f"  placement {profile.placement.device}"
             + (f" gpus {profile.placement.gpus} tp {profile.placement.tp_size}" if profile.placement.gpus else "")
             + (f", servers pinned to CPU {profile.placement.cpus}" if profile.placement.cpus else ""),
             f"  workload {prompt_set_label(wl.prompt_set)}  " + wl.lengths_text.replace(", ", "  "),
             "  sampling " + "; ".join(s.text for s in wl.settings())
             + (" (each arm measured under each: <arm>@<label>)" if len(wl.settings()) > 1 else "")]
    measured_arms = profile.measured_arms()
    blocks = [c for c in load.concurrency if load.unit_seconds(c)]
    if blocks:   # a block's users send as many requests as its seconds hold: no count to give
        requests = ("rounds of one request per user, except blocks of "
                    + ", ".join(f"{load.unit_seconds(c):g} s at C={c}" for c in blocks)
                    + f" (units per stretch: {', '.join(f'C={c}: {load.per_user(c)}' for c in load.concurrency)})")
    elif load.requests_per_user is not None:
        per_rep = sum(c * (load.warmup_requests + load.per_user(c)) for c in load.concurrency)
        measured = sum(c * load.per_user(c) for c in load.concurrency)
        requests = (f"{per_rep * load.repetitions * len(measured_arms)} requests in total "
                    f"({measured * load.repetitions * len(measured_arms)} measured)")
    else:
        requests = f"{load.duration_s:g} s per cell after {load.warmup_requests} warmup requests per user"
    rates = load.rates()
    lines += [f"  load {load.mode}" + (f" at {', '.join(f'{q:g}' for q in rates)} req/s offered"
                                       + (" (each arm measured at each: <arm>@q<rate>)" if len(rates) > 1 else "")
                                       if load.mode == "open" else "")
              + f", concurrency {load.concurrency}, {load.repetitions} repetition(s), "
              f"seed {load.seed}" + (f", load generator pinned to CPU {load.cpus}" if load.cpus else ""),
              *([f"  budget {load.budget_s:g} s for the sweep: a repetition starts only if it would end inside it "
                 f"(the first {budget.MIN_REPETITIONS} always run; the rest are left for --resume)"]
                if load.budget_s else []),
              f"  cells {len(measured_arms)} arms x {len(load.concurrency)} concurrency x "
              f"{load.repetitions} repetitions = {len(cells)} cells; {requests}",
              f"  schedule {mode}: {why}; {schedule.bring_ups(profile, mode)} server start(s)"
              + (f"; {w}" if (w := schedule.warm_up_text(profile, mode)) else ""),
              "    order " + _order_text(cells, len(measured_arms) * len(load.concurrency)), "", "arms:"]
    for arm in profile.arms:
        launch = server_command(profile, arm)
        lines.append(f"  {arm.id}  [{arm.kind}]")
        if launch.argv:
            lines.append(f"    {launch.shell()}")
        lines += [f"    note: {n}" for n in launch.notes]
    return "\n".join(lines)


def _order_text(cells: list[tuple[str, int, int]], first: int) -> str:
    shown = ", ".join(f"{a}:C{c}r{r}" for a, c, r in cells[:first])
    return shown + (f", ... ({len(cells) - first} more)" if len(cells) > first else "")


def check(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="ddbench check", description="Validate a profile and print its plan, then "
                                 "reproduce's preflight: what this host lacks is listed, what the profile gets wrong "
                                 "fails the check.")
    ap.add_argument("profile", help="a shipped profile's name (cpu-tiny) or a path to a YAML file")
    ap.add_argument("--no-probe", dest="probe", action="store_false",
                    help="do not ask each arm's url whether a server answers there (a profile for another host)")
    add_set_option(ap)
    args = ap.parse_args(argv)
    try:
        source = str(resolve_path(args.profile))
        profile = load_profile(args.profile, args.overrides)
        wrong = preflight.profile_problems(profile) + (preflight.unanswered(profile) if args.probe else [])
        if profile.backend.kind == "sglang":  # flags SGLang would reject, or read as an ambiguous prefix
            from containers.sglang_flags import check_profile

            wrong += check_profile(profile)
        if wrong:
            raise ProfileError("\n".join(f"{source}: {r}" for r in wrong))
    except ProfileError as e:
        print(f"ddbench check: {e}", file=sys.stderr)
        return EXIT_ERROR
    print(plan_text(profile, source, args.overrides))
    lacks = preflight.host_problems(profile)
    print("\n".join(["", "not ready on this host (reproduce would refuse to start):"] + [f"  - {p}" for p in lacks])
          if lacks else "\nready to run on this host")
    return 0


def init(argv: list[str]) -> int:
    """`ddbench init`: write a profile (ddbench/init.py), then check it exactly as `ddbench check` would."""
    try:
        path = init_profile.main(argv)
    except init_profile.InitError as e:
        print(f"ddbench init: {e}", file=sys.stderr)
        return EXIT_ERROR
    print(f"wrote {path}; `ddbench check {path}` says:\n")
    return check([str(path)])


USAGE = "usage: ddbench {check,init," + ",".join(STAGES) + "} ..."


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else EXIT_ERROR
    verb, rest = argv[0], argv[1:]
    if verb == "check":
        return check(rest)
    if verb == "init":
        return init(rest)
    if verb in STAGES:
        if verb in ("analyze", "report"):
            _cells_of_ui_session(rest)
        return run_stage(verb, rest)
    print(f"ddbench: unknown command '{verb}'\n{USAGE}", file=sys.stderr)
    return EXIT_ERROR
