"""Wheels -> one site-packages tree -> a deterministic tar.xz, split into parts.

No pip runs on the device: a wheel's files are laid out here the way `pip install --target`
lays them (its `.data/purelib` and `.data/platlib` into the root; scripts, headers and data
dropped: the run starts everything with `python -m`). The same inputs always give the same
bytes: members sorted, one fixed mtime, uid/gid 0 with no names, modes 0644/0755, one xz
preset. That holds on one liblzma version; another may compress differently, which the
manifest's archive sha256 then shows.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import posixpath
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

# 1980-01-01, the earliest time a zip can hold: a fixed, obviously synthetic mtime
MTIME = 315532800
XZ_PRESET = 9
CHUNK = 1 << 20


class BundleError(ValueError):
    """Inputs that cannot make a bundle; the message names the wheel or file."""


@dataclass(frozen=True)
class Entry:
    path: str  # installed path, relative to the site dir, posix
    dist: str
    size: int
    executable: bool
    read: Callable[[], bytes]


def _safe(path: str, source: str) -> str:
    norm = posixpath.normpath(path)
    if path.startswith("/") or norm.startswith("../") or norm == ".." or "\\" in path:
        raise BundleError(f"{source}: unsafe member path {path!r}")
    return norm


def wheel_entries(wheel: Path, dist: str) -> tuple[list[Entry], list[str]]:
    """The files a wheel installs (site-relative) and the members it would install elsewhere (dropped)."""
    entries, elsewhere = [], []
    with zipfile.ZipFile(wheel) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
    for info in infos:
        name = _safe(info.filename, str(wheel))
        top, _, rest = name.partition("/")
        if top.endswith(".data"):
            kind, _, inner = rest.partition("/")
            if kind not in ("purelib", "platlib") or not inner:
                elsewhere.append(name)  # scripts, headers, data: outside site-packages
                continue
            name = inner
        executable = bool((info.external_attr >> 16) & 0o111)
        entries.append(Entry(name, dist, info.file_size, executable,
                             lambda w=wheel, m=info.filename: _read_member(w, m)))
    return entries, elsewhere


def _read_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member)


def collapse(removed: Iterable[str], kept: Iterable[str]) -> list[str]:
    """The removed paths, written as the fewest whole directories (`dir/`) and single files.

    A directory is named when nothing under it was kept: the manifest then says exactly what a
    trim dropped without listing thousands of headers one by one.
    """
    kept_dirs = set()
    for path in kept:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            kept_dirs.add("/".join(parts[:i]))
    out = set()
    for path in removed:
        parts = path.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in kept_dirs:
                out.add(d + "/")
                break
        else:
            out.add(path)
    return sorted(out)


def merge(entries: Iterable[Entry]) -> list[Entry]:
    """One entry per path; two wheels installing one path with different bytes is an error."""
    by_path: dict[str, Entry] = {}
    for e in entries:
        if e.path in by_path:
            first = by_path[e.path]
            if first.read() != e.read():
                raise BundleError(f"{e.path}: installed by both {first.dist} and {e.dist} with different contents")
            continue
        by_path[e.path] = e
    return [by_path[p] for p in sorted(by_path)]


def _info(name: str, *, size: int = 0, directory: bool = False, executable: bool = False) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = MTIME, 0, 0, "", ""
    ti.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    ti.mode = 0o755 if directory or executable else 0o644
    ti.size = size
    return ti


def write_tar_xz(entries: list[Entry], out: Path, extra: dict[str, bytes] | None = None) -> dict:
    """Write entries (plus `extra` files) as a deterministic tar.xz; returns members and unpacked bytes."""
    files: dict[str, tuple[int, bool, Callable[[], bytes]]] = {e.path: (e.size, e.executable, e.read) for e in entries}
    for path, data in (extra or {}).items():
        if path in files:
            raise BundleError(f"{path}: the bundle's own file collides with a wheel's")
        files[path] = (len(data), False, lambda d=data: d)
    dirs = set()
    for path in files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    unpacked = 0
    try:
        with open(tmp, "wb") as raw, \
                lzma.LZMAFile(raw, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET) as xz, \
                tarfile.open(fileobj=xz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name in sorted(dirs | set(files)):
                if name in dirs:
                    tar.addfile(_info(name, directory=True))
                    continue
                size, executable, read = files[name]
                data = read()
                if len(data) != size:
                    raise BundleError(f"{name}: read {len(data)} bytes, expected {size}")
                tar.addfile(_info(name, size=size, executable=executable), io.BytesIO(data))
                unpacked += size
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return {"members": len(dirs) + len(files), "files": len(files), "unpacked_bytes": unpacked}


def part_name(archive_name: str, index: int) -> str:
    return f"{archive_name}.{index:02d}"


def part_sizes(size: int, caps: int | tuple[int, ...]) -> list[int]:
    """How an archive of `size` bytes is cut.

    One cap: the fewest parts of at most `caps` bytes, of near-equal size. Several: part i holds
    at most caps[i] bytes, the last cap repeating (a small first part can ride along with another
    layer in one call, the rest filling whole calls).
    """
    if isinstance(caps, int):
        caps = (caps,)
        count = max(1, -(-size // caps[0])) if caps[0] > 0 else 0
        even = True
    else:
        even = False
    if not caps or min(caps) <= 0:
        raise BundleError(f"part sizes must be positive, got {caps}")
    if even:
        chunk = max(1, -(-size // count))
        return [min(chunk, size - i * chunk) for i in range(count)] if size else [0]
    out, left, i = [], size, 0
    while left > 0 or not out:
        take = min(left, caps[min(i, len(caps) - 1)])
        out.append(take)
        left -= take
        i += 1
    return out


def split(archive: Path, caps: int | tuple[int, ...], dest: Path) -> list[dict]:
    """Cut the archive into parts (see part_sizes) in dest; stale parts of it there are removed first."""
    sizes = part_sizes(archive.stat().st_size, caps)
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.glob(archive.name + ".*"):
        if stale.suffix[1:].isdigit():
            stale.unlink()
    parts = []
    with open(archive, "rb") as f:
        for index, size in enumerate(sizes, 1):
            data = f.read(size)
            name = part_name(archive.name, index)
            tmp = dest / f".{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(dest / name)
            parts.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return parts
