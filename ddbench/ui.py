"""`just ui PROFILE [ARM]` (ddbench ui): Locust's web UI with ddbench's LLM view, serving the profile's arms.

    python -m ddbench.ui PROFILE [ARM] [--url URL] [--port 8089] [--processes N]

The Locust master brings ARM (default: the profile's first) up through the containers stage, as
`reproduce` does (ui_servers.py, handed to Locust beside the load generator's locustfile), and its
page /ddbench switches to any other arm of the profile in its place. The server goes down however
the UI ends. With --url the UI drives a server that is already running:
nothing is brought up and there is no switch. Records, server logs and the session's cells (one per
arm and user count) go to results/adhoc/<time>/, which `just analyze` reads as a run
(and `just report` renders).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddbench.core.profile import ProfileError, load_profile
from ddbench.core.prompts import PromptSetError
from loadtests.cell import LOCUSTFILE, CellError
from loadtests.sigterm import exit_on_sigterm
from loadtests.webui import UI_PORT, adhoc_dir, run_ui

SERVERS_LOCUSTFILE = Path(__file__).with_name("ui_servers.py")


def serve(profile_ref: str, arm: str | None = None, *, url: str | None = None, port: int = UI_PORT,
          processes: int | None = None, records_dir: Path | None = None) -> int:
    """The web UI until it ends."""
    profile = load_profile(profile_ref)
    arm = arm or profile.arms[0].id
    profile.arm(arm)   # an unknown arm is an error naming the profile's arms
    return run_ui(profile, profile_ref, arm, url=url, port=port, processes=processes,
                  records_dir=records_dir or adhoc_dir(), locustfiles=(LOCUSTFILE, SERVERS_LOCUSTFILE))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", help="shipped profile name or YAML path")
    ap.add_argument("arm", nargs="?", help="the arm to start with (default: the profile's first)")
    ap.add_argument("--url", help="a running server: bring nothing up")
    ap.add_argument("--port", type=int, default=UI_PORT)
    ap.add_argument("--processes", type=int, help="Locust processes (default: the profile's load.processes)")
    ap.add_argument("--records-dir", type=Path, help="where the session goes (default results/adhoc/<time>/)")
    a = ap.parse_args(argv)
    exit_on_sigterm()
    try:
        return serve(a.profile, a.arm, url=a.url, port=a.port, processes=a.processes, records_dir=a.records_dir)
    except (ProfileError, PromptSetError, CellError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
