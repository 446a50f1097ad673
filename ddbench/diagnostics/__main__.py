"""python -m ddbench.diagnostics overlay-check | stage-cost | steps RUN_DIR ... (the package's docstring says what
each one does)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddbench import diagnostics
from ddbench.core.profile import ProfileError
from ddbench.diagnostics.overlay_check import overlay_check
from ddbench.diagnostics.serving import DiagnosticError, run_profile
from ddbench.diagnostics.stage_cost import stage_cost
from ddbench.diagnostics.steps import steps_check


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddbench.diagnostics",
                                 description=(diagnostics.__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    o = sub.add_parser("overlay-check", help="the build's DFLASH vs stock's: verify steps on the run's prompts")
    s = sub.add_parser("stage-cost", help="per tree arm, one labelled cell with the fork's stage profiler")
    t = sub.add_parser("steps", help="per chain/tree arm, one labelled cell with per-step statistics")
    for p in (o, s, t):
        p.add_argument("run_dir", type=Path)
        p.add_argument("--profile", help="default: RUN_DIR/manifest.json's")
        p.add_argument("--timeout", type=float, help="bring-up timeout in s (default bringup's)")
    o.add_argument("--arm", help="a linear arm (default: the first with CUDA graphs on)")
    o.add_argument("--prompts", type=int, default=3, help="the first N prompts of the set (default 3, as the trial)")
    s.add_argument("--arm", action="append", default=[], help="repeatable (default: every tree arm)")
    s.add_argument("--prompts", type=int, default=8)
    s.add_argument("--interval", type=int, default=10, help="verify rounds per profiler record")
    s.add_argument("--warmup", type=int, default=0, help="verify rounds skipped before profiling")
    t.add_argument("--arm", action="append", default=[], required=True, help="a chain or tree arm (repeatable)")
    t.add_argument("--prompts", type=int, default=16)
    t.add_argument("--concurrency", type=int, default=1)
    t.add_argument("--prune", action="store_true", help="also --is-ddtree-prune")
    t.add_argument("--label", help="the summary is diagnostics/steps-LABEL.json")
    a = ap.parse_args(argv)
    run_dir = a.run_dir.resolve()
    try:
        profile, source = run_profile(run_dir, a.profile)
        if a.verb == "overlay-check":
            doc = overlay_check(run_dir, profile, source, a.arm, a.prompts, a.timeout)
            print(f"overlay check {'passed' if doc['passed'] else 'FAILED'}: verify steps stock "
                  f"{doc['sides']['stock'].get('verify_steps')}, fork {doc['sides']['fork'].get('verify_steps')}; "
                  f"outputs {'identical' if doc['same_outputs'] else 'differ'} "
                  f"-> {run_dir}/diagnostics/overlay-check.json")
            return 0 if doc["passed"] else 3
        if a.verb == "steps":
            doc = steps_check(run_dir, profile, source, a.arm, a.prompts, a.concurrency, a.prune, a.label,
                              a.timeout)
            print(f"steps {'passed' if doc['passed'] else 'FAILED'} -> {run_dir}/diagnostics/"
                  f"steps{'-' + a.label if a.label else ''}.json")
            return 0 if doc["passed"] else 3
        doc = stage_cost(run_dir, profile, source, a.arm, a.prompts, a.interval, a.warmup, a.timeout)
        states = ", ".join(f"{k} {v['status']}" for k, v in doc["arms"].items())
        print(f"stage cost: {states} -> {run_dir}/diagnostics/stage-cost.json")
        return 0 if all(v["status"] == "ok" for v in doc["arms"].values()) else 3
    except (DiagnosticError, ProfileError) as e:
        print(f"diagnostics: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
