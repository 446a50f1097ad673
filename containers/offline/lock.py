"""Lock files: one wheel a line, `name==version --hash=sha256:HEX  # FILENAME`.

The lines are pip's hash-checking requirement syntax, so `pip download --require-hashes -r`
reads a lock as it is; the trailing comment names the wheel file, which the build checks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.requirements import Requirement

from containers.offline.layers import PLATFORMS, PYTHON_VERSION, Layer, canonical
from ddbench.core.manifest import file_sha256

LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s#]+)\s+--hash=sha256:(?P<sha>[0-9a-f]{64})"
                  r"\s*(?:#\s*(?P<file>\S+\.whl))?\s*$")


class LockError(ValueError):
    """A lock file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str
    filename: str

    @property
    def key(self) -> str:
        return canonical(self.name)

    def line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}  # {self.filename}"


def parse(text: str, source: str = "<lock>") -> list[Pin]:
    pins: list[Pin] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            raise LockError(f"{source}:{n}: not `name==version --hash=sha256:<64 hex>  # file.whl`: {raw!r}")
        if not m["file"]:
            raise LockError(f"{source}:{n}: {m['name']}: the wheel's file name is missing (`# file.whl`)")
        key = canonical(m["name"])
        if key in seen:  # two versions of one package stop the whole install on the device
            raise LockError(f"{source}:{n}: {m['name']} is pinned twice (first on line {seen[key]})")
        seen[key] = n
        pins.append(Pin(m["name"], m["version"], m["sha"], m["file"]))
    return pins


def read(path: Path) -> list[Pin]:
    if not path.is_file():
        raise LockError(f"{path}: missing; make it with `python -m containers.offline.bundle lock {path.stem}`")
    return parse(path.read_text(), str(path))


def format_lock(layer: Layer, pins: list[Pin], left_out: dict[str, str]) -> str:
    head = [f"# made by: python -m containers.offline.bundle lock {layer.name}",
            f"# from {layer.requirements.name}; CPython {PYTHON_VERSION}, manylinux x86_64 (the GPU machine's python3)"]
    if left_out:
        head.append("# left to the image or a layer below (name: what needs it):")
        head += [f"#   {k}: {v}" for k, v in sorted(left_out.items())]
    return "\n".join(head + [p.line() for p in sorted(pins, key=lambda p: p.key)]) + "\n"


def target_args() -> list[str]:
    args = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp",
            "--abi", "cp" + PYTHON_VERSION.replace(".", ""), "--abi", "abi3", "--abi", "none"]
    for p in PLATFORMS:
        args += ["--platform", p]
    return args


