"""`ddbench load PROFILE ARM CONCURRENCY`: one headless cell, by the same path as `reproduce`.

The profile is narrowed to that arm, that concurrency and one repetition, and swept as
reproduce sweeps it: the arm comes up, the cell runs (flush, scrape, load, scrape), the arm
goes down. The run directory is a normal one, so `just analyze` reads it and `just report` renders it.
"""

from __future__ import annotations

import argparse
import sys

from ddbench.core.manifest import finish_run, start_run
from ddbench.core.profile import ProfileError, load_profile, resolve_path
from ddbench.core.results import RESULTS_ROOT, RunDir
from ddbench.preflight import problems
from ddbench.reproduce import EXIT_INTERRUPTED, console, sweep


def narrow(profile, arm_id: str, concurrency: int):
    arm = profile.arm(arm_id)
    load = profile.load.model_copy(update={"concurrency": [concurrency], "repetitions": 1})
    return profile.model_copy(update={"arms": [arm], "load": load})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench load", description=__doc__.split("\n")[0])
    ap.add_argument("profile")
    ap.add_argument("arm")
    ap.add_argument("concurrency", type=int)
    a = ap.parse_args(argv)
    if a.concurrency < 1:
        ap.error("CONCURRENCY must be >= 1")
    try:
        source = str(resolve_path(a.profile))
        profile = narrow(load_profile(a.profile), a.arm, a.concurrency)
    except ProfileError as e:
        console.print(f"load: {e}", highlight=False)
        return 1
    issues = problems(profile, report=False)
    if issues:
        console.print("load: cannot start:\n" + "\n".join(f"  - {p}" for p in issues), highlight=False)
        return 1
    run = RunDir.create(profile.name, root=RESULTS_ROOT)
    start_run(profile, source, run)
    try:
        sweep(profile, run)
    except KeyboardInterrupt:
        finish_run(run, interrupted=True)
        return EXIT_INTERRUPTED
    finish_run(run, interrupted=False)
    status = run.cell_dir(a.arm, a.concurrency, 1) / "status.json"
    print(status.read_text() if status.is_file() else f"no status.json in {status.parent}")
    print(f"cell: {status.parent}\nanalyze it with: just analyze {run.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
