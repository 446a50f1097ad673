"""Device side of the offline GPU bundles (standard library only: it runs before anything is unpacked).

    python3 containers/offline/device.py setup LAYER...   # unpack into /tmp/site-LAYER; print `export PYTHONPATH=...`
    python3 containers/offline/device.py status LAYER...  # which parts are here, which are missing

Run from the repository root. A layer's parts arrive in the folder its manifest names
(`.offline/LAYER/`, carried by `run`); a layer too big for one call arrives over several calls,
and the parts of earlier calls stay there while the machine is warm. `setup` unpacks a layer
only once all its parts are present with the manifest's sha256, and only once per machine (a
marker in the site dir, .offline-bundle.json, records the archive's and parts' sha256 and, for the
DDTree fork, its source; run manifests read these markers, ddbench.core.manifest.offline_bundles). Only
the export line goes to stdout, so `e=$(sh containers/offline/setup.sh harness) && eval "$e"` sets
the environment or stops.

A layer that `shadows` another (sglang-ddtree shadows sglang) is unpacked into its own site dir,
which goes first on PYTHONPATH: its package replaces the lower layer's whole while the lower
layer stays untouched beside it (so dropping it from the setup line gives the stock layer back,
and ddbench/diagnostics/overlay_check.py can run both). Its manifest's `expects` (the compiled parts
and torch it was pinned to run on) must then be what is on the path.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SITE_ROOT = Path(os.environ.get("H200_SITE_ROOT", "/tmp"))
MARKER = ".offline-bundle.json"
EXIT_MISSING = 3


class SetupError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"offline setup: {msg}", file=sys.stderr, flush=True)


def manifest(layer: str, manifests: Path = HERE) -> dict:
    path = manifests / f"{layer}.manifest.json"
    if not path.is_file():
        raise SetupError(f"{path} is missing: build the layer with `just offline-bundle {layer}`")
    return json.loads(path.read_text())


def site_dir(layer: str) -> Path:
    return SITE_ROOT / f"site-{layer}"


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def part_status(doc: dict, repo: Path = REPO) -> tuple[list[Path], list[str]]:
    """The parts present with the right bytes, and a line for each one missing or wrong."""
    folder = repo / doc["parts_dir"]
    good, bad = [], []
    n = len(doc["parts"])
    for i, part in enumerate(doc["parts"], 1):
        path = folder / part["name"]
        if not path.is_file():
            bad.append(f"part {i} of {n} missing: {doc['parts_dir']}/{part['name']}")
        elif path.stat().st_size != part["size"] or sha256_of(path) != part["sha256"]:
            bad.append(f"part {i} of {n} has other bytes than the manifest's: {doc['parts_dir']}/{part['name']} "
                       f"(rebuild here, or carry it again)")
        else:
            good.append(path)
    return good, bad


def read_marker(dest: Path) -> dict:
    try:
        return json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def write_marker(dest: Path, marker: dict) -> None:
    tmp = dest / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, sort_keys=True) + "\n")
    tmp.replace(dest / MARKER)


def installed(doc: dict, dest: Path) -> bool:
    """The layer's archive is unpacked in dest."""
    return read_marker(dest).get("archive_sha256") == doc["archive"]["sha256"]


def marker_for(doc: dict) -> dict:
    """What a site dir records of the layer unpacked in it (and a run manifest copies)."""
    out = {"layer": doc["layer"], "archive_sha256": doc["archive"]["sha256"],
           "archive_size": doc["archive"].get("size"), "lock_sha256": doc["lock"]["sha256"],
           "parts": [{"name": p["name"], "sha256": p["sha256"], "size": p["size"]} for p in doc["parts"]]}
    if doc.get("shadows"):
        out["shadows"] = doc["shadows"]
    if doc.get("source"):
        out["source"] = doc["source"]
    return out


def join(doc: dict, parts: list[Path], out: Path) -> None:
    """Concatenate the parts into out and check the archive's sha256."""
    h = hashlib.sha256()
    with open(out, "wb") as f:
        for part in parts:
            with open(part, "rb") as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    f.write(block)
    if h.hexdigest() != doc["archive"]["sha256"]:
        raise SetupError(f"{doc['layer']}: the joined parts have sha256 {h.hexdigest()}, "
                         f"the manifest says {doc['archive']['sha256']}")


def unpack(doc: dict, parts: list[Path], dest: Path) -> None:
    """Join the parts, check the archive's sha256, extract into a fresh dir and move it into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    joined = dest.with_name(f".{dest.name}.tar.xz")
    staging = dest.with_name(f".{dest.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        join(doc, parts, joined)
        with tarfile.open(joined, "r:xz") as tar:
            tar.extractall(staging, filter="data")  # refuses absolute paths, `..` and links out
        write_marker(staging, marker_for(doc))
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    finally:
        joined.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)


def _key(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def distributions(path: list[str]) -> dict:
    """Installed distributions on `path` by normalized name; the first on the path wins, as for imports."""
    dists = {}
    for d in md.distributions(path=path):
        dists.setdefault(_key(d.metadata["Name"]), d)
    return dists


def unexpected_versions(docs: list[dict], path: list[str]) -> list[str]:
    """A shadowing layer's `expects` (distribution -> version) that the path does not hold."""
    dists = distributions(path)
    out = []
    for doc in docs:
        for name, want in (doc.get("expects") or {}).items():
            have = dists.get(_key(name))
            if have is None:
                out.append(f"{doc['layer']} was pinned to run on {name} {want}: not installed")
            elif have.version.split("+")[0] != want:
                out.append(f"{doc['layer']} was pinned to run on {name} {want}: found {have.version}")
    return out


