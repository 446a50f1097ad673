"""Images ddbench builds here: the local base and the reference engine's, through the Docker SDK.

    python -m containers.images build base|refengine-cpu|refengine-cuda|sglang-blackwell|sglang-hopper
        [--tag TAG] [--base IMAGE] [--build-arg K=V ...]

The refengine build sends a context made here (the Dockerfile, the wheelhouse, the Python
packages the server runs) instead of the repository, so nothing else travels to the daemon,
local or remote, and no .dockerignore is needed. Its tag carries a digest of those inputs,
so a cached image is reused only when nothing it was made from changed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from ddbench.manifest import git_state
from ddbench.profile import REPO_ROOT

HERE = Path(__file__).resolve().parent
BASE_TAG = "ddbench/base:bookworm"
REFENGINE_REPO = "ddbench/refengine"
CODE_DIRS = ("ddbench", "refengine", "loadtests")
SGLANG_VARIANTS = ("blackwell", "hopper")


class BuildError(RuntimeError):
    """An image that did not build; the message ends with the build log's tail."""


@dataclass(frozen=True)
class Built:
    tag: str
    image_id: str
    seconds: float
    cached: bool


def client():
    import docker

    return docker.from_env(timeout=600)


def build_base(tag: str = BASE_TAG, force: bool = False) -> Built:
    """debootstrap + docker import (containers/base/build.sh); an existing tag is reused."""
    t0 = time.monotonic()
    exists = _image_id(tag)
    if exists and not force:
        return Built(tag, exists, 0.0, True)
    env = {"DDBENCH_BASE_FORCE": "1"} if force else {}
    proc = subprocess.run(["bash", str(HERE / "base" / "build.sh"), tag], capture_output=True, text=True,
                          env={**os.environ, **env})
    if proc.returncode != 0:
        raise BuildError(f"base image {tag} did not build (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return Built(tag, _image_id(tag), time.monotonic() - t0, False)


def _image_id(tag: str) -> str | None:
    import docker.errors

    try:
        return client().images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def _files(variant: str) -> list[tuple[str, Path]]:
    """(name in the context, file on disk), sorted, for the refengine build."""
    wheels = REPO_ROOT / "wheelhouse" / variant
    lock = wheels / "requirements.lock"
    if not lock.is_file():
        raise BuildError(f"{wheels}: no wheelhouse; make it with `python -m containers.refengine.wheelhouse "
                         f"--variant {variant}`")
    if lock.read_bytes() != (HERE / "refengine" / f"requirements.{variant}.lock").read_bytes():
        raise BuildError(f"{lock} differs from containers/refengine/requirements.{variant}.lock; "
                         f"re-run `python -m containers.refengine.wheelhouse --variant {variant}`")
    out = [("Dockerfile", HERE / "refengine" / "Dockerfile")]
    out += [(f"wheelhouse/{p.name}", p) for p in sorted(wheels.iterdir()) if p.is_file()]
    for d in CODE_DIRS:
        for p in sorted((REPO_ROOT / d).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
                out.append((p.relative_to(REPO_ROOT).as_posix(), p))
    return out


def context_digest(files: list[tuple[str, Path]], base: str) -> str:
    h = hashlib.sha256(base.encode())
    for name, path in files:
        h.update(name.encode() + b"\0")
        # wheels are pinned by hash in the lock; hashing their names is enough and keeps this fast
        if not name.startswith("wheelhouse/") or name.endswith(".lock"):
            h.update(path.read_bytes())
    return h.hexdigest()


def _context(files: list[tuple[str, Path]]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, path in files:
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0  # a reproducible context: the same inputs give the same tar
            with open(path, "rb") as f:
                tar.addfile(info, f)
    buf.seek(0)
    return buf


def build_refengine(variant: str = "cpu", base: str | None = None, tag: str | None = None,
                    build_args: dict[str, str] | None = None) -> Built:
    """The refengine image for a variant; reused when an image from the same inputs exists."""
    files = _files(variant)
    args = dict(build_args or {})
    if base:
        args["BASE"] = base
    digest = context_digest(files, repr(sorted(args.items())))
    tag = tag or f"{REFENGINE_REPO}:{variant}-{digest[:12]}"
    exists = _image_id(tag)
    if exists:
        return Built(tag, exists, 0.0, True)
    lock = (REPO_ROOT / "wheelhouse" / variant / "requirements.lock").read_bytes()
    args.update(VARIANT=variant, DDBENCH_GIT_SHA=git_state().get("sha") or "unknown",
                LOCK_SHA256=hashlib.sha256(lock).hexdigest())
    t0 = time.monotonic()
    _build(_context(files), tag, args)
    return Built(tag, _image_id(tag), time.monotonic() - t0, False)


def _build(context: io.BytesIO, tag: str, args: dict[str, str], pull: bool = False, echo: bool = False) -> None:
    import docker.errors

    log: list[str] = []
    try:
        # the low-level API streams the log, so a failure can show its tail
        for chunk in client().api.build(fileobj=context, custom_context=True, tag=tag, buildargs=args, rm=True,
                                        forcerm=True, decode=True, pull=pull):
            if "stream" in chunk:
                log.append(chunk["stream"])
                if echo:
                    print(chunk["stream"], end="", flush=True)
            if "error" in chunk:
                raise BuildError(f"image {tag} did not build: {chunk['error'].strip()}\n" + "".join(log)[-3000:])
    except docker.errors.APIError as e:
        raise BuildError(f"image {tag} did not build: {e}\n" + "".join(log)[-3000:]) from None


def build_sglang(variant: str, tag: str | None = None, build_args: dict[str, str] | None = None) -> Built:
    """An SGLang+DDTree image (needs the registry and GitHub: build it on the GPU host)."""
    if variant not in SGLANG_VARIANTS:
        raise BuildError(f"no SGLang variant '{variant}'; variants: {', '.join(SGLANG_VARIANTS)}")
    args = dict(build_args or {})
    if variant == "hopper" and not args.get("SGLANG_DIGEST"):
        raise BuildError("sglang-hopper needs --build-arg SGLANG_DIGEST=sha256:<digest of lmsysorg/sglang:"
                         "v0.5.15-cu129> (see containers/README.md)")
    folder = HERE / "sglang"
    files = [("Dockerfile", folder / f"Dockerfile.{variant}")]
    files += [(p.name, p) for p in sorted(folder.iterdir()) if p.suffix in (".sh", ".py", ".patch")]
    tag = tag or f"ddbench/sglang:0.5.15-{variant}"
    args.setdefault("DDBENCH_GIT_SHA", git_state().get("sha") or "unknown")
    t0 = time.monotonic()
    _build(_context(files), tag, args, pull=True, echo=True)
    return Built(tag, _image_id(tag), time.monotonic() - t0, False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.images", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build one image")
    b.add_argument("image", choices=["base", "refengine-cpu", "refengine-cuda", "sglang-blackwell", "sglang-hopper"])
    b.add_argument("--tag")
    b.add_argument("--base", help=f"refengine: base image instead of the pinned one (e.g. {BASE_TAG})")
    b.add_argument("--build-arg", action="append", default=[], metavar="K=V")
    b.add_argument("--force", action="store_true", help="base: rebuild an existing tag")
    a = ap.parse_args(argv)
    try:
        args = dict(kv.split("=", 1) for kv in a.build_arg)
    except ValueError:
        ap.error(f"--build-arg takes K=V, got {a.build_arg}")
    try:
        if a.image == "base":
            built = build_base(a.tag or BASE_TAG, force=a.force)
        elif a.image.startswith("refengine-"):
            built = build_refengine(a.image.split("-", 1)[1], base=a.base, tag=a.tag, build_args=args)
        else:
            built = build_sglang(a.image.split("-", 1)[1], tag=a.tag, build_args=args)
    except BuildError as e:
        print(f"containers.images: {e}", file=sys.stderr)
        return 1
    how = "reused (inputs unchanged)" if built.cached else f"built in {built.seconds:.1f} s"
    print(f"{built.tag} {built.image_id} {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
