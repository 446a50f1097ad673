"""`just ui PROFILE ARM` (ddbench ui): bring the arm up, Locust's web UI against it, the arm down on exit.

    python -m loadtests.ui PROFILE ARM [--url URL] [--port 8089] [--processes N]

With --url the UI drives a server that is already running and nothing is brought up.
Otherwise the arm comes up through the containers stage (its server.log and status.json go
beside the records, in results/adhoc/<time>/<arm>/), and goes down however the UI ends.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddbench.profile import Profile, ProfileError, load_profile
from ddbench.prompts import PromptSetError
from loadtests.cell import CellError
from loadtests.webui import UI_PORT, adhoc_dir, run_ui


def serve(profile: Profile, arm: str, *, url: str | None = None, port: int = UI_PORT, processes: int | None = None,
          records_dir: Path | None = None, command: list[str] | None = None) -> int:
    """The web UI until it ends; `command` replaces the arm's server command (a stand-in server)."""
    profile.arm(arm)
    records_dir = records_dir or adhoc_dir()
    if url:
        return run_ui(profile, arm, url=url, port=port, processes=processes, records_dir=records_dir)
    from containers import bringup  # the containers stage's public entry; only needed to bring up

    server = bringup.up(profile, arm, records_dir, command=command)
    try:
        return run_ui(profile, arm, url=server.url, port=port, processes=processes, records_dir=records_dir)
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", help="shipped profile name or YAML path")
    ap.add_argument("arm")
    ap.add_argument("--url", help="a running server: bring nothing up")
    ap.add_argument("--port", type=int, default=UI_PORT)
    ap.add_argument("--processes", type=int, help="Locust processes (default: the profile's load.processes)")
    a = ap.parse_args(argv)
    from loadtests.__main__ import exit_on_sigterm

    exit_on_sigterm()
    try:
        return serve(load_profile(a.profile), a.arm, url=a.url, port=a.port, processes=a.processes)
    except (ProfileError, PromptSetError, CellError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
