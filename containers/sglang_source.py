"""The DDTree source of the one pin, exported from a local checkout: what every SGLang image overlays.

    python -m containers.sglang_source export GIT_DIR DEST      # DEST/sglang/... + DEST/source.json

GIT_DIR is a clone (bare is fine) of the pin's fork holding its commit and the cherry-picks'
(`fetch github:Rancy-Wang/sglang`, or `git clone https://github.com/Rancy-Wang/sglang`). The
export checks the commit out in a throw-away clone, cherry-picks the pinned upstream fixes
and applies ddbench's patches (containers/offline/fork.py: fixed committer, so the result's SHA is the
same everywhere), and
writes that commit's `python/sglang` through `git archive`: only tracked files, nothing from
the network, never into ddbench's tree. Whole, untrimmed: only the offline bundle trims.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path

from containers.offline import archive
from containers.offline.fork import PACKAGE, _git, _text, checkout
from containers.sglang_pin import Pin, pin


def export(git_dir: Path, dest: Path, p: Pin | None = None) -> dict:
    """Write the pin's python/sglang as DEST/sglang and return what was exported (also DEST/source.json)."""
    p = p or pin()
    with tempfile.TemporaryDirectory(prefix="ddbench-ddtree-") as tmp:
        work = Path(tmp) / "fork"
        picks, patches = checkout(git_dir, p, work)
        head = _text("rev-parse", "HEAD", cwd=work)
        tree = _text("rev-parse", f"HEAD:{PACKAGE}", cwd=work)
        data = _git("archive", "--format=tar", "HEAD", PACKAGE, cwd=work)
    dest.mkdir(parents=True, exist_ok=True)
    files = 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            if not m.name.startswith(PACKAGE + "/") or not (m.isfile() or m.isdir()):
                continue  # symlinks: a wheel would not carry them either
            m.name = "sglang/" + m.name.removeprefix(PACKAGE + "/")
            tar.extract(m, dest, filter="data")
            files += m.isfile()
    record = {"repo": p.repo, "commit": p.commit, "cherry_picks": picks, "patches": patches, "head": head, "tree": tree,
              "package": PACKAGE, "files": files}
    (dest / "source.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.sglang_source", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write the pin's python/sglang under DEST")
    e.add_argument("git_dir", type=Path)
    e.add_argument("dest", type=Path)
    a = ap.parse_args(argv)
    try:
        rec = export(a.git_dir, a.dest)
    except archive.BundleError as err:
        print(f"sglang source: {err}", file=sys.stderr)
        return 1
    print(f"{a.dest}/sglang: {rec['files']} files of {rec['repo']}@{rec['commit'][:8]} -> {rec['head'][:8]} "
          f"(tree {rec['tree'][:8]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
