"""python -m loadtests run|ui ...: one headless cell, or Locust's web UI, for an arm of a profile served at a URL
(`ddbench ui PROFILE` brings the arm up itself)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from ddbench.core.profile import Load, ProfileError, load_profile
from ddbench.core.prompts import PromptSetError
from ddbench.core.results import RESULTS_ROOT, cell_name
from loadtests.cell import CellError, run_cell
from loadtests.random_prompts import profile_tokenizer
from loadtests.sigterm import exit_on_sigterm
from loadtests.webui import UI_PORT, adhoc_dir, run_ui


def overridden(load: Load, a: argparse.Namespace) -> Load:
    """The profile's load plan with the command line's overrides (checked like the profile)."""
    data = load.model_dump()
    if a.requests_per_user is not None:
        data.update(requests_per_user=a.requests_per_user, duration_s=None)
    if a.duration_s is not None:
        data.update(duration_s=a.duration_s, requests_per_user=None)
    if a.warmup_requests is not None:
        data["warmup_requests"] = a.warmup_requests
    return Load.model_validate(data)


def cmd_run(a: argparse.Namespace) -> int:
    profile = load_profile(a.profile)
    profile.arm(a.arm)
    load = overridden(profile.load_for(a.arm), a)
    workload = profile.workload
    if a.max_tokens is not None:
        workload = workload.model_validate({**workload.model_dump(), "max_tokens": a.max_tokens})
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    cell_dir = Path(a.cell_dir) if a.cell_dir else (
        RESULTS_ROOT / "adhoc" / stamp / a.arm / cell_name(a.concurrency, a.repetition))
    status = run_cell(workload, load, url=a.url, cell_dir=cell_dir, arm=a.arm, concurrency=a.concurrency,
                      repetition=a.repetition, processes=a.processes, timeout_s=a.timeout_s,
                      tokenizer=profile_tokenizer(profile))
    cpu = "n/a" if status.client_cpu_max is None else f"{status.client_cpu_max:.0f}%"
    print(f"{cell_dir}: {status.status}, {status.requests} measured requests, {status.errors} errors, "
          f"peak client CPU {cpu}" + (f" - {status.reason}" if status.reason else ""))
    return 0 if status.status == "ok" else 1


def cmd_ui(a: argparse.Namespace) -> int:
    profile = load_profile(a.profile)
    return run_ui(profile, a.profile, a.arm or profile.arms[0].id, url=a.url, port=a.port, processes=a.processes,
                  records_dir=a.records_dir or adhoc_dir())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtests")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "ui"):
        p = sub.add_parser(name, help={"run": "one headless cell", "ui": "Locust's web UI on 127.0.0.1"}[name])
        p.add_argument("--profile", required=True, help="shipped profile name or YAML path")
        p.add_argument("--arm", required=name == "run", help="ui: the arm to start with (default: the first)")
        p.add_argument("--url", required=True,
                       help="where the arm serves, e.g. http://127.0.0.1:30000 (to bring it up: ddbench ui PROFILE)")
        p.add_argument("--processes", type=int, help="Locust processes (default: the profile's load.processes)")
    run = sub.choices["run"]
    run.add_argument("--concurrency", type=int, required=True)
    run.add_argument("--repetition", type=int, default=1)
    run.add_argument("--cell-dir", help="default: results/adhoc/<time>/<arm>/c<C>-r<R>")
    run.add_argument("--requests-per-user", type=int, help="override the profile's load.requests_per_user")
    run.add_argument("--duration-s", type=float, help="override with a measured duration per user")
    run.add_argument("--warmup-requests", type=int, help="override the profile's load.warmup_requests")
    run.add_argument("--max-tokens", type=int, help="override the profile's workload.max_tokens")
    run.add_argument("--timeout-s", type=float, default=3600.0, help="stop the cell after this long")
    sub.choices["ui"].add_argument("--port", type=int, default=UI_PORT)
    sub.choices["ui"].add_argument("--records-dir", type=Path, help="default: results/adhoc/<time>/")
    a = ap.parse_args(argv)
    exit_on_sigterm()
    try:
        return {"run": cmd_run, "ui": cmd_ui}[a.cmd](a)
    except (ProfileError, PromptSetError, CellError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
