"""The SGLang+DDTree images' inputs, assembled here without Docker: the DDTree export from a fake
fork, the build context and its build args from the pin, the overlay onto an installed package,
the GPU-architecture reader on hand-made device code, and the profiles that name the images."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from test_offline_fork import fake_fork  # noqa: F401 - the fixture

from containers import images
from containers.sglang import gpuarch
from containers.sglang_pin import pin
from containers.sglang_source import export
from ddbench.core.profile import PROFILES_DIR, load_profile

pytestmark = pytest.mark.unit
SGLANG = Path(images.HERE) / "sglang"


def test_export_writes_the_picked_commits_python_sglang_and_what_it_was(fake_fork, tmp_path):  # noqa: F811
    rec = export(fake_fork["bare"], tmp_path / "ddtree", fake_fork["pin"])
    root = tmp_path / "ddtree"
    assert (root / "sglang/srt/speculative/ddtree_worker.py").read_text() == "class DDTreeWorker: ...\n"
    # the cherry-picked upstream fix is in, and the tree is whole (untrimmed: tests, gRPC core, multimodal)
    assert "get_rope_config" in (root / "sglang/srt/models/dflash.py").read_text()
    for kept in ("sglang/jit_kernel/tests/test_x.py", "sglang/srt/grpc/_core.abi3.so", "sglang/multimodal_gen/x.py"):
        assert (root / kept).is_file(), kept
    assert not (root / "sglang/srt/.clang-format").exists()  # a symlink out of the package
    assert not (root / "rust").exists() and not (root / "pyproject.toml").exists()
    assert os.access(root / "sglang/launch.sh", os.X_OK)
    assert rec["commit"] == fake_fork["ddtree"] and rec["cherry_picks"][0]["commit"] == fake_fork["fix"]
    assert rec["head"] not in (fake_fork["ddtree"], fake_fork["fix"])
    assert json.loads((root / "source.json").read_text()) == rec
    # the same pin gives the same commit, whoever exports it
    assert export(fake_fork["bare"], tmp_path / "again", fake_fork["pin"])["head"] == rec["head"]


def test_the_build_args_come_from_the_pin():
    p = pin()
    args = images.sglang_build_args("local", {"head": "f" * 40})
    assert args["DDTREE_COMMIT"] == p.commit and args["DDTREE_REPO"] == p.repo and args["SGLANG_VERSION"] == p.sglang
    expect = dict(kv.split("=") for kv in args["EXPECT"].split(","))
    assert expect == {"sglang": p.sglang, **p.wheels}
    assert args["NEED_SM"] == "90,100,120"
    assert images.sglang_build_args("blackwell", {"head": ""})["NEED_SM"] == "100,120"
    assert images.sglang_tag("hopper") == f"ddbench/sglang:{p.sglang}-ddtree-{p.short}-p{len(p.patches)}-hopper"


def test_the_context_holds_the_dockerfile_scripts_commands_and_export(fake_fork, tmp_path):  # noqa: F811
    export(fake_fork["bare"], tmp_path / "ddtree", fake_fork["pin"])
    commands = tmp_path / "commands.json"
    commands.write_text("[]")
    files = dict(images.sglang_files("hopper", tmp_path / "ddtree", commands))
    assert files["Dockerfile"] == SGLANG / "Dockerfile"
    assert {"overlay.sh", "smoke.py", "gpuarch.py", "commands.json", "ddtree/source.json",
            "ddtree/sglang/srt/speculative/ddtree_worker.py"} <= set(files)
    assert not any(n.startswith("wheelhouse/") for n in files)  # the registry image has its wheels


def test_the_no_registry_context_needs_the_pinned_wheelhouse(tmp_path):
    lock = SGLANG / "requirements.lock"
    with pytest.raises(images.BuildError, match="no wheelhouse"):
        images._wheelhouse("sglang", lock, "sglang", root=tmp_path)
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "requirements.lock").write_text("# another lock\n")
    with pytest.raises(images.BuildError, match="differs from containers/sglang/requirements.lock"):
        images._wheelhouse("sglang", lock, "sglang", root=tmp_path)
    (tmp_path / "sglang" / "requirements.lock").write_bytes(lock.read_bytes())
    (tmp_path / "sglang" / "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    names = [n for n, _ in images._wheelhouse("sglang", lock, "sglang", root=tmp_path)]
    assert names == ["wheelhouse/requirements.lock", "wheelhouse/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"]


def test_every_shipped_sglang_command_is_in_the_smoke_checks_list():
    commands = images.sglang_commands()
    shipped = [load_profile(f) for f in sorted(PROFILES_DIR.glob("*.yaml"))]
    expected = {(q.name, a.id) for q in shipped if q.backend.kind == "sglang" for a in q.arms}
    assert {(c["profile"], c["arm"]) for c in commands} == expected
    assert all(c["argv"][:3] == ["python3", "-m", "sglang.launch_server"] for c in commands)


def test_the_sglang_lock_is_the_pins_closure_for_cpython_312():
    p = pin()
    text = (SGLANG / "requirements.lock").read_text()
    lock = dict(re.findall(r"^([a-z0-9-]+)==(\S+) --hash=sha256:[0-9a-f]{64}$", text, re.M))
    assert len(lock) == len([ln for ln in text.splitlines() if ln and not ln.startswith("#")])
    assert lock["sglang"] == p.sglang
    for name, version in p.wheels.items():
        assert lock[name] == version, name
    # CUDA comes from torch's own NVIDIA wheels (13.x), and pip installs itself from the lock
    assert lock["nvidia-cuda-runtime"].startswith("13.") and "pip" in lock
    assert "CPython 3.12" in text.splitlines()[1]


def test_docker_profiles_name_the_pins_images():
    """A fork profile starts one of ddbench's images of the pin; a stock one the registry's image of the
    pinned release, by digest: the base those images are built on."""
    tags = {images.sglang_tag(v) for v in images.SGLANG_VARIANTS}
    docker = [load_profile(f) for f in sorted(PROFILES_DIR.glob("*.yaml"))]
    docker = [q for q in docker if q.backend.kind == "sglang" and q.backend.runtime == "docker"]
    assert {q.name for q in docker} >= {"qwen3-8b-1gpu", "kimi-k2.6-8xrtx6000", "glm5-nvfp4-8xrtx6000",
                                        "qwen3-8b-1gpu-stock"}
    for q in docker:
        if q.backend.ddtree == "fork":
            assert q.backend.image in tags, (q.name, q.backend.image)
        else:
            assert q.backend.ddtree is None and q.backend.image == images.registry_image(), q.name
            assert {a.kind for a in q.arms} <= {"ar", "linear"}, q.name


def test_overlay_replaces_the_packages_files_keeps_its_own_and_records_the_source(tmp_path):
    site = tmp_path / "site"
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("stock\n")
    (site / "sglang" / "_version.py").write_text("__version__ = '0.5.15'\n")
    (site / "sglang" / "srt" / "__pycache__").mkdir()
    src = tmp_path / "ddtree"
    (src / "sglang" / "srt" / "speculative").mkdir(parents=True)
    (src / "sglang" / "__init__.py").write_text("fork\n")
    (src / "sglang" / "srt" / "speculative" / "ddtree_worker.py").write_text("class W: ...\n")
    (src / "source.json").write_text(json.dumps({"repo": "r", "commit": "c" * 40, "head": "h" * 40}))
    record = tmp_path / "overlay.json"
    proc = subprocess.run(["sh", str(SGLANG / "overlay.sh"), str(src), str(record)], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    assert (site / "sglang" / "__init__.py").read_text() == "fork\n"
    assert (site / "sglang" / "_version.py").is_file() and (site / "sglang/srt/speculative/ddtree_worker.py").is_file()
    assert not (site / "sglang" / "srt" / "__pycache__").exists()
    doc = json.loads(record.read_text())
    assert doc["commit"] == "c" * 40 and doc["python_files_changed"] == 2 and doc["package_dir"] == str(site / "sglang")


def test_overlay_refuses_what_is_not_an_export(tmp_path):
    proc = subprocess.run(["sh", str(SGLANG / "overlay.sh"), str(tmp_path), str(tmp_path / "o.json")],
                          capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 1 and "not an export of the DDTree source" in proc.stderr


def fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fatbin as nvcc lays it out: a 16-byte header, then per entry a 64-byte header and its payload."""
    body = b""
    for kind, arch in entries:
        payload = b"\0" * 8
        body += struct.pack("<HHIQIIHHI", kind, 0x101, 64, len(payload), 0, 0, 0, 0, arch).ljust(64, b"\0") + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def cubin(flags: int, abi: int) -> bytes:
    head = bytearray(64)
    head[:4], head[4], head[7], head[8] = b"\x7fELF", 2, 0x41, abi
    struct.pack_into("<H", head, 18, gpuarch.EM_CUDA)
    struct.pack_into("<I", head, 48, flags)
    return bytes(head)


