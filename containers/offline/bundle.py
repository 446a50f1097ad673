"""Build the offline GPU bundles: pinned PyPI wheels -> trimmed site tree -> deterministic tar.xz parts.

    python -m containers.offline.bundle lock LAYER     # re-resolve LAYER.in into LAYER.lock
    python -m containers.offline.bundle build LAYER    # wheels (cached) -> .offline/LAYER/ + LAYER.manifest.json
    just offline-bundle LAYER                          # the same build
    python -m containers.offline.bundle build sglang-ddtree --fork-git DIR   # the pinned DDTree fork (fork.py)
    DDTREE_FORK_GIT=DIR just offline-bundle sglang-ddtree                     # the same

The archive goes to .offline/build/LAYER.tar.xz and its parts (each at most the layer's part size,
so that one `run` call can carry one) to .offline/LAYER/; carry that folder. The manifest
(containers/offline/LAYER.manifest.json) lists each wheel (version, sha256, size, what a trim
dropped), the archive's sha256 and size, and each part's: containers/offline/setup.sh checks them
on the device.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from containers.offline import archive, fork, lock
from containers.offline.layers import LAYERS, PYTHON_VERSION, SGLANG, Layer, canonical, layer
from ddbench.core.manifest import file_sha256
from ddbench.core.profile import REPO_ROOT

BUNDLE_ROOT = REPO_ROOT / ".offline"
CALL_LIMIT = 64 * 2**20  # what one `run` call copies to the device, carried paths included


def below_pins(lay: Layer) -> list[lock.Pin]:
    out = []
    for name in lay.below:
        out += lock.read(layer(name).lockfile)
    return out


def make_lock(lay: Layer) -> Path:
    pins, left_out = lock.resolve(lay, below_pins(lay))
    text = lock.format_lock(lay, pins, left_out)
    tmp = lay.lockfile.with_name(f".{lay.lockfile.name}.tmp")
    tmp.write_text(text)
    tmp.replace(lay.lockfile)
    return lay.lockfile


def trimmed(lay: Layer, pin: lock.Pin, wheel: Path) -> tuple[list[archive.Entry], dict]:
    """A wheel's installed files after the layer's trims, and its manifest record."""
    entries, elsewhere = archive.wheel_entries(wheel, pin.key)
    rules = lay.trims_for(pin.name)
    kept = [e for e in entries if not any(r.removes(e.path) for r in rules)]
    removed = [e for e in entries if any(r.removes(e.path) for r in rules)]
    record = {
        "name": pin.name, "version": pin.version, "filename": pin.filename, "sha256": pin.sha256,
        "size": wheel.stat().st_size, "files": len(kept), "unpacked_bytes": sum(e.size for e in kept),
    }
    if canonical(pin.name) in {canonical(n) for n in lay.alone}:
        record["requires_checked"] = False  # taken alone on purpose: most of its Requires-Dist is never imported
    if elsewhere:
        record["not_installed"] = archive.collapse(elsewhere, [])
    if rules:
        record["trim"] = [r.why for r in rules]
        record["dropped"] = archive.collapse([e.path for e in removed], [e.path for e in kept])
        record["dropped_bytes"] = sum(e.size for e in removed)
    return kept, record


def build(lay: Layer, root: Path = BUNDLE_ROOT, manifest: Path | None = None,
          extra: dict[str, bytes] | None = None, overlay: dict | None = None,
          part_size: int | tuple[int, ...] | None = None) -> dict:
    pins = lock.read(lay.lockfile)
    wheels = lock.download(pins, root / "wheels")
    entries, records = [], []
    for pin in sorted(pins, key=lambda p: p.key):
        kept, record = trimmed(lay, pin, wheels[pin.key])
        entries += kept
        records.append(record)
    merged = archive.merge(entries)
    out = root / "build" / f"{lay.name}.tar.xz"
    stats = archive.write_tar_xz(merged, out, extra)
    part_size = part_size or lay.part_size
    parts = archive.split(out, part_size, root / lay.name)
    doc = {
        "layer": lay.name,
        "python": f"cp{PYTHON_VERSION.replace('.', '')}",
        "below": list(lay.below),
        "lock": {"file": lay.lockfile.name, "sha256": file_sha256(lay.lockfile)},
        "wheels": records,
        "archive": {"name": out.name, "sha256": file_sha256(out), "size": out.stat().st_size,
                    "xz_preset": archive.XZ_PRESET, **stats},
        "part_size": part_size,
        "parts_dir": f".offline/{lay.name}",
        "parts": parts,
        "overlay": overlay,
        "smoke": list(lay.smoke),
    }
    path = manifest or lay.manifest
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return doc


def resplit(name: str, manifest: Path, part_size: int | tuple[int, ...], root: Path = BUNDLE_ROOT) -> dict:
    """Cut the built archive again (other part sizes) and update the manifest, without rebuilding."""
    doc = json.loads(manifest.read_text())
    out = root / "build" / doc["archive"]["name"]
    if not out.is_file() or file_sha256(out) != doc["archive"]["sha256"]:
        raise archive.BundleError(f"{out} is missing or is not the manifest's archive: build {name} first")
    doc["parts"] = archive.split(out, part_size, root / name)
    doc["part_size"] = part_size
    tmp = manifest.with_name(f".{manifest.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(manifest)
    return doc


def travelling_bytes(repo: Path = REPO_ROOT) -> int | None:
    """What a `run` call copies before any carried path: tracked and untracked, not ignored, files."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    total = 0
    for name in set(out.decode(errors="replace").split("\0")) - {""}:
        try:
            # counted in whole 4 KiB blocks, as `run` counts them: it refused a call whose
            # byte sizes summed to 66.7 MB (< 64 MiB) but whose blocks did not fit
            total += -(-(repo / name).stat().st_size // 4096) * 4096
        except OSError:
            pass  # deleted in the work tree
    return total


def summary(doc: dict) -> str:
    a = doc["archive"]
    if doc.get("shadows"):
        lines = [fork.summary(doc)]
    else:
        wheels = sum(w["size"] for w in doc["wheels"])
        lines = [f"{doc['layer']}: {len(doc['wheels'])} wheels ({wheels / 1e6:.1f} MB) -> {a['files']} files "
                 f"({a['unpacked_bytes'] / 1e6:.1f} MB unpacked) -> {a['name']} {a['size'] / 1e6:.2f} MB, "
                 f"sha256 {a['sha256']}"]
        lines += [f"  part {p['name']}: {p['size'] / 1e6:.2f} MB" for p in doc["parts"]]
        lines.append(f"  carry {doc['parts_dir']} (or one part a call); "
                     f"manifest containers/offline/{doc['layer']}.manifest.json")
    tree = travelling_bytes()
    if tree is not None:
        lines.append(f"  the working tree that travels with every call is {tree / 1e6:.1f} MB now: "
                     f"{(CALL_LIMIT - tree) / 1e6:.1f} MB of one call's 64 MiB are left for carried parts")
    return "\n".join(lines)


def build_fork(fork_git: Path | None, part_size: int | tuple[int, ...] | None, root: Path = BUNDLE_ROOT) -> dict:
    """The sglang-ddtree layer (fork.py) from a local clone of the pinned fork."""
    fork_git = fork_git or (Path(os.environ[fork.ENV_GIT]) if os.environ.get(fork.ENV_GIT) else None)
    if fork_git is None:
        raise archive.BundleError(f"{fork.NAME} is built from a local git checkout or bare clone of the pinned fork: "
                                  f"give --fork-git DIR or set {fork.ENV_GIT}=DIR")
    [stock] = [p for p in lock.read(SGLANG.lockfile) if p.key == "sglang"]
    wheel = lock.download([stock], root / "wheels")["sglang"]
    return fork.build(fork_git, root, stock_wheel=wheel, part_size=part_size or fork.PART_SIZE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.offline.bundle", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    for verb, text in (("lock", "re-resolve LAYER.in into LAYER.lock"), ("build", "build LAYER's archive"),
                       ("split", "cut the built archive into other parts (no rebuild)")):
        p = sub.add_parser(verb, help=text)
        p.add_argument("layer", choices=sorted(LAYERS) + ([fork.NAME] if verb != "lock" else []))
        if verb != "lock":
            p.add_argument("--part-size", metavar="MB[,MB...]",
                           help="largest part in MB, or each part's in turn, the last repeating "
                                "(default: the layer's, layers.py)")
        if verb == "build":
            p.add_argument("--fork-git", type=Path, metavar="DIR",
                           help=f"{fork.NAME} only: a git checkout or bare clone holding the pinned commits "
                                f"(default ${fork.ENV_GIT})")
    a = ap.parse_args(argv)
    try:
        size = None
        if getattr(a, "part_size", None):
            caps = tuple(int(float(x) * 1e6) for x in a.part_size.split(","))
            size = caps[0] if len(caps) == 1 else caps
        if a.verb == "split" and not size:
            raise archive.BundleError("split needs --part-size")
        if a.layer == fork.NAME:
            print(summary(build_fork(a.fork_git, size) if a.verb == "build"
                          else resplit(fork.NAME, fork.MANIFEST, size)))
            return 0
        lay = layer(a.layer)
        if a.verb == "lock":
            print(f"wrote {make_lock(lay)}")
        else:
            print(summary(build(lay, part_size=size) if a.verb == "build"
                          else resplit(lay.name, lay.manifest, size or lay.part_size)))
    except (lock.LockError, archive.BundleError) as e:
        print(f"offline bundle: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
