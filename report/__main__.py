"""python -m report RUN_DIR: build RUN_DIR/report.pdf from the run's saved analysis (python -m analysis RUN_DIR)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis import saved
from ddbench.core.results import TABLES
from report.build import BuildError, build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--out", type=Path, help="PDF path (default RUN_DIR/report.pdf)")
    ap.add_argument("--keep-build", type=Path, help="keep the .tex, figures and LaTeX logs in this directory")
    a = ap.parse_args(argv)
    try:
        res = saved.read(a.run_dir)
        pdf, seconds = build(res, a.out, a.keep_build)
    except (FileNotFoundError, ValueError, KeyError, BuildError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(f"{pdf} (PDF build {seconds:.1f} s, from the analysis saved in {res.run.path / TABLES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
