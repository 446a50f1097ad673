"""The one pin of the SGLang DDTree build (containers/sglang/pin.toml), read once, typed.

    python -m containers.sglang_pin            # print it
    python -m containers.sglang_pin --json     # as JSON (for a Dockerfile's build args, or a shell)

The DDTree source (repo, full commit, the upstream commits cherry-picked onto it, ddbench's own
patches in containers/sglang/patches/ with their sha256), the SGLang
release whose compiled parts it runs on, and those parts' versions live only in pin.toml; the
H200 layer `sglang-ddtree`, the launch rules, the flag table check and the run manifests read it
from here. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

PIN_FILE = Path(__file__).resolve().parent / "sglang" / "pin.toml"
SHA = re.compile(r"[0-9a-f]{40}")
WHEELS = ("sglang-kernel", "flashinfer-python", "transformers", "torch")


class PinError(ValueError):
    """A pin file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class CherryPick:
    repo: str
    commit: str
    why: str = ""


@dataclass(frozen=True)
class Patch:
    file: str                        # relative to containers/sglang/
    sha256: str
    why: str = ""

    @property
    def path(self) -> Path:
        return PIN_FILE.parent / self.file

    def check(self) -> bytes:
        """The patch's bytes, once they match the pinned sha256."""
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise PinError(f"{PIN_FILE}: ddtree.patch {self.file}: cannot read it ({e.strerror})") from None
        got = hashlib.sha256(data).hexdigest()
        if got != self.sha256:
            raise PinError(f"{PIN_FILE}: ddtree.patch {self.file}: sha256 {got} on disk, {self.sha256} pinned")
        return data


@dataclass(frozen=True)
class Pin:
    sglang: str                      # the release whose wheels carry the compiled parts
    wheels: dict[str, str]           # sglang-kernel, flashinfer-python, transformers, torch -> version
    repo: str                        # the DDTree fork
    branch: str                      # informational; the commit is what ran
    commit: str                      # full 40-hex SHA
    cherry_picks: tuple[CherryPick, ...] = ()
    patches: tuple[Patch, ...] = ()

    @property
    def short(self) -> str:
        return self.commit[:8]

    @property
    def build(self) -> str:
        """The fork's sha8, and how many ddbench patches sit on it: what an image tag names."""
        return self.short + (f"-p{len(self.patches)}" if self.patches else "")

    @property
    def flags_table(self) -> str:
        """Name of the flag table read from the fork's server_args.py at `commit` (containers/sglang/flags/)."""
        return f"ddtree-fork-{self.short}"

    @property
    def label(self) -> str:
        """One line naming the source: repo@sha8 + each cherry-pick's sha8."""
        name = self.repo.removeprefix("https://github.com/")
        picks = "".join(f" + {c.commit[:9]}" for c in self.cherry_picks)
        return f"{name}@{self.short}{picks}" + (f" + {len(self.patches)} ddbench patches" if self.patches else "")

    @property
    def expect(self) -> str:
        """name=version,... of the release and its compiled parts: what an install must hold (smoke.py --expect)."""
        return ",".join(f"{k}={v}" for k, v in sorted({"sglang": self.sglang, **self.wheels}.items()))

    def record(self) -> dict:
        """What a manifest records of the pin."""
        out = asdict(self)
        out["cherry_picks"] = [asdict(c) for c in self.cherry_picks]
        out["patches"] = [asdict(q) for q in self.patches]
        return out


def parse(text: str, source: str = str(PIN_FILE)) -> Pin:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PinError(f"{source}: not valid TOML: {e}") from None
    wheels = doc.get("wheels")
    if not isinstance(wheels, dict):
        raise PinError(f"{source}: [wheels]: missing")
    missing = [w for w in WHEELS if not isinstance(wheels.get(w), str)]
    if missing:
        raise PinError(f"{source}: [wheels]: missing {', '.join(missing)}")
    dd = doc.get("ddtree")
    if not isinstance(dd, dict):
        raise PinError(f"{source}: [ddtree]: missing")
    picks = [CherryPick(_need(cp, "repo", f"ddtree.cherry_pick[{i}].", source),
                        _sha(cp, "commit", f"ddtree.cherry_pick[{i}].", source), str(cp.get("why", "")).strip())
             for i, cp in enumerate(dd.get("cherry_pick", []))]
    patches = [_patch(q, f"ddtree.patch[{i}].", source) for i, q in enumerate(dd.get("patch", []))]
    return Pin(sglang=_need(doc, "sglang", "", source), wheels={k: str(v) for k, v in wheels.items()},
               repo=_need(dd, "repo", "ddtree.", source), branch=_need(dd, "branch", "ddtree.", source),
               commit=_sha(dd, "commit", "ddtree.", source), cherry_picks=tuple(picks), patches=tuple(patches))


def _need(table: dict, key: str, where: str, source: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise PinError(f"{source}: {where}{key}: missing or not a string")
    return value


def _sha(table: dict, key: str, where: str, source: str) -> str:
    value = _need(table, key, where, source)
    if not SHA.fullmatch(value):
        raise PinError(f"{source}: {where}{key}: a full 40-hex commit SHA, got {value!r} (a branch moves)")
    return value


def _patch(q: dict, where: str, source: str) -> Patch:
    name, digest = _need(q, "file", where, source), _need(q, "sha256", where, source)
    if Path(name).is_absolute() or ".." in Path(name).parts or not name.startswith("patches/"):
        raise PinError(f"{source}: {where}file: a path under patches/, got {name!r}")
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise PinError(f"{source}: {where}sha256: 64 hex digits, got {digest!r}")
    return Patch(name, digest, str(q.get("why", "")).strip())


@cache
def pin(path: Path = PIN_FILE) -> Pin:
    return parse(path.read_text(), str(path))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.sglang_pin", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        p = pin()
    except PinError as e:
        print(f"sglang pin: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(p.record(), indent=1, sort_keys=True))
        return 0
    print(f"DDTree source {p.label} (branch {p.branch}, {p.commit})")
    for c in p.cherry_picks:
        print(f"  cherry-pick {c.repo} {c.commit}")
    for q in p.patches:
        print(f"  patch {q.file} (sha256 {q.sha256[:12]})")
    print(f"on sglang {p.sglang}: " + ", ".join(f"{k} {v}" for k, v in p.wheels.items()))
    print(f"flag table containers/sglang/flags/{p.flags_table}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
