"""`ddbench down`: stop every ddbench server, and nothing else.

    python -m containers.down [--run RUN_ID] [--arm ARM]

Removes containers labelled ddbench=1 (keeping each one's log in its server.log first) and
stops the local server processes ddbench started; --run and --arm narrow that down.
"""

from __future__ import annotations

import argparse
import sys

from containers.bringup import down


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench down", description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", help="only this run id's servers")
    ap.add_argument("--arm", help="only this arm's servers")
    a = ap.parse_args(argv)
    stopped = down(a.run, a.arm)
    for s in stopped:
        print(f"stopped {s}")
    if not stopped:
        print("no ddbench server was running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
