"""The sglang-ddtree layer built from a small fake fork (a bare git repo made here): checkout, cherry-pick,
archive, manifest; and the device side of a layer that shadows another. Git runs locally; no network."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from test_offline_bundle import run_setup

from containers.offline import archive, bundle, device, fork
from containers.sglang_pin import CherryPick, Pin

pytestmark = pytest.mark.unit

WHEELS = {"sglang-kernel": "0.4.4", "flashinfer-python": "0.6.12", "transformers": "5.12.1", "torch": "2.11.0"}
ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-06-07T00:00:00+0000",
       "GIT_COMMITTER_DATE": "2026-06-07T00:00:00+0000"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env={**os.environ, **ENV}, check=True,
                          capture_output=True, text=True).stdout.strip()


def write(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)


def commit(repo: Path, files: dict[str, bytes | str], message: str) -> str:
    write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


PYPROJECT = '[project]\nname = "sglang"\ndependencies = ["sglang-kernel==0.4.3", "flashinfer_python[cu13]==0.6.12",\n' \
            '  "torch==2.11.0", "transformers==5.8.1", "numpy"]\n'


@pytest.fixture
def fake_fork(tmp_path):
    """upstream: base -> fix (branch fix); fork: base -> ddtree (branch ddtree); then a bare clone of it all."""
    src = tmp_path / "src"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    base = commit(src, {
        "python/pyproject.toml": PYPROJECT,
        "python/sglang/__init__.py": "",
        "python/sglang/README.md": "docs",
        "python/sglang/srt/models/dflash.py": "rope_theta = float(getattr(config, 'rope_theta', 1000000))\n",
        "python/sglang/srt/server_args.py": "ARGS = 1\n",
        "python/sglang/srt/grpc/_core.abi3.so": b"\x7fELF",
        "python/sglang/jit_kernel/tests/test_x.py": "",
        "python/sglang/multimodal_gen/x.py": "",
        "python/sglang/srt/layers/configs/a.json": "{}",
        "python/sglang/launch.sh": "#!/bin/sh\n",
        "rust/lib.rs": "",
    }, "base")
    os.chmod(src / "python/sglang/launch.sh", 0o755)
    (src / "python/sglang/srt/.clang-format").symlink_to("../../../rust/lib.rs")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "exec bit and a symlink")
    base = git(src, "rev-parse", "HEAD")
    git(src, "checkout", "-q", "-b", "fix")
    fix = commit(src, {"python/sglang/srt/models/dflash.py": "rope_theta, rope_scaling = get_rope_config(config)\n"},
                 "fix dflash rope config parsing")
    git(src, "checkout", "-q", "-b", "ddtree", base)
    ddtree = commit(src, {"python/sglang/srt/speculative/ddtree_worker.py": "class DDTreeWorker: ...\n",
                          "python/sglang/srt/server_args.py": "ARGS = 2\n"}, "support DDTree")
    bare = tmp_path / "fork.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True, capture_output=True)
    pin = Pin(sglang="0.5.15", wheels=WHEELS, repo="https://example.invalid/fork", branch="ddtree", commit=ddtree,
              cherry_picks=(CherryPick("https://example.invalid/upstream", fix, "rope"),))
    return {"bare": bare, "src": src, "pin": pin, "base": base, "fix": fix, "ddtree": ddtree, "tmp": tmp_path}


def build(f, **kw):
    root = f["tmp"] / "repo" / ".offline"
    return fork.build(f["bare"], root, manifest=f["tmp"] / "sglang-ddtree.manifest.json", p=kw.pop("p", f["pin"]),
                      **kw), root


def members(root: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(root / "build" / "sglang-ddtree.tar.xz", "r:xz") as tar:
        return {m.name: m for m in tar.getmembers()}


def read_member(root: Path, name: str) -> str:
    with tarfile.open(root / "build" / "sglang-ddtree.tar.xz", "r:xz") as tar:
        return tar.extractfile(name).read().decode()


def test_build_checks_out_the_fork_cherry_picks_the_fix_and_packs_python_sglang(fake_fork):
    f = fake_fork
    doc, root = build(f, part_size=1000)
    s = doc["source"]
    assert (s["repo"], s["branch"], s["commit"]) == ("https://example.invalid/fork", "ddtree", f["ddtree"])
    [cp] = s["cherry_picks"]
    assert cp["commit"] == f["fix"] and cp["repo"] == "https://example.invalid/upstream"
    assert cp["subject"] == "fix dflash rope config parsing" and cp["files"] == ["python/sglang/srt/models/dflash.py"]
    assert len(cp["result"]) == 40 and cp["result"] not in (f["fix"], f["ddtree"]) and s["head"] == cp["result"]
    assert len(s["tree"]) == 40 and len(s["package_tree"]) == 40
    got = members(root)
    assert read_member(root, "sglang/srt/models/dflash.py").startswith("rope_theta, rope_scaling = get_rope_config")
    assert read_member(root, "sglang/srt/server_args.py") == "ARGS = 2\n"  # the fork's, not the base's
    assert "sglang/srt/speculative/ddtree_worker.py" in got and "sglang/srt/layers/configs/a.json" in got
    for gone in ("sglang/README.md", "sglang/srt/grpc/_core.abi3.so", "sglang/jit_kernel/tests/test_x.py",
                 "sglang/multimodal_gen/x.py", "sglang/srt/.clang-format"):
        assert gone not in got, gone
    assert not any(n.startswith(("rust", "python")) for n in got)  # only the package, at the site root
    assert got["sglang/launch.sh"].mode == 0o755 and got["sglang/__init__.py"].mode == 0o644
    assert doc["files"]["not_regular"] == ["sglang/srt/.clang-format"]
    assert {"sglang/README.md", "sglang/multimodal_gen/", "sglang/jit_kernel/"} <= set(doc["files"]["dropped"])


def test_build_manifest_records_what_travels(fake_fork):
    f = fake_fork
    doc, root = build(f, part_size=200)
    on_disk = json.loads((f["tmp"] / "sglang-ddtree.manifest.json").read_text())
    assert on_disk == doc
    out = root / "build" / "sglang-ddtree.tar.xz"
    assert doc["archive"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert doc["archive"]["size"] == out.stat().st_size == sum(p["size"] for p in doc["parts"])
    assert len(doc["parts"]) >= 2 and all(p["size"] <= 200 for p in doc["parts"])
    for p in doc["parts"]:
        assert hashlib.sha256((root / "sglang-ddtree" / p["name"]).read_bytes()).hexdigest() == p["sha256"]
    assert (doc["layer"], doc["shadows"], doc["below"], doc["parts_dir"]) == (
        "sglang-ddtree", "sglang", ["harness", "sglang"], ".offline/sglang-ddtree")
    assert doc["expects"] == WHEELS and doc["wheels"] == [] and doc["smoke"] == list(fork.SMOKE)
    assert doc["fork_pyproject_pins"] == {"sglang-kernel": "0.4.3", "flashinfer-python": "0.6.12", "torch": "2.11.0",
                                          "transformers": "5.8.1"}


def test_build_is_reproducible(fake_fork):
    f = fake_fork
    first, _ = build(f)
    second, _ = build(f)
    assert first["archive"]["sha256"] == second["archive"]["sha256"]
    assert first["source"]["head"] == second["source"]["head"]  # fixed committer: the same picked commit


def test_build_compares_with_the_stock_wheel(fake_fork, tmp_path):
    wheel = tmp_path / "sglang-0.5.15-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("sglang/__init__.py", "sglang/_version.py", "sglang/srt/server_args.py",
                     "sglang/srt/grpc/_core.abi3.so", "sglang-0.5.15.dist-info/METADATA"):
            zf.writestr(name, b"")
    doc, _ = build(fake_fork, stock_wheel=wheel)
    v = doc["files"]["vs_stock_wheel"]
    assert v["only_in_stock_paths"] == ["sglang/_version.py"]  # _core is trimmed from both
    assert v["only_in_stock"] == 1 and v["only_in_fork"] >= 3


def test_a_fix_already_in_the_forks_history_is_recorded_not_picked(fake_fork):
    f = fake_fork
    merged = replace(f["pin"], commit=f["fix"], cherry_picks=(CherryPick("u", f["base"]),))
    doc, _ = build(f, p=merged)
    [cp] = doc["source"]["cherry_picks"]
    assert cp["already_in_history"] is True and cp["result"] is None and doc["source"]["head"] == f["fix"]


def test_a_conflicting_cherry_pick_fails_and_names_the_file(fake_fork):
    f = fake_fork
    git(f["src"], "checkout", "-q", "-b", "clash", f["base"])
    clash = commit(f["src"], {"python/sglang/srt/server_args.py": "ARGS = 9\n"}, "clash")
    git(f["bare"], "fetch", "-q", str(f["src"]), "clash:clash")
    bad = replace(f["pin"], cherry_picks=(CherryPick("u", clash),))
    with pytest.raises(archive.BundleError, match=r"does not apply cleanly \(conflicts: python/sglang/srt/server_args"):
        build(f, p=bad)


def test_a_clone_without_the_pinned_commits_is_refused(fake_fork):
    f = fake_fork
    missing = replace(f["pin"], commit="0" * 40)
    with pytest.raises(archive.BundleError, match=f"does not hold {'0' * 40}"):
        build(f, p=missing)
    with pytest.raises(archive.BundleError, match="no such git directory"):
        fork.build(f["tmp"] / "nope", f["tmp"], manifest=None, p=f["pin"])


def test_bundle_cli_needs_a_fork_clone(monkeypatch, capsys):
    monkeypatch.delenv(fork.ENV_GIT, raising=False)
    assert bundle.main(["build", "sglang-ddtree"]) == 1
    assert f"give --fork-git DIR or set {fork.ENV_GIT}=DIR" in capsys.readouterr().err


def test_the_shipped_manifest_is_the_pins_build():
    from containers.sglang_pin import pin

    if not fork.MANIFEST.is_file():
        pytest.skip("sglang-ddtree not built")
    doc = json.loads(fork.MANIFEST.read_text())
    p = pin()
    assert doc["source"]["commit"] == p.commit and doc["source"]["repo"] == p.repo
    assert [c["commit"] for c in doc["source"]["cherry_picks"]] == [c.commit for c in p.cherry_picks]
    assert doc["expects"] == dict(sorted(p.wheels.items()))
    assert sum(q["size"] for q in doc["parts"]) == doc["archive"]["size"]


# ---------------------------------------------------------------- the device: a layer that shadows another


@pytest.fixture
def stock_and_fork(tmp_path, monkeypatch):
    """A stock layer `toy` (package toyb, VALUE 42) and a layer `toy-fork` shadowing it (toyb, VALUE 7)."""
    monkeypatch.setattr(device, "SITE_ROOT", tmp_path / "sites")
    (tmp_path / "manifests").mkdir()
    root = tmp_path / "repo" / ".offline"

    def layer(name, files, **extra):
        out = root / "build" / f"{name}.tar.xz"
        archive.write_tar_xz([archive.Entry(p, name, len(d), False, lambda d=d: d) for p, d in files.items()], out)
        parts = archive.split(out, 10_000, root / name)
        doc = {"layer": name, "wheels": [], "lock": {"sha256": None}, "parts": parts, "parts_dir": f".offline/{name}",
               "archive": {"name": out.name, "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
                           "size": out.stat().st_size, "files": len(files)}, **extra}
        (tmp_path / "manifests" / f"{name}.manifest.json").write_text(json.dumps(doc))
        return doc

    layer("toy", {"toyb/__init__.py": b"VALUE = 42\n",
                  "toyb-2.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: toyb\nVersion: 2.0\n"})
    fork_doc = layer("toy-fork", {"toyb/__init__.py": b"VALUE = 7\n", "toyb/ddtree.py": b""}, shadows="toy",
                     below=["toy"], expects={"toyb": "2.0"},
                     source={"repo": "r", "commit": "c" * 40, "label": "r@cccccccc"})
    return tmp_path, fork_doc


def test_a_shadowing_layer_goes_first_on_the_path_and_leaves_the_stock_one_whole(stock_and_fork, capsys):
    tmp_path, _ = stock_and_fork
    stock, shadow = tmp_path / "sites" / "site-toy", tmp_path / "sites" / "site-toy-fork"
    rc, out, err = run_setup(tmp_path, capsys, "toy", "toy-fork")
    assert rc == 0, err
    assert out == f"export PYTHONPATH={shadow}:{stock}${{PYTHONPATH:+:$PYTHONPATH}}\n"
    assert (shadow / "toyb" / "__init__.py").read_text() == "VALUE = 7\n"
    assert (stock / "toyb" / "__init__.py").read_text() == "VALUE = 42\n"
    assert not (stock / "toyb" / "ddtree.py").exists()
    assert "shadowing toy" in err and "r@cccccccc" in err
    marker = json.loads((shadow / device.MARKER).read_text())
    assert marker["layer"] == "toy-fork" and marker["shadows"] == "toy" and marker["source"]["commit"] == "c" * 40
    assert [p["sha256"] for p in marker["parts"]]
    rc, out, err = run_setup(tmp_path, capsys, "toy")  # the stock path: no fork on it
    assert rc == 0 and out == f"export PYTHONPATH={stock}${{PYTHONPATH:+:$PYTHONPATH}}\n"


def test_a_shadowing_layer_refuses_other_versions_than_it_was_pinned_to(stock_and_fork, capsys):
    tmp_path, doc = stock_and_fork
    doc["expects"] = {"toyb": "3.0", "not-there": "1"}
    (tmp_path / "manifests" / "toy-fork.manifest.json").write_text(json.dumps(doc))
    rc, out, err = run_setup(tmp_path, capsys, "toy", "toy-fork")
    assert rc == 1 and out == ""
    assert "toy-fork was pinned to run on toyb 3.0: found 2.0" in err and "not-there 1: not installed" in err


def test_a_shadowing_layer_needs_its_stock_layer_first(stock_and_fork, capsys):
    tmp_path, _ = stock_and_fork
    rc, _, err = run_setup(tmp_path, capsys, "toy-fork")
    assert rc == 1 and "toy-fork needs layer toy before it" in err


# ---------------------------------------------------------------- what a run manifest records


def test_the_run_manifest_names_the_bundles_and_the_sglang_that_serves(tmp_path, monkeypatch):
    import importlib
    import sys

    from ddbench.core import manifest

    stock, shadow = tmp_path / "site-sglang", tmp_path / "site-sglang-ddtree"
    for site, layer in ((stock, "sglang"), (shadow, "sglang-ddtree")):
        write(site, {"sglang/__init__.py": "", device.MARKER: json.dumps({"layer": layer, "archive_sha256": "a" * 64,
                                                                          "source": {"commit": "c" * 40}})})
    monkeypatch.setenv("PYTHONPATH", f"{shadow}:{stock}")
    assert [b["layer"] for b in manifest.offline_bundles()] == ["sglang-ddtree", "sglang"]
    assert manifest.offline_bundles()[0]["site"] == str(shadow)
    monkeypatch.setattr(sys, "path", [str(shadow), str(stock), *sys.path])
    importlib.invalidate_caches()
    got = manifest.sglang_source()
    assert got == {"site": str(shadow), "layer": "sglang-ddtree", "source": {"commit": "c" * 40}}
    monkeypatch.setattr(sys, "path", [str(stock), *sys.path[2:]])
    importlib.invalidate_caches()
    assert manifest.sglang_source()["layer"] == "sglang"