def unmet_requirements(docs: list[dict], path: list[str]) -> list[str]:
    """Requires-Dist of every carried wheel that nothing on `path` (bundles first, then the image) meets."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # the image has packaging; without it this check is skipped, not guessed
        return ["(not checked: the `packaging` module is not importable)"]
    dists = distributions(path)
    out = []
    for doc in docs:
        for wheel in doc["wheels"]:
            if not wheel.get("requires_checked", True):
                continue
            dist = dists.get(_key(wheel["name"]))
            if dist is None:
                out.append(f"{wheel['name']}: not found after unpacking")
                continue
            for text in dist.requires or []:
                req = Requirement(text)
                if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                    continue
                have = dists.get(_key(req.name))
                if have is None:
                    out.append(f"{wheel['name']} needs {text}: not installed")
                elif not req.specifier.contains(have.version, prereleases=True):
                    out.append(f"{wheel['name']} needs {text}: found {have.version}")
    return out


def smoke(docs: list[dict], extra: str | None = None) -> None:
    """Import each layer's key modules with that layer and the ones below it on the path, so that a layer
    shadowed by a later one (stock sglang under the fork) is checked as itself."""
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    for i, doc in enumerate(docs):
        modules = doc.get("smoke", [])
        if not modules:
            continue
        sites = [str(site_dir(d["layer"])) for d in reversed(docs[: i + 1])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sites + [p for p in [extra] if p])}
        proc = subprocess.run([sys.executable, "-c", code, *modules], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"{doc['layer']}: importing {' '.join(modules)} failed:\n{proc.stderr[-4000:]}")
        log(f"{doc['layer']}: imports ok: {' '.join(modules)}")


def setup(layers: list[str], strict: bool = False, manifests: Path = HERE, repo: Path = REPO) -> int:
    docs = [manifest(name, manifests) for name in layers]
    missing = []
    for doc in docs:
        for below in doc.get("below", []):
            if below not in layers or layers.index(below) > layers.index(doc["layer"]):
                raise SetupError(f"{doc['layer']} needs layer {below} before it: setup "
                                 f"{' '.join([*doc['below'], doc['layer']])}")
        missing += unpack_layer(doc, repo)
    if missing:
        for m in missing:
            log(m)
        log("not ready: carry the missing parts in the next call (those here stay while the machine is warm)")
        return EXIT_MISSING
    # upper layers first: a package carried by two layers is taken from the upper one
    sites = [str(site_dir(d["layer"])) for d in reversed(docs)]
    for p in unmet_requirements(docs, sites + sys.path[1:]):
        log(f"requirement: {p}")
        if strict:
            raise SetupError("unmet requirements (--strict)")
    wrong = unexpected_versions(docs, sites + sys.path[1:])
    if wrong:  # the pinned build would not be what runs
        raise SetupError("; ".join(wrong))
    smoke(docs, os.environ.get("PYTHONPATH"))
    print(f"export PYTHONPATH={':'.join(sites)}${{PYTHONPATH:+:$PYTHONPATH}}")
    return 0


def unpack_layer(doc: dict, repo: Path) -> list[str]:
    """Unpack one layer into its site dir, once per machine; the parts still missing (nothing unpacked then)."""
    dest = site_dir(doc["layer"])
    if installed(doc, dest):
        log(f"{doc['layer']}: already unpacked in {dest}")
        return []
    good, bad = part_status(doc, repo)
    if bad:
        return [f"{doc['layer']}: {b}" for b in bad]
    unpack(doc, good, dest)
    source = doc.get("source")
    log(f"{doc['layer']}: unpacked {doc['archive']['files']} files into {dest}"
        + (f" ({source.get('label') or source.get('commit')}, shadowing {doc['shadows']})"
           if doc.get("shadows") and source else ""))
    return []


def status(layers: list[str], manifests: Path = HERE, repo: Path = REPO) -> int:
    rc = 0
    for name in layers:
        doc = manifest(name, manifests)
        good, bad = part_status(doc, repo)
        where = "unpacked" if installed(doc, site_dir(name)) else "not unpacked"
        print(f"{name}: {len(good)} of {len(doc['parts'])} parts present, {where}")
        for b in bad:
            print(f"  {b}")
        rc = rc or (EXIT_MISSING if bad else 0)
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="containers/offline/device.py")
    sub = ap.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("setup", help="unpack layers, print the export line")
    s.add_argument("layers", nargs="+")
    s.add_argument("--strict", action="store_true", help="fail on an unmet requirement instead of warning")
    st = sub.add_parser("status", help="parts present and missing")
    st.add_argument("layers", nargs="+")
    for p in (s, st):  # tests point these elsewhere; on the device the defaults are right
        p.add_argument("--manifests", type=Path, default=HERE, help=argparse.SUPPRESS)
        p.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    try:
        if a.verb == "setup":
            return setup(a.layers, a.strict, a.manifests, a.repo)
        return status(a.layers, a.manifests, a.repo)
    except SetupError as e:
        log(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
