"""The corpus: the Python standard library source of one CPython, pinned by a manifest.

The manifest lists every file with its sha256, so anyone with the same CPython can rebuild the
same corpus and check it. The split is by file and deterministic (a hash of the path), so held-out
files are never trained on, whatever order the files are read in.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sysconfig
from pathlib import Path

HELDOUT_PERCENT = 3  # of files, by path hash


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def collect(root: Path) -> list[dict]:
    """Every UTF-8 .py file under root except installed packages, sorted by path."""
    entries = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("site-packages/") or "/site-packages/" in rel or not path.is_file():
            continue
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a few test fixtures are deliberately mis-encoded
        entries.append({"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                        "split": split_of(rel)})
    return entries


def split_of(rel_path: str) -> str:
    h = int(hashlib.sha256(rel_path.encode()).hexdigest(), 16)
    return "heldout" if h % 100 < HELDOUT_PERCENT else "train"


def manifest_hash(files: list[dict]) -> str:
    """One hash for the corpus: the file list, contents and split, independent of JSON layout."""
    lines = "".join(f"{f['path']}\t{f['sha256']}\t{f['split']}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def build_manifest(root: Path) -> dict:
    files = collect(root)
    if not files:
        raise FileNotFoundError(f"{root}: no .py files; is this a CPython standard library?")
    return {"source": "CPython standard library (.py files, UTF-8 only, site-packages excluded)",
            "python": platform.python_version(), "root": str(root),
            "heldout_percent": HELDOUT_PERCENT, "hash": manifest_hash(files), "files": files}


def write_manifest(manifest: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(path)


def load_manifest(path: Path) -> dict:
    m = json.loads(path.read_text())
    if manifest_hash(m["files"]) != m["hash"]:
        raise ValueError(f"{path}: field 'hash' does not match the listed files; the manifest was edited")
    return m


def read_texts(manifest: dict, root: Path, split: str | None = None) -> list[tuple[str, str]]:
    """(path, text) for the manifest's files, checking each against its sha256."""
    out = []
    for f in manifest["files"]:
        if split and f["split"] != split:
            continue
        path = root / f["path"]
        if not path.is_file():
            raise FileNotFoundError(f"{path}: listed in the corpus manifest but missing under {root}")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != f["sha256"]:
            raise ValueError(f"{path}: sha256 differs from the corpus manifest (another CPython build?)")
        out.append((f["path"], data.decode("utf-8")))
    return out
