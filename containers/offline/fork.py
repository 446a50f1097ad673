"""The `sglang-ddtree` layer: the pinned DDTree fork's python/sglang, fixed, trimmed, packed for the GPU machine.

    DDTREE_FORK_GIT=DIR just offline-bundle sglang-ddtree
    python -m containers.offline.bundle build sglang-ddtree --fork-git DIR     # the same

DIR is a local git checkout or bare clone holding the pin's commits (containers/sglang/pin.toml:
the fork's `ddtree.commit` and each `ddtree.cherry_pick` commit; ddbench's own `ddtree.patch` files are
applied after the picks), e.g. what `fetch
github:Rancy-Wang/sglang` brings (the fork carries sgl-project's history, so the upstream fix is
in it). The build makes a throw-away clone of DIR under the system temp dir (`git clone
--shared`), checks the fork commit out, cherry-picks the pinned upstream fixes onto it (`git
cherry-pick -x`, committer identity and date fixed, so the resulting commit's SHA is the same on
every build), and packs the resulting commit's `python/sglang` tree, read from git objects (so
nothing untracked or generated slips in), into .offline/sglang-ddtree/ as containers/offline/archive.py
does for wheels: sorted, fixed mtime, one xz preset. Trimmed as the stock layer (diffusion
serving, the Rust gRPC `_core`), plus tests, docs and symlinks. The fork's code never enters
ddbench's tree: only under the ignored .offline/, and the committed manifest
(containers/offline/sglang-ddtree.manifest.json) records the repo, the fork SHA, each cherry-picked
SHA and the commit it became, the resulting tree SHAs, and the archive's and parts' sha256.

On the device, `setup.sh harness sglang sglang-ddtree` unpacks it into /tmp/site-sglang-ddtree
and puts that first on PYTHONPATH: its `sglang` package shadows the stock layer's whole (as the
trial of 2026-12-01 replaced the package directory), while sglang-kernel, flashinfer and
transformers stay the stock layer's. The stock layer stays untouched beside it, so `setup.sh
harness sglang` (without the fork) still serves the stock release, and the overlay check
(ddbench/diagnostics/overlay_check.py) switches between the two by PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import tomllib
from pathlib import Path

from containers.offline import archive
from containers.offline.layers import HERE, PYTHON_VERSION, SGLANG, Trim
from containers.sglang_pin import PIN_FILE, Patch, Pin, PinError, pin
from ddbench.core.manifest import file_sha256

NAME = "sglang-ddtree"
MANIFEST = HERE / f"{NAME}.manifest.json"
PART_SIZE = 13_300_000
PACKAGE = "python/sglang"
ENV_GIT = "DDTREE_FORK_GIT"
# the fork's DDTree worker and the fixed drafter, imported on the device right after unpacking
# (the stock layer's smoke imports, server_args and http_server, then also run on the fork)
SMOKE = ("sglang.srt.speculative.ddtree_worker", "sglang.srt.models.dflash")
# a fixed committer for the cherry-picks: the resulting commit SHA is then reproducible
COMMITTER = {"GIT_COMMITTER_NAME": "ddbench", "GIT_COMMITTER_EMAIL": "ddbench@invalid",
             "GIT_COMMITTER_DATE": "1980-01-01T00:00:00+0000"}
TRIMS = (*SGLANG.trims_for("sglang"),
         Trim("sglang", drop=("sglang/*/tests/*", "sglang/*/docs/*", "*.md"),
              why="tests and docs of the fork's tree: nothing the server imports reads them"))
PYPROJECT_PINS = ("sglang-kernel", "flashinfer-python", "flashinfer_python", "torch", "transformers")


def _git(*args: str, cwd: Path | None = None, env: dict | None = None, data: bytes | None = None) -> bytes:
    full = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
            **(env or {})}
    proc = subprocess.run(["git", *args], cwd=cwd, env=full, input=data, capture_output=True)
    if proc.returncode != 0:
        raise archive.BundleError(f"git {' '.join(args)} failed:\n{proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout


def _text(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    return _git(*args, cwd=cwd, env=env).decode().strip()


def has_commit(git_dir: Path, sha: str) -> bool:
    return subprocess.run(["git", "-C", str(git_dir), "cat-file", "-e", f"{sha}^{{commit}}"],
                          capture_output=True).returncode == 0


def checkout(git_dir: Path, p: Pin, work: Path) -> tuple[list[dict], list[dict]]:
    """Clone git_dir into work at the pin's commit, cherry-pick its fixes and apply ddbench's patches;
    one record per pick and per patch."""
    missing = [sha for sha in [p.commit, *(c.commit for c in p.cherry_picks)] if not has_commit(git_dir, sha)]
    if missing:
        raise archive.BundleError(f"{git_dir} does not hold {', '.join(missing)}: give a clone of {p.repo} "
                                  f"(which carries the upstream history of the cherry-picks)")
    _git("clone", "-q", "--shared", "--no-checkout", str(git_dir), str(work))
    _git("-c", "advice.detachedHead=false", "checkout", "-q", "--detach", p.commit, cwd=work)
    picks = []
    for cp in p.cherry_picks:
        subject = _text("log", "-1", "--format=%s", cp.commit, cwd=work)
        rec = {"repo": cp.repo, "commit": cp.commit, "subject": subject}
        if subprocess.run(["git", "merge-base", "--is-ancestor", cp.commit, "HEAD"], cwd=work).returncode == 0:
            picks.append({**rec, "result": None, "already_in_history": True})
            continue
        try:
            _git("-c", f"user.name={COMMITTER['GIT_COMMITTER_NAME']}",
                 "-c", f"user.email={COMMITTER['GIT_COMMITTER_EMAIL']}", "-c", "commit.gpgsign=false",
                 "cherry-pick", "-x", cp.commit, cwd=work, env=COMMITTER)
        except archive.BundleError as e:
            conflicts = subprocess.run(["git", "diff", "--name-only", "--diff-filter=U"], cwd=work,
                                       capture_output=True, text=True).stdout.split()
            subprocess.run(["git", "cherry-pick", "--abort"], cwd=work, capture_output=True)
            raise archive.BundleError(f"cherry-picking {cp.commit} onto {p.commit} does not apply cleanly "
                                      f"(conflicts: {', '.join(conflicts) or '?'}):\n{e}") from None
        changed = _text("diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD", cwd=work).split()
        picks.append({**rec, "result": _text("rev-parse", "HEAD", cwd=work), "files": changed})
    return picks, [apply_patch(q, work) for q in p.patches]


def apply_patch(q: Patch, work: Path) -> dict:
    """git apply one of ddbench's patches (checked against its pinned sha256) and commit it as ddbench."""
    try:
        data = q.check()
    except PinError as e:
        raise archive.BundleError(str(e)) from None
    try:
        _git("apply", "--index", "--whitespace=nowarn", cwd=work, data=data)
    except archive.BundleError as e:
        raise archive.BundleError(f"ddbench patch {q.file} does not apply to {_text('rev-parse', 'HEAD', cwd=work)} "
                                  f"(re-make it against the pin):\n{e}") from None
    author = {"GIT_AUTHOR_NAME": COMMITTER["GIT_COMMITTER_NAME"], "GIT_AUTHOR_EMAIL": COMMITTER["GIT_COMMITTER_EMAIL"],
              "GIT_AUTHOR_DATE": COMMITTER["GIT_COMMITTER_DATE"], **COMMITTER}
    _git("-c", "commit.gpgsign=false", "commit", "-q", "-m", f"ddbench patch {Path(q.file).name}", cwd=work,
         env=author)
    changed = _text("diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD", cwd=work).split()
    return {"file": q.file, "sha256": q.sha256, "result": _text("rev-parse", "HEAD", cwd=work), "files": changed}


