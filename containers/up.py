"""`ddbench up PROFILE ARM`: bring one arm's server up and leave it running.

    python -m containers.up PROFILE ARM [--run-dir DIR] [--port N] [--timeout S]

Without --run-dir the arm's server.log and status.json go to a new ad-hoc run directory
(results/adhoc/<profile>/<run-id>/). Exit 0 once the server is ready; 1 with the reason
(summary line, traceback, last 50 log lines) when it is not. `ddbench down` stops it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from containers.bringup import up
from containers.ready import BringUpError
from ddbench.core.profile import ProfileError, load_profile
from ddbench.core.results import RESULTS_ROOT, RunDir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench up", description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", help="a shipped profile's name (cpu-tiny) or a path to a YAML file")
    ap.add_argument("arm", help="the arm's id, e.g. tree-b15-k8")
    ap.add_argument("--run-dir", type=Path, help="the run directory the arm's files go to")
    ap.add_argument("--port", type=int, help="host port (default: a free one)")
    ap.add_argument("--timeout", type=float, help="seconds to wait for readiness (sglang 1800, refengine 600)")
    a = ap.parse_args(argv)
    try:
        profile = load_profile(a.profile)
        profile.arm(a.arm)
    except ProfileError as e:
        print(f"ddbench up: {e}", file=sys.stderr)
        return 1
    run_dir = a.run_dir or RunDir.create(profile.name, root=RESULTS_ROOT / "adhoc").path
    try:
        server = up(profile, a.arm, run_dir, port=a.port, timeout_s=a.timeout, detach=True)
    except BringUpError as e:
        print(f"ddbench up: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        print(f"ddbench up: {e}", file=sys.stderr)
        return 1
    print(f"{a.arm} is up at {server.url} ({server.ident}); log: {Path(run_dir) / a.arm / 'server.log'}")
    print("stop it with: ddbench down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
