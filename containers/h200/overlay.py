"""The DDTree overlay for the H200: SGLang PR #29907's Python sources, laid over the sglang layer for the run.

    python -m containers.h200.overlay fetch [--commit SHA] [--repo URL]   # needs GitHub: git, depth 1
    python -m containers.h200.overlay build [--src DIR] [--commit SHA]    # -> .h200/ddtree/ + ddtree.manifest.json

The PR's code is not ours: it is only ever placed under the ignored .h200/ (the checkout in
.h200/ddtree-src/<commit>/, the archive and its parts in .h200/ddtree/); the committed manifest
records the repo, the commit and counts, not the code. As containers/sglang/overlay.sh does for
the Docker images, the commit's python/sglang tree replaces the wheel's files and files only the
wheel has stay; only the files that differ from the pinned sglang wheel travel. The repo and
commit default to the Dockerfiles' DDTREE_REPO and DDTREE_COMMIT, so one pin serves both.
On the device: `setup.sh harness sglang ddtree` unpacks sglang, then lays this over it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from containers.h200 import archive, lock
from containers.h200.bundle import BUNDLE_ROOT
from containers.h200.layers import HERE, SGLANG
from ddbench.manifest import file_sha256

DOCKERFILE = HERE.parent / "sglang" / "Dockerfile.hopper"
NAME = "ddtree"
PART_SIZE = 17_500_000
# start-up of the PR's worker, imported on the device right after the overlay is laid
SMOKE = ("sglang.srt.speculative.ddtree_worker",)


def pinned() -> tuple[str, str]:
    """(repo, commit) from the Hopper Dockerfile's ARG lines."""
    text = DOCKERFILE.read_text()
    got = dict(re.findall(r"^ARG (DDTREE_REPO|DDTREE_COMMIT)=(\S+)$", text, re.M))
    if set(got) != {"DDTREE_REPO", "DDTREE_COMMIT"}:
        raise SystemExit(f"h200 overlay: {DOCKERFILE} has no ARG DDTREE_REPO=... and ARG DDTREE_COMMIT=...")
    return got["DDTREE_REPO"], got["DDTREE_COMMIT"]


def check_commit(commit: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise SystemExit(f"h200 overlay: a commit must be 40 hex digits, got {commit!r}")
    return commit


def fetch(repo: str, commit: str, dest: Path) -> Path:
    """A depth-1 checkout of one commit (GitHub serves a PR head by its SHA, without a branch name)."""
    if (dest / "python" / "sglang").is_dir():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    for argv in (["git", "init", "-q", str(dest)],
                 ["git", "-C", str(dest), "fetch", "-q", "--depth", "1", repo, commit],
                 ["git", "-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"]):
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"h200 overlay: {' '.join(argv)} failed (this needs GitHub):\n{proc.stderr[-2000:]}")
    return dest


def source_commit(src: Path) -> str | None:
    """The checkout's HEAD, when src is a git checkout of its own (not a tree inside another repo)."""
    proc = subprocess.run(["git", "-C", str(src), "rev-parse", "--show-toplevel", "HEAD"],
                          capture_output=True, text=True)
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != src.resolve():
        return None
    return lines[1]


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist() if i.filename.startswith("sglang/") and not i.is_dir()}


def overlay_entries(src: Path, base: dict[str, bytes]) -> tuple[list[archive.Entry], dict[str, int]]:
    """The commit's python/sglang files that differ from the wheel's, after the sglang layer's trims."""
    root = src / "python" / "sglang"
    if not root.is_dir():
        raise SystemExit(f"h200 overlay: {src} holds no python/sglang")
    trims = SGLANG.trims_for("sglang")
    entries, counts = [], {"replaced": 0, "added": 0, "unchanged": 0, "trimmed": 0}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = "sglang/" + path.relative_to(root).as_posix()
        if any(t.removes(rel) for t in trims):
            counts["trimmed"] += 1
            continue
        data = path.read_bytes()
        if base.get(rel) == data:
            counts["unchanged"] += 1
            continue
        counts["replaced" if rel in base else "added"] += 1
        entries.append(archive.Entry(rel, NAME, len(data), False, lambda d=data: d))
    return entries, counts


def build(src: Path, repo: str, commit: str, root: Path = BUNDLE_ROOT, manifest: Path | None = None) -> dict:
    got = source_commit(src)
    if got is not None and got != commit:
        raise SystemExit(f"h200 overlay: {src} is at {got}, not the pinned {commit}")
    [sglang_pin] = [p for p in lock.read(SGLANG.lockfile) if p.key == "sglang"]
    wheel = lock.download([sglang_pin], root / "wheels")["sglang"]
    entries, counts = overlay_entries(src, wheel_files(wheel))
    if not entries:
        raise SystemExit(f"h200 overlay: {src} changes nothing in sglang {sglang_pin.version}")
    out = root / "build" / f"{NAME}.tar.xz"
    stats = archive.write_tar_xz(entries, out)
    parts = archive.split(out, PART_SIZE, root / NAME)
    doc = {
        "layer": NAME,
        "overlay_onto": "sglang",
        "below": ["harness", "sglang"],
        "source": {"repo": repo, "commit": commit, "verified_by_git": got is not None,
                   "onto": f"sglang=={sglang_pin.version} ({sglang_pin.sha256})", "files": counts},
        "wheels": [],
        "lock": {"file": None, "sha256": None},
        "archive": {"name": out.name, "sha256": file_sha256(out), "size": out.stat().st_size,
                    "xz_preset": archive.XZ_PRESET, **stats},
        "part_size": PART_SIZE,
        "parts_dir": f".h200/{NAME}",
        "parts": parts,
        "smoke": list(SMOKE),
    }
    path = manifest or HERE / f"{NAME}.manifest.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return doc


def main(argv: list[str] | None = None) -> int:
    repo, commit = pinned()
    ap = argparse.ArgumentParser(prog="python -m containers.h200.overlay", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    f = sub.add_parser("fetch", help="check the commit out into .h200/ddtree-src/COMMIT (needs GitHub)")
    b = sub.add_parser("build", help="pack the commit's changes over the sglang wheel into .h200/ddtree/")
    for p in (f, b):
        p.add_argument("--repo", default=repo)
        p.add_argument("--commit", default=commit)
    b.add_argument("--src", type=Path, help="a checkout of the commit (default: .h200/ddtree-src/COMMIT)")
    a = ap.parse_args(argv)
    sha = check_commit(a.commit)
    src = BUNDLE_ROOT / "ddtree-src" / sha
    if a.verb == "fetch":
        print(f"checked out {a.repo}@{sha} in {fetch(a.repo, sha, src)}")
        return 0
    doc = build(a.src or src, a.repo, sha)
    c, ar = doc["source"]["files"], doc["archive"]
    print(f"{NAME}: {a.repo}@{sha} over {doc['source']['onto']}: {c['replaced']} files replaced, {c['added']} "
          f"added ({c['unchanged']} unchanged, {c['trimmed']} trimmed) -> {ar['name']} {ar['size'] / 1e6:.2f} MB, "
          f"sha256 {ar['sha256']}")
    print("\n".join(f"  part {p['name']}: {p['size'] / 1e6:.2f} MB" for p in doc["parts"]))
    print(f"  carry {doc['parts_dir']}; on the device: setup.sh harness sglang {NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