def test_gpuarch_reads_fatbins_inside_a_library_and_bare_cubins(tmp_path):
    lib = tmp_path / "common_ops.abi3.so"
    lib.write_bytes(b"\x7fELF junk" + fatbin([(2, 90), (2, 100), (1, 120)]) + b"more" + fatbin([(2, 120)]))
    new = tmp_path / "k_sm100f.cubin"
    new.write_bytes(cubin(0x06006402, abi=8))   # ELF ABI 8 (CUDA 12.8+): SM in bits 8-15
    old = tmp_path / "k_sm90.cubin"
    old.write_bytes(cubin(0x005A005A, abi=7))   # before: SM in bits 0-7
    (tmp_path / "plain.so").write_bytes(b"\x7fELF no device code")
    found = gpuarch.scan([tmp_path])
    assert found[str(lib)] == {"sass": [90, 100, 120], "ptx": [120]}
    assert found[str(new)] == {"sass": [100], "ptx": []} and found[str(old)] == {"sass": [90], "ptx": []}
    assert str(tmp_path / "plain.so") not in found
    assert gpuarch.union(found) == [90, 100, 120]


def test_a_registry_build_starts_only_from_the_pinned_releases_image_by_digest():
    from containers.sglang_pin import pin

    good = f"lmsysorg/sglang:v{pin().sglang}-cu130@sha256:" + "a" * 64
    assert images.registry_base({"SGLANG_IMAGE": good}) == good
    for bad in ({}, {"SGLANG_IMAGE": good.split("@")[0]}, {"SGLANG_IMAGE": good.replace(pin().sglang, "0.5.15")}):
        with pytest.raises(images.BuildError, match="by digest: give --build-arg SGLANG_IMAGE=lmsysorg/sglang:v"):
            images.registry_base(bad)
    with pytest.raises(images.BuildError, match="by digest"):   # refused before any source is exported
        images.build_sglang("hopper", Path("/nonexistent-fork"), evidence=None)
