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
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ddbench.core.manifest import git_state
from ddbench.core.profile import REPO_ROOT

HERE = Path(__file__).resolve().parent
BASE_TAG = "ddbench/base:bookworm"
BASE_PY312_TAG = "ddbench/base:bookworm-py312"  # the SGLang image's: SGLang 0.5.15 ships cp312 wheels only
REFENGINE_REPO = "ddbench/refengine"
CODE_DIRS = ("ddbench", "refengine", "loadtests")


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


def build_base(tag: str = BASE_TAG, force: bool = False, cpython: Path | None = None) -> Built:
    """debootstrap + docker import (containers/base/build.sh); an existing tag is reused.
    cpython: a CPython 3.12 prefix copied in (the SGLang image's base, containers/base/build.sh)."""
    t0 = time.monotonic()
    exists = _image_id(tag)
    if exists and not force:
        return Built(tag, exists, 0.0, True)
    env = {"DDBENCH_BASE_FORCE": "1"} if force else {}
    if cpython:
        env["DDBENCH_BASE_CPYTHON"] = str(cpython)
    proc = subprocess.run(["bash", str(HERE / "base" / "build.sh"), tag], capture_output=True, text=True,
                          env={**os.environ, **env})
    if proc.returncode != 0:
        raise BuildError(f"base image {tag} did not build (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return Built(tag, _image_id(tag), time.monotonic() - t0, False)


def cpython312() -> Path:
    """This host's CPython 3.12 prefix: python3.12's on PATH, else a pyenv-installed 3.12."""
    import shutil

    exe = shutil.which("python3.12")
    if exe:
        out = subprocess.run([exe, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True)
        if out.returncode == 0:
            return Path(out.stdout.strip())
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(root.glob("3.12.*"), key=lambda p: [int(x) for x in p.name.split(".") if x.isdigit()])
    if found and (found[-1] / "bin" / "python3").exists():
        return found[-1]
    raise BuildError("base-py312 needs a CPython 3.12: put python3.12 on PATH or pass --python PREFIX")


def _image_id(tag: str) -> str | None:
    import docker.errors

    try:
        return client().images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def _files(variant: str) -> list[tuple[str, Path]]:
    """(name in the context, file on disk), sorted, for the refengine build."""
    out = [("Dockerfile", HERE / "refengine" / "Dockerfile")]
    out += _wheelhouse(variant, HERE / "refengine" / f"requirements.{variant}.lock", variant)
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


@contextmanager
def _context(files: list[tuple[str, Path]]):
    """The build context as a tar in a temporary file (an SGLang wheelhouse is GBs, not for memory)."""
    with tempfile.TemporaryFile() as buf:
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, path in files:
                info = tar.gettarinfo(str(path), arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0  # a reproducible context: the same inputs give the same tar
                with open(path, "rb") as f:
                    tar.addfile(info, f)
        buf.seek(0)
        yield buf


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
    with _context(files) as context:
        _build(context, tag, args)
    return Built(tag, _image_id(tag), time.monotonic() - t0, False)


def _build(context, tag: str, args: dict[str, str], pull: bool = False, echo: bool = False) -> None:
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


SGLANG_NEED_SM = {"blackwell": "100,120", "hopper": "90", "local": "90,100,120"}
SGLANG_VARIANTS = tuple(SGLANG_NEED_SM)
EVIDENCE = REPO_ROOT / "results" / "images"


def sglang_tag(variant: str) -> str:
    """The tag an SGLang+DDTree image gets, named after the one pin and its patches (profiles name these
    tags): an image built before a patch changed cannot pass for one built after."""
    from containers.sglang_pin import pin

    p = pin()
    return f"ddbench/sglang:{p.sglang}-ddtree-{p.build}-{variant}"


# Stock SGLang's registry image, by digest: what a stock-SGLang docker profile (no fork) starts. The fork's
# registry-based images take the pinned release's image as a build arg instead (registry_base).
STOCK_IMAGE = "lmsysorg/sglang:v0.5.15-cu130@sha256:d0a667eca4e6fff64f7758c5fb1720e16faa806f90ea767e018bb8fa1b09dd44"


def registry_image() -> str:
    """The registry's stock SGLang image, by digest, that stock-SGLang docker profiles start."""
    return STOCK_IMAGE


def registry_base(args: dict[str, str]) -> str:
    """The registry image a blackwell or hopper build starts from: the pinned release's, by digest, given as
    --build-arg SGLANG_IMAGE (no registry is asked here, so no digest is guessed)."""
    from containers.sglang_pin import pin

    want = f"lmsysorg/sglang:v{pin().sglang}-cu130@sha256:"
    image = args.get("SGLANG_IMAGE", "")
    if not (image.startswith(want) and re.fullmatch(r"[0-9a-f]{64}", image[len(want):])):
        raise BuildError(f"the registry variants build on the pinned release's image by digest: give --build-arg "
                         f"SGLANG_IMAGE={want}<64 hex> (`docker buildx imagetools inspect "
                         f"{want.split('@')[0]}` prints it){f'; got {image!r}' if image else ''}")
    return image


def sglang_commands() -> list[dict]:
    """Every shipped SGLang profile's server command, arm by arm, as ddbench generates it."""
    from containers.launch import server_command
    from ddbench.core.profile import PROFILES_DIR, load_profile

    out = []
    for path in sorted(PROFILES_DIR.glob("*.yaml")):
        profile = load_profile(path)
        if profile.backend.kind == "sglang":
            out += [{"profile": profile.name, "arm": arm.id, "argv": server_command(profile, arm).argv}
                    for arm in profile.arms]
    return out


def sglang_build_args(variant: str, source: dict) -> dict[str, str]:
    """Everything the Dockerfiles take from the pin: no Dockerfile carries a copy."""
    from containers.sglang_pin import pin

    p = pin()
    return {"VARIANT": variant, "NEED_SM": SGLANG_NEED_SM[variant], "SGLANG_VERSION": p.sglang,
            "EXPECT": p.expect,
            "DDTREE_REPO": p.repo, "DDTREE_COMMIT": p.commit, "DDTREE_HEAD": source["head"],
            "DDBENCH_GIT_SHA": git_state().get("sha") or "unknown"}


def sglang_files(variant: str, source_dir: Path, commands: Path) -> list[tuple[str, Path]]:
    """(name in the context, file on disk) for an SGLang build: its Dockerfile, the overlay and smoke
    scripts, the generated command lines, the DDTree export, and (no-registry build) the wheelhouse."""
    folder = HERE / "sglang"
    dockerfile = folder / ("Dockerfile.local" if variant == "local" else "Dockerfile")
    out = [("Dockerfile", dockerfile), ("commands.json", commands)]
    out += [(n, folder / n) for n in ("overlay.sh", "smoke.py", "gpuarch.py")]
    out += [("ddtree/" + f.relative_to(source_dir).as_posix(), f) for f in sorted(source_dir.rglob("*")) if f.is_file()]
    if variant == "local":
        out += _wheelhouse("sglang", HERE / "sglang" / "requirements.lock", "sglang")
    return out


def build_sglang(variant: str, fork_git: Path, tag: str | None = None, build_args: dict[str, str] | None = None,
                 evidence: Path | None = EVIDENCE) -> Built:
    """An SGLang+DDTree image of the one pin; the DDTree source comes from fork_git, a local clone.

    'local' needs no registry (the debootstrap base with CPython 3.12, the pinned wheelhouse);
    'blackwell' and 'hopper' start from the registry's SGLang image. The smoke check runs in the
    build; its result is then labelled onto the image, and the build's evidence is written under
    results/images/."""
    from containers.offline.archive import BundleError
    from containers.sglang_source import export

    if variant not in SGLANG_VARIANTS:
        raise BuildError(f"no SGLang variant '{variant}'; variants: {', '.join(SGLANG_VARIANTS)}")
    tag = tag or sglang_tag(variant)
    if variant != "local":
        registry_base(build_args or {})   # before the export: a missing digest stops the build at once
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ddbench-sglang-ctx-") as tmp:
        try:
            source = export(Path(fork_git), Path(tmp) / "ddtree")
        except (BundleError, OSError) as e:  # a missing commit, a cherry-pick that does not apply: say which
            raise BuildError(f"DDTree source from {fork_git}: {e}") from None
        commands = Path(tmp) / "commands.json"
        commands.write_text(json.dumps(sglang_commands(), indent=1) + "\n")
        files = sglang_files(variant, Path(tmp) / "ddtree", commands)
        args = {**sglang_build_args(variant, source), **(build_args or {})}
        if variant == "local":
            lock = (HERE / "sglang" / "requirements.lock").read_bytes()
            args["LOCK_SHA256"] = hashlib.sha256(lock).hexdigest()
        with _context(files) as context:
            _build(context, tag, args, pull=variant != "local", echo=True)
    smoke = json.loads(_read_from_image(tag, "/opt/ddbench-sglang/smoke.json"))
    overlay = json.loads(_read_from_image(tag, "/opt/ddbench-sglang/overlay.json"))
    _label(tag, {"ddbench.smoke.ok": str(smoke["ok"]).lower(),
                 "ddbench.smoke.sha256": hashlib.sha256(json.dumps(smoke, sort_keys=True).encode()).hexdigest(),
                 "ddbench.sm": ",".join(map(str, smoke["need_sm"]))})
    built = Built(tag, _image_id(tag), time.monotonic() - t0, False)
    if evidence is not None:
        _write_evidence(evidence, variant, built, args, source, smoke, overlay)
    return built


def _wheelhouse(name: str, lock: Path, hint: str, root: Path = REPO_ROOT / "wheelhouse") -> list[tuple[str, Path]]:
    """The wheelhouse of one image, refused unless it was made from the lock the image installs."""
    wheels = root / name
    got = wheels / "requirements.lock"
    if not got.is_file():
        raise BuildError(f"{wheels}: no wheelhouse; make it with `python -m containers.wheelhouse --variant {hint}`")
    if got.read_bytes() != lock.read_bytes():
        raise BuildError(f"{got} differs from {lock.relative_to(REPO_ROOT)}; "
                         f"re-run `python -m containers.wheelhouse --variant {hint}`")
    return [(f"wheelhouse/{p.name}", p) for p in sorted(wheels.iterdir()) if p.is_file()]


def _read_from_image(tag: str, path: str) -> str:
    out = client().containers.run(tag, ["cat", path], remove=True, network_disabled=True, entrypoint=[])
    return out.decode()


def _label(tag: str, labels: dict[str, str]) -> None:
    """Add labels known only after the build (the smoke result): a one-line build on top, same tag."""
    lines = [f"FROM {_image_id(tag)}", "LABEL " + " ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))]
    with tempfile.TemporaryDirectory() as tmp:
        df = Path(tmp) / "Dockerfile"
        df.write_text("\n".join(lines) + "\n")
        with _context([("Dockerfile", df)]) as context:
            _build(context, tag, {})


def _write_evidence(root: Path, variant: str, built: Built, args: dict, source: dict, smoke: dict,
                    overlay: dict) -> Path:
    from ddbench.core.results import write_json_atomic

    image = client().images.get(built.tag)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = root / f"sglang-{variant}" / stamp / "build.json"
    doc = {"command": " ".join(["python -m containers.images build", f"sglang-{variant}", "--fork-git DIR"]),
           "tag": built.tag, "image_id": built.image_id, "size_bytes": image.attrs.get("Size"),
           "wall_s": round(built.seconds, 1), "labels": image.labels, "build_args": args, "source": source,
           "overlay": overlay, "smoke": smoke,
           "host": {"cores": os.cpu_count(), "docker": client().version().get("Version")},
           "built": stamp}
    write_json_atomic(out, doc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.images", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build one image")
    b.add_argument("image", choices=["base", "base-py312", "refengine-cpu", "refengine-cuda",
                                      *(f"sglang-{v}" for v in SGLANG_VARIANTS)])
    b.add_argument("--tag")
    b.add_argument("--base", help=f"refengine: base image instead of the pinned one (e.g. {BASE_TAG})")
    b.add_argument("--build-arg", action="append", default=[], metavar="K=V")
    b.add_argument("--force", action="store_true", help="base: rebuild an existing tag")
    b.add_argument("--fork-git", type=Path, default=os.environ.get("DDTREE_FORK_GIT"),
                   help="sglang-*: a local clone of the pin's DDTree fork (default $DDTREE_FORK_GIT)")
    b.add_argument("--python", type=Path, help="base-py312: a CPython 3.12 prefix (default: python3.12's)")
    a = ap.parse_args(argv)
    try:
        args = dict(kv.split("=", 1) for kv in a.build_arg)
    except ValueError:
        ap.error(f"--build-arg takes K=V, got {a.build_arg}")
    try:
        if a.image == "base":
            built = build_base(a.tag or BASE_TAG, force=a.force)
        elif a.image == "base-py312":
            built = build_base(a.tag or BASE_PY312_TAG, force=a.force, cpython=a.python or cpython312())
        elif a.image.startswith("refengine-"):
            built = build_refengine(a.image.split("-", 1)[1], base=a.base, tag=a.tag, build_args=args)
        else:
            if a.fork_git is None:
                ap.error(f"{a.image} needs --fork-git DIR (or DDTREE_FORK_GIT): a clone of the DDTree fork")
            built = build_sglang(a.image.split("-", 1)[1], a.fork_git, tag=a.tag, build_args=args)
    except BuildError as e:
        print(f"containers.images: {e}", file=sys.stderr)
        return 1
    how = "reused (inputs unchanged)" if built.cached else f"built in {built.seconds:.1f} s"
    print(f"{built.tag} {built.image_id} {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
