"""Download the image's pinned wheels on the host, so the image build needs no network.

    python -m containers.refengine.wheelhouse [--variant cpu|cuda] [--dest DIR]
    python -m containers.refengine.wheelhouse --variant cpu --lock    # re-make the lock

The lock (requirements.<variant>.lock) is the full dependency closure, one `name==version
--hash=sha256:...` a line; the image installs exactly it with `pip install --no-index
--require-hashes`. Wheels are fetched for the image's interpreter (CPython 3.11, manylinux
x86_64), not for the host's, so a host with another Python still makes a valid wheelhouse.
torch's CPU build is not on PyPI: pip finds it through its configured find-links or an
extra index (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from ddbench.manifest import file_sha256
from ddbench.profile import REPO_ROOT

HERE = Path(__file__).resolve().parent
WHEELHOUSE = REPO_ROOT / "wheelhouse"
# the image's glibc is 2.36 (bookworm); pip does not widen a given --platform, so list every older tag
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any"]
TARGET = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
          "--abi", "cp311", "--abi", "abi3", "--abi", "none", *(a for p in PLATFORMS for a in ("--platform", p))]


def requirements(variant: str) -> Path:
    return HERE / f"requirements.{variant}.txt"


def lockfile(variant: str) -> Path:
    return HERE / f"requirements.{variant}.lock"


def pip(variant: str, command: str, args: list[str]) -> None:
    # the CUDA build is plain `torch` on PyPI: --isolated keeps a host's find-links or extra index
    # (which may hold the +cpu build, also a match for ==2.13.0) out of its resolution
    isolated = ["--isolated"] if variant == "cuda" else []
    argv = [sys.executable, "-m", "pip", *isolated, command, "--disable-pip-version-check", *TARGET, *args]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"wheelhouse: pip {command} failed ({' '.join(argv)}):\n"
                         f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def lock_line(item: dict) -> str:
    """`name==version --hash=sha256:...` for one entry of pip's installation report."""
    meta, info = item["metadata"], item["download_info"]
    digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
    if digest is None:  # a wheel from a find-links directory: the index gave no hash, the file does
        url = urlparse(info["url"])
        if url.scheme != "file":
            raise SystemExit(f"wheelhouse: no sha256 for {meta['name']} from {info['url']}")
        digest = file_sha256(Path(unquote(url.path)))
    return f"{meta['name'].lower().replace('_', '-')}=={meta['version']} --hash=sha256:{digest}"


def make_lock(variant: str) -> Path:
    """Resolve requirements.<variant>.txt (metadata only, no wheel downloaded) and write its closure."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip(variant, "install", ["--dry-run", "--ignore-installed", "--no-cache-dir", "--target", str(Path(tmp) / "t"),
                                 "--report", str(report), "-r", str(requirements(variant))])
        items = json.loads(report.read_text())["install"]
    lines = sorted(lock_line(item) for item in items)
    out = lockfile(variant)
    out.write_text(f"# made by: python -m containers.refengine.wheelhouse --variant {variant} --lock\n"
                   f"# from {requirements(variant).name}; CPython 3.11, manylinux x86_64\n" + "\n".join(lines) + "\n")
    return out


def download(variant: str, dest: Path) -> list[Path]:
    lock = lockfile(variant)
    if not lock.is_file():
        raise SystemExit(f"wheelhouse: {lock} is missing; make it with --lock")
    dest.mkdir(parents=True, exist_ok=True)
    pip(variant, "download", ["--no-deps", "--require-hashes", "--dest", str(dest), "-r", str(lock)])
    (dest / "requirements.lock").write_bytes(lock.read_bytes())
    return sorted(dest.glob("*.whl"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.refengine.wheelhouse", description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dest", type=Path, help="default: wheelhouse/<variant> at the repository root")
    ap.add_argument("--lock", action="store_true", help="re-resolve requirements.<variant>.txt into the lock first")
    ap.add_argument("--lock-only", action="store_true", help="re-make the lock and download nothing")
    a = ap.parse_args(argv)
    if a.lock or a.lock_only:
        print(f"wrote {make_lock(a.variant)}")
    if a.lock_only:
        return 0
    dest = a.dest or WHEELHOUSE / a.variant
    wheels = download(a.variant, dest)
    size = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels, {size / 2**20:.0f} MiB in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
