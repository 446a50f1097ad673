"""Download an image's pinned wheels on the host, so the image build needs no network.

    python -m containers.wheelhouse [--variant cpu|cuda|sglang] [--dest DIR]
    python -m containers.wheelhouse --variant sglang --lock     # re-make the lock first

Each variant is one image's wheel set: `cpu` and `cuda` for the reference engine (CPython 3.11,
the Python of the Debian bookworm base), `sglang` for the SGLang+DDTree image (CPython 3.12:
SGLang 0.5.15 ships cp312 wheels only). A lock is the full dependency closure, one `name==version
--hash=sha256:...` a line; the image installs exactly it with `pip install --no-index
--require-hashes`. Wheels are fetched for the image's interpreter (manylinux x86_64, glibc 2.36),
not for the host's, so a host with another Python still makes a valid wheelhouse. The refengine's
top-level pins are `containers/refengine/requirements.<variant>.txt`; the sglang image's come
from the one pin, `containers/sglang/pin.toml` (the release and its compiled parts). torch's CPU
build is not on PyPI: pip finds it through its configured find-links or an extra index
(PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from ddbench.core.manifest import file_sha256
from ddbench.core.profile import REPO_ROOT

HERE = Path(__file__).resolve().parent
WHEELHOUSE = REPO_ROOT / "wheelhouse"
# pip runs from its own wheel inside the image, so a base without pip works
PIP = "pip==25.3"


@dataclass(frozen=True)
class Variant:
    name: str
    python: str      # the image's interpreter, major.minor
    lock: Path
    pins: Path       # where the top-level pins are written by hand (a requirements file or the pin)
    isolated: bool   # keep the host's find-links and extra indexes out (they may hold a +cpu torch)
    from_pin: bool = False  # the pins are the one SGLang pin's release and compiled parts, not a requirements file

    def requirements(self) -> list[str]:
        if self.from_pin:
            from containers.sglang_pin import pin

            p = pin()
            return [f"sglang=={p.sglang}", *(f"{k}=={v}" for k, v in p.wheels.items()), PIP]
        return [ln.strip() for ln in self.pins.read_text().splitlines() if ln.strip() and not ln.startswith("#")]

    def target(self) -> list[str]:
        # the images' glibc is 2.36 (bookworm); pip does not widen a given --platform, so list every older tag
        platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
            "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any"]
        abi = "cp" + self.python.replace(".", "")
        return ["--only-binary=:all:", "--python-version", self.python, "--implementation", "cp",
                "--abi", abi, "--abi", "abi3", "--abi", "none", *(a for p in platforms for a in ("--platform", p))]


VARIANTS = {
    "cpu": Variant("cpu", "3.11", HERE / "refengine" / "requirements.cpu.lock",
                   HERE / "refengine" / "requirements.cpu.txt", isolated=False),
    "cuda": Variant("cuda", "3.11", HERE / "refengine" / "requirements.cuda.lock",
                    HERE / "refengine" / "requirements.cuda.txt", isolated=True),
    "sglang": Variant("sglang", "3.12", HERE / "sglang" / "requirements.lock", HERE / "sglang" / "pin.toml",
                      isolated=True, from_pin=True),
}


def variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise SystemExit(f"wheelhouse: no variant '{name}'; variants: {', '.join(VARIANTS)}") from None


def pip(v: Variant, command: str, args: list[str]) -> None:
    argv = [sys.executable, "-m", "pip", *(["--isolated"] if v.isolated else []), command,
            "--disable-pip-version-check", *v.target(), *args]
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


def make_lock(v: Variant) -> Path:
    """Resolve the variant's pins (metadata only, no wheel downloaded) and write their closure."""
    with tempfile.TemporaryDirectory() as tmp:
        req, report = Path(tmp) / "requirements.txt", Path(tmp) / "report.json"
        req.write_text("\n".join(v.requirements()) + "\n")
        pip(v, "install", ["--dry-run", "--ignore-installed", "--no-cache-dir", "--target", str(Path(tmp) / "t"),
                           "--report", str(report), "-r", str(req)])
        items = json.loads(report.read_text())["install"]
    lines = sorted(lock_line(item) for item in items)
    v.lock.write_text(f"# made by: python -m containers.wheelhouse --variant {v.name} --lock\n"
                      f"# from {v.pins.relative_to(HERE).as_posix()}; CPython {v.python}, manylinux x86_64\n"
                      + "\n".join(lines) + "\n")
    return v.lock


def download(v: Variant, dest: Path) -> list[Path]:
    if not v.lock.is_file():
        raise SystemExit(f"wheelhouse: {v.lock} is missing; make it with --lock")
    dest.mkdir(parents=True, exist_ok=True)
    pip(v, "download", ["--no-deps", "--require-hashes", "--dest", str(dest), "-r", str(v.lock)])
    (dest / "requirements.lock").write_bytes(v.lock.read_bytes())
    return sorted(dest.glob("*.whl"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.wheelhouse", description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="cpu")
    ap.add_argument("--dest", type=Path, help="default: wheelhouse/<variant> at the repository root")
    ap.add_argument("--lock", action="store_true", help="re-resolve the variant's pins into the lock first")
    ap.add_argument("--lock-only", action="store_true", help="re-make the lock and download nothing")
    a = ap.parse_args(argv)
    v = variant(a.variant)
    if a.lock or a.lock_only:
        print(f"wrote {make_lock(v)}")
    if a.lock_only:
        return 0
    dest = a.dest or WHEELHOUSE / v.name
    wheels = download(v, dest)
    size = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels, {size / 2**20:.0f} MiB in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
