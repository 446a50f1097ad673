"""python -m report RUN_DIR: analyse the run and build RUN_DIR/report.pdf."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.analyze import BOOTSTRAP, analyze, set_aside_stale, write_tables
from analysis.read.ingest import IngestError
from analysis.read.manifest import ManifestError
from report.build import BuildError, build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--out", type=Path, help="PDF path (default RUN_DIR/report.pdf)")
    ap.add_argument("--keep-build", type=Path, help="keep the .tex, figures and LaTeX logs in this directory")
    ap.add_argument("--bootstrap", type=int, default=BOOTSTRAP)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare-with", metavar="OTHER",
                    help="add the cross-check against this run (overrides the profile's compare_with)")
    ap.add_argument("--no-tables", action="store_true",
                    help="leave RUN_DIR/tables as they are (re-render a committed PDF, tables untouched)")
    a = ap.parse_args(argv)
    try:
        res = analyze(a.run_dir, a.bootstrap, a.seed, compare_with=a.compare_with)
    except (IngestError, ManifestError, ValueError, FileNotFoundError) as e:
        print(f"report: {e}", file=sys.stderr)
        if stale := set_aside_stale(a.run_dir):
            print(f"report: {stale}", file=sys.stderr)
        return 2
    try:
        if not a.no_tables:
            write_tables(res)
        pdf, seconds = build(res, a.out, a.keep_build)
    except (ValueError, BuildError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(f"{pdf} (analysis {res.seconds:.1f} s, PDF build {seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
