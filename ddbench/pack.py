"""`ddbench pack RUN_DIR`: gzip a finished run's records, scrapes, logs and telemetry before committing it."""

from __future__ import annotations

import argparse
import sys

from ddbench.core.results import RunDir, pack


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench pack", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    a = ap.parse_args(argv)
    try:
        run = RunDir.open(a.run_dir)
    except FileNotFoundError as e:
        print(f"ddbench pack: {e}", file=sys.stderr)
        return 1
    before, after = pack(run)
    print(f"{run.path}: run files {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