def pip(args: list[str]) -> None:
    # --isolated: a host's find-links or extra index must not decide what the H200 gets
    argv = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", *args]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"offline bundle: pip failed ({' '.join(argv)}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def pin_from_report(item: dict) -> Pin:
    meta, info = item["metadata"], item["download_info"]
    digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
    filename = unquote(urlparse(info["url"]).path.rsplit("/", 1)[-1])
    if digest is None:
        raise SystemExit(f"offline bundle: the index gave no sha256 for {meta['name']} ({info['url']})")
    if not filename.endswith(".whl"):
        raise SystemExit(f"offline bundle: {meta['name']} resolved to {filename}, not a wheel")
    return Pin(meta["name"], meta["version"], digest, filename)


# the GPU machine's interpreter, for environment markers (pip's report evaluates them for the host)
TARGET_ENV = {"python_version": PYTHON_VERSION, "python_full_version": PYTHON_VERSION + ".3", "sys_platform": "linux",
              "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def carried(items: list[dict], skip: frozenset[str] | set[str]) -> set[str]:
    """What the requested distributions need, walking only through distributions the layer carries.

    Extras count: locust asks for python-socketio[client], which brings websocket-client.
    """
    resolved = {canonical(i["metadata"]["name"]): i for i in items}
    todo = [(k, tuple(i.get("requested_extras") or ())) for k, i in resolved.items() if i.get("requested", True)]
    seen: set[tuple[str, str]] = set()
    out: set[str] = set()
    while todo:
        key, extras = todo.pop()
        if key in skip or key not in resolved:
            continue
        new = [e for e in ("", *extras) if (key, e) not in seen]
        seen.update((key, e) for e in new)
        out.add(key)
        for text in resolved[key]["metadata"].get("requires_dist") or []:
            req = Requirement(text)
            for extra in new:
                applies = extra == "" if req.marker is None else req.marker.evaluate({**TARGET_ENV, "extra": extra})
                if applies:
                    todo.append((canonical(req.name), tuple(sorted(req.extras))))
                    break
    return out


def requirers(items: list[dict]) -> dict[str, list[str]]:
    """For each distribution of a resolution, the distributions whose Requires-Dist names it."""
    out: dict[str, list[str]] = {}
    for item in items:
        for req in item["metadata"].get("requires_dist") or []:
            if "extra ==" in req:
                continue
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if m:
                out.setdefault(canonical(m[1]), []).append(f"{item['metadata']['name']} ({req.strip()})")
    return out


REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def split_requirements(text: str, alone: set[str]) -> tuple[list[str], list[str]]:
    """The .in's requirement lines: (those resolved with their closure, those taken alone)."""
    closure, single = [], []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = REQ_NAME.match(line)
        (single if m and canonical(m[1]) in alone else closure).append(line)
    return closure, single


def _pip_report(tmp: Path, tag: str, lines: list[str], constraints: list[str], deps: bool) -> list[dict]:
    req, report = tmp / f"{tag}.txt", tmp / f"{tag}.json"
    req.write_text("\n".join(lines) + "\n")
    args = ["install", "--dry-run", "--ignore-installed", "--no-cache-dir", *target_args(),
            "--target", str(tmp / f"t-{tag}"), "--report", str(report), "-r", str(req)]
    if constraints:
        cons = tmp / f"{tag}-constraints.txt"
        cons.write_text("\n".join(constraints) + "\n")
        args += ["-c", str(cons)]
    if not deps:
        args.append("--no-deps")
    pip(args)
    return json.loads(report.read_text())["install"]


def resolve(layer: Layer, below: list[Pin]) -> tuple[list[Pin], dict[str, str]]:
    """The layer's pins (metadata only, nothing downloaded) and what was left out, with who needs it."""
    alone = {canonical(n) for n in layer.alone}
    closure, single = split_requirements(layer.requirements.read_text(), alone)
    # the layers below are unpacked beside this one: resolve against their exact versions
    constraints = [f"{p.name}=={p.version}" for p in below]
    with tempfile.TemporaryDirectory() as tmp:
        items = []
        if single:
            items += _pip_report(Path(tmp), "alone", single, constraints, deps=False)
        if closure:
            items += _pip_report(Path(tmp), "closure", closure, constraints + single, deps=layer.closure)
    skip = layer.provided() | {p.key for p in below}
    needs = requirers(items)
    wanted = carried(items, skip)
    pins: dict[str, Pin] = {}
    left_out = {}
    for item in items:
        pin = pin_from_report(item)
        if pin.key in skip:
            left_out[pin.key] = "; ".join(sorted(set(needs.get(pin.key, ["(top level)"]))))
        elif pin.key not in wanted:
            continue  # needed only by packages the image or a layer below provides: theirs already is there
        elif pin.key in pins and pins[pin.key] != pin:
            raise SystemExit(f"offline bundle: {pin.name} resolved twice: {pins[pin.key].filename} and {pin.filename}")
        else:
            pins[pin.key] = pin
    return list(pins.values()), left_out


def download(pins: list[Pin], cache: Path) -> dict[str, Path]:
    """Every pinned wheel in `cache` (downloaded if absent), each checked against its sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [p for p in pins if not (cache / p.filename).is_file()]
    if missing:
        with tempfile.TemporaryDirectory() as tmp:
            req = Path(tmp) / "lock.txt"
            req.write_text("".join(p.line() + "\n" for p in missing))
            pip(["download", "--no-deps", "--require-hashes", *target_args(), "--dest", str(cache), "-r", str(req)])
    out = {}
    for p in pins:
        path = cache / p.filename
        if not path.is_file():
            raise SystemExit(f"offline bundle: pip did not save {p.filename} for {p.name}=={p.version} in {cache}")
        got = file_sha256(path)
        if got != p.sha256:
            raise SystemExit(f"offline bundle: {path} has sha256 {got} (the lock: {p.sha256}); delete it and rebuild")
        out[p.key] = path
    return out