def tree_files(work: Path) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(mode, blob sha, site path) of every regular file under python/sglang at HEAD, and what is not one."""
    out = _git("ls-tree", "-r", "-z", "--full-tree", "HEAD", PACKAGE, cwd=work)
    files, other = [], []
    for item in out.split(b"\0"):
        if not item:
            continue
        meta, path = item.decode().split("\t", 1)
        mode, kind, sha = meta.split()
        site = "sglang/" + path.removeprefix(PACKAGE + "/")
        if kind == "blob" and mode in ("100644", "100755"):
            files.append((mode, sha, site))
        else:  # symlinks (120000), submodules: a wheel would not carry them either
            other.append(site)
    return files, other


def read_blobs(work: Path, shas: list[str]) -> dict[str, bytes]:
    out = _git("cat-file", "--batch", cwd=work, data="".join(s + "\n" for s in shas).encode())
    blobs, pos = {}, 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        sha, kind, size = out[pos:end].decode().split()
        start = end + 1
        blobs[sha] = out[start:start + int(size)]
        pos = start + int(size) + 1
    return blobs


def pyproject_pins(work: Path) -> dict[str, str]:
    """The compiled parts' pins in the fork's own python/pyproject.toml (recorded, not used)."""
    try:
        doc = tomllib.loads(_git("show", "HEAD:python/pyproject.toml", cwd=work).decode())
    except (archive.BundleError, tomllib.TOMLDecodeError):
        return {}
    out = {}
    for dep in doc.get("project", {}).get("dependencies", []):
        name, sep, version = dep.split(";")[0].partition("==")
        name = name.split("[")[0].strip()
        if sep and name in PYPROJECT_PINS:
            out[name.replace("_", "-")] = version.strip()
    return out


def stock_paths(wheel: Path) -> set[str]:
    """The stock sglang wheel's sglang/ files after the stock layer's trims."""
    entries, _ = archive.wheel_entries(wheel, "sglang")
    trims = SGLANG.trims_for("sglang")
    return {e.path for e in entries if e.path.startswith("sglang/") and not any(t.removes(e.path) for t in trims)}


def build(git_dir: Path, root: Path, manifest: Path | None = MANIFEST, p: Pin | None = None,
          stock_wheel: Path | None = None, part_size: int | tuple[int, ...] = PART_SIZE) -> dict:
    p = p or pin()
    git_dir = Path(git_dir)
    if not git_dir.exists():
        raise archive.BundleError(f"{git_dir}: no such git directory (a checkout or bare clone of {p.repo})")
    with tempfile.TemporaryDirectory(prefix="ddbench-fork-") as tmp:
        work = Path(tmp) / "sglang"
        picks, patches = checkout(git_dir, p, work)
        head = _text("rev-parse", "HEAD", cwd=work)
        tree = _text("rev-parse", "HEAD^{tree}", cwd=work)
        package_tree = _text("rev-parse", f"HEAD:{PACKAGE}", cwd=work)
        files, not_files = tree_files(work)
        kept = [f for f in files if not any(t.removes(f[2]) for t in TRIMS)]
        dropped = [f[2] for f in files if any(t.removes(f[2]) for t in TRIMS)]
        blobs = read_blobs(work, sorted({sha for _, sha, _ in kept}))
        fork_pins = pyproject_pins(work)
    entries = [archive.Entry(path, NAME, len(blobs[sha]), mode == "100755", lambda d=blobs[sha]: d)
               for mode, sha, path in sorted(kept, key=lambda f: f[2])]
    out = root / "build" / f"{NAME}.tar.xz"
    stats = archive.write_tar_xz(entries, out)
    parts = archive.split(out, part_size, root / NAME)
    kept_paths = [f[2] for f in kept]
    comparison = None
    if stock_wheel is not None:
        stock = stock_paths(stock_wheel)
        only_stock = sorted(stock - set(kept_paths))
        comparison = {"wheel": stock_wheel.name, "only_in_fork": len(set(kept_paths) - stock),
                      "only_in_stock": len(only_stock),
                      # what the stock package has and the fork's lacks: shadowed away on the device
                      "only_in_stock_paths": archive.collapse(only_stock, kept_paths)}
    doc = {
        "layer": NAME,
        "shadows": "sglang",
        "python": f"cp{PYTHON_VERSION.replace('.', '')}",
        "below": ["harness", "sglang"],
        "source": {"repo": p.repo, "branch": p.branch, "commit": p.commit, "cherry_picks": picks,
                   "patches": patches, "head": head, "tree": tree, "package_tree": package_tree, "label": p.label},
        "pin": {"file": PIN_FILE.relative_to(HERE.parent.parent).as_posix(), "sha256": file_sha256(PIN_FILE)},
        # on the device: what must be on the path beside it (the stock layer's compiled parts, the image's torch)
        "expects": dict(sorted(p.wheels.items())),
        "fork_pyproject_pins": fork_pins,
        "files": {"kept": len(kept), "trimmed": len(dropped), "not_regular": not_files,
                  "trim": [t.why for t in TRIMS], "dropped": archive.collapse(dropped, kept_paths),
                  "vs_stock_wheel": comparison},
        "wheels": [],
        "lock": {"file": None, "sha256": None},
        "archive": {"name": out.name, "sha256": file_sha256(out), "size": out.stat().st_size,
                    "xz_preset": archive.XZ_PRESET, **stats},
        "part_size": part_size,
        "parts_dir": f".offline/{NAME}",
        "parts": parts,
        "smoke": list(SMOKE),
    }
    if manifest is not None:
        tmp = manifest.with_name(f".{manifest.name}.tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        tmp.replace(manifest)
    return doc


def summary(doc: dict) -> str:
    s, a = doc["source"], doc["archive"]
    lines = [f"{NAME}: {s['repo']}@{s['commit']}"]
    for cp in s["cherry_picks"]:
        state = "already in its history" if cp.get("already_in_history") else f"-> {cp['result']}"
        lines.append(f"  cherry-pick {cp['commit']} ({cp['subject']}) {state}")
    for q in s.get("patches") or []:
        lines.append(f"  patch {q['file']} -> {q['result']} ({', '.join(q['files'])})")
    lines.append(f"  head {s['head']}, tree {s['tree']}, python/sglang tree {s['package_tree']}")
    lines.append(f"  {doc['files']['kept']} files ({a['unpacked_bytes'] / 1e6:.1f} MB unpacked; "
                 f"{doc['files']['trimmed']} trimmed) -> {a['name']} {a['size'] / 1e6:.2f} MB, sha256 {a['sha256']}")
    lines += [f"  part {q['name']}: {q['size'] / 1e6:.2f} MB" for q in doc["parts"]]
    lines.append(f"  fork's own pins {doc['fork_pyproject_pins']}; runs on {doc['expects']}")
    lines.append(f"  carry {doc['parts_dir']}; on the device: setup.sh harness sglang {NAME}; "
                 f"manifest containers/offline/{NAME}.manifest.json")
    return "\n".join(lines)
