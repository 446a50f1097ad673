"""Which GPU architectures a wheel's compiled files carry code for, read from the files themselves.

    python3 gpuarch.py FILE_OR_DIR ...     # JSON: {file: {"sass": [90, 100, ...], "ptx": [...]}}

Two containers hold CUDA device code: a fatbin (the `.nv_fatbin` payload that nvcc links into a
shared library, one entry per architecture, kind 1 = PTX, kind 2 = SASS), and a bare cubin (a CUDA
ELF, e_machine 190, whose e_flags name its SM). Standard library only: it runs inside the image
at build time, where nothing of ddbench is installed.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
EM_CUDA = 190
KINDS = {1: "ptx", 2: "sass"}


def fatbin_archs(data: bytes) -> set[tuple[str, int]]:
    """(kind, sm) of every entry of every fatbin in data."""
    out: set[tuple[str, int]] = set()
    pos = data.find(FATBIN_MAGIC)
    while pos != -1 and pos + 16 <= len(data):
        _, _, header, size = struct.unpack_from("<IHHQ", data, pos)
        entry, end = pos + header, min(pos + header + size, len(data))
        while entry + 32 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            if kind in KINDS and arch:
                out.add((KINDS[kind], arch))
            if entry_header == 0:
                break
            entry += entry_header + payload
        pos = data.find(FATBIN_MAGIC, max(end, pos + 4))
    return out


def cubin_arch(header: bytes) -> int | None:
    """The SM of a CUDA ELF: e_flags bits 8-15 from ELF ABI version 8 on (CUDA 12.8+), bits 0-7 before."""
    if len(header) < 52 or header[:4] != b"\x7fELF" or header[4] != 2:
        return None
    machine, = struct.unpack_from("<H", header, 18)
    if machine != EM_CUDA:
        return None
    flags, = struct.unpack_from("<I", header, 48)
    return (flags >> 8) & 0xFF if header[8] >= 8 else flags & 0xFF


def file_archs(path: Path) -> set[tuple[str, int]]:
    with open(path, "rb") as f:
        head = f.read(64)
        sm = cubin_arch(head)
        if sm is not None:  # a bare cubin: its header names its SM
            return {("sass", sm)} if sm else set()
        return fatbin_archs(head + f.read())


def scan(paths: list[Path]) -> dict[str, dict[str, list[int]]]:
    """{file: {"sass": [...], "ptx": [...]}} for every .so and .cubin under paths that carries device code."""
    out = {}
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".so", ".cubin"))
        for f in files:
            found = file_archs(f)
            if found:
                out[str(f)] = {k: sorted({a for kind, a in found if kind == k}) for k in ("sass", "ptx")}
    return out


def union(found: dict[str, dict[str, list[int]]], kind: str = "sass") -> list[int]:
    return sorted({a for v in found.values() for a in v[kind]})


if __name__ == "__main__":
    print(json.dumps(scan([Path(p) for p in sys.argv[1:]]), indent=1))
