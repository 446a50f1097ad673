"""The offline GPU bundles on small synthetic wheels: lock parsing, trims, the deterministic tar.xz, parts,
the manifest, and the device side (parts accumulated over calls, unpack, checks). No download."""

from __future__ import annotations

import hashlib
import json
import lzma
import tarfile
import zipfile
from pathlib import Path

import pytest

from containers.offline import archive, bundle, device, layers, lock
from containers.offline.layers import Layer, Trim, canonical

pytestmark = pytest.mark.unit

SHA = "ab" * 32


def make_wheel(path: Path, dist: str, version: str, files: dict[str, bytes], requires: list[str] = (),
               executable: tuple[str, ...] = ()) -> Path:
    """A minimal wheel: the files, a .dist-info with METADATA (and Requires-Dist)."""
    info = f"{dist.replace('-', '_')}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        members = {**files, f"{info}/METADATA": meta.encode(), f"{info}/WHEEL": b"Wheel-Version: 1.0\n"}
        for name, data in members.items():
            zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if name in executable else 0o644) << 16
            zf.writestr(zi, data)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- lock files


def test_lock_parse_reads_pins_and_skips_comments():
    text = f"# header\n\nfoo-bar==1.2.3 --hash=sha256:{SHA}  # foo_bar-1.2.3-py3-none-any.whl\n"
    [pin] = lock.parse(text, "x.lock")
    assert (pin.name, pin.version, pin.sha256) == ("foo-bar", "1.2.3", SHA)
    assert pin.filename == "foo_bar-1.2.3-py3-none-any.whl"
    assert lock.parse(pin.line() + "\n") == [pin]


@pytest.mark.parametrize("line, words", [
    ("foo==1 --hash=sha256:abc  # foo-1-py3-none-any.whl", "x.lock:1: not"),
    (f"foo==1 --hash=sha256:{SHA}", "file name is missing"),
    ("foo>=1", "x.lock:1: not"),
])
def test_lock_parse_errors_name_file_and_line(line, words):
    with pytest.raises(lock.LockError, match=words):
        lock.parse(line, "x.lock")


def test_lock_parse_refuses_a_package_pinned_twice():
    a = f"Foo_Bar==1 --hash=sha256:{SHA}  # a-1-py3-none-any.whl"
    b = f"foo.bar==2 --hash=sha256:{SHA}  # b-2-py3-none-any.whl"
    with pytest.raises(lock.LockError, match=r"x.lock:2: foo.bar is pinned twice \(first on line 1\)"):
        lock.parse(f"{a}\n{b}\n", "x.lock")


def test_lock_read_missing_file_says_how_to_make_it(tmp_path):
    with pytest.raises(lock.LockError, match="bundle lock nothing"):
        lock.read(tmp_path / "nothing.lock")


def test_format_lock_is_sorted_and_lists_what_was_left_out(tmp_path):
    lay = Layer(name="t", closure=True)
    pins = [lock.Pin("zeta", "1", SHA, "zeta-1-py3-none-any.whl"),
            lock.Pin("Alpha", "2", SHA, "alpha-2-py3-none-any.whl")]
    text = lock.format_lock(lay, pins, {"psutil": "locust (psutil>=5.9.1)"})
    assert "#   psutil: locust (psutil>=5.9.1)" in text
    assert [p.name for p in lock.parse(text)] == ["Alpha", "zeta"]


def test_split_requirements_separates_the_alone_ones():
    text = "# c\nsglang==0.5.15  # pinned\nfoo==1\n\nsglang_kernel==0.4.4\n"
    closure, alone = lock.split_requirements(text, {"sglang", "sglang-kernel"})
    assert closure == ["foo==1"]
    assert alone == ["sglang==0.5.15", "sglang_kernel==0.4.4"]


def report_item(name, requires=(), requested=False, extras=()):
    return {"metadata": {"name": name, "version": "1", "requires_dist": list(requires)}, "requested": requested,
            "requested_extras": list(extras),
            "download_info": {"url": f"https://x/{name}-1-py3-none-any.whl",
                              "archive_info": {"hashes": {"sha256": SHA}}}}


def test_carried_follows_extras_and_markers_and_stops_at_provided():
    items = [
        report_item("top", ["mid", "img", "old; python_version < '3.11'", "opt; extra == 'x'"], requested=True),
        report_item("mid", ["sio[client]"]),
        report_item("sio", ["wsc; extra == 'client'"]),
        report_item("wsc"),
        report_item("img", ["tz"]),  # provided by the image: its own needs are the image's business
        report_item("tz"), report_item("old"), report_item("opt"),
    ]
    assert lock.carried(items, {"img"}) == {"top", "mid", "sio", "wsc"}


def test_pin_from_report_refuses_a_missing_hash_or_an_sdist():
    item = report_item("foo")
    assert lock.pin_from_report(item).filename == "foo-1-py3-none-any.whl"
    item["download_info"]["archive_info"] = {}
    with pytest.raises(SystemExit, match="no sha256 for foo"):
        lock.pin_from_report(item)
    item = report_item("foo")
    item["download_info"]["url"] = "https://x/foo-1.tar.gz"
    with pytest.raises(SystemExit, match="not a wheel"):
        lock.pin_from_report(item)


def test_download_checks_every_wheel_against_its_hash(tmp_path):
    wheel = make_wheel(tmp_path / "foo-1-py3-none-any.whl", "foo", "1", {"foo/__init__.py": b""})
    good = lock.Pin("foo", "1", sha256(wheel), wheel.name)
    assert lock.download([good], tmp_path) == {"foo": wheel}
    with pytest.raises(SystemExit, match="delete it and rebuild"):
        lock.download([lock.Pin("foo", "1", SHA, wheel.name)], tmp_path)


# ---------------------------------------------------------------- layers and trims


def test_layers_leave_image_packages_out_unless_carried():
    h = layers.layer("harness")
    assert "psutil" in h.provided() and "typing-extensions" not in h.provided()
    s = layers.layer("sglang")
    assert {"transformers", "tokenizers"}.isdisjoint(s.provided())
    assert s.below == ("harness",)
    with pytest.raises(SystemExit, match="no layer 'nope'"):
        layers.layer("nope")


def test_trim_rules_keep_only_the_hopper_kernels():
    [rule] = layers.SGLANG.trims_for("sglang_kernel")
    assert rule.removes("sgl_kernel/flash_ops.abi3.so")
    assert rule.removes("sgl_kernel/sm100/common_ops.abi3.so")
    assert not rule.removes("sgl_kernel/sm90/common_ops.abi3.so")
    assert not rule.removes("sgl_kernel/spatial_ops.abi3.so")
    assert not rule.removes("sgl_kernel/elementwise.py")
    [tms] = layers.SGLANG.trims_for("torch_memory_saver")
    assert tms.removes("torch_memory_saver_hook_mode_torch_cu12.abi3.so")
    assert tms.removes("torch_memory_saver_hook_mode_torch.abi3.so")
    assert not tms.removes("torch_memory_saver_hook_mode_torch_cu13.abi3.so")


def test_collapse_names_whole_directories_when_nothing_under_them_stays():
    removed = ["a/data/x/1.h", "a/data/x/2.h", "a/data/y.h", "a/b.so", "a/sm100/c.so"]
    kept = ["a/__init__.py", "a/data/keep.txt", "a/sm90/c.so"]
    assert archive.collapse(removed, kept) == ["a/b.so", "a/data/x/", "a/data/y.h", "a/sm100/"]


# ---------------------------------------------------------------- wheels -> tar.xz


def test_wheel_entries_map_data_dirs_and_drop_scripts(tmp_path):
    wheel = make_wheel(tmp_path / "w.whl", "foo", "1", {
        "foo/__init__.py": b"x = 1\n", "foo/_ext.so": b"\x7fELF",
        "foo-1.data/purelib/foo/extra.py": b"", "foo-1.data/platlib/bar.so": b"",
        "foo-1.data/scripts/foo": b"#!/bin/sh\n", "foo-1.data/headers/foo.h": b""}, executable=("foo/_ext.so",))
    entries, elsewhere = archive.wheel_entries(wheel, "foo")
    paths = {e.path: e for e in entries}
    assert {"foo/__init__.py", "foo/_ext.so", "foo/extra.py", "bar.so", "foo-1.dist-info/METADATA"} <= set(paths)
    assert elsewhere == ["foo-1.data/scripts/foo", "foo-1.data/headers/foo.h"]
    assert paths["foo/_ext.so"].executable and not paths["foo/__init__.py"].executable
    assert paths["foo/__init__.py"].read() == b"x = 1\n"


def test_wheel_entries_refuse_unsafe_paths(tmp_path):
    wheel = make_wheel(tmp_path / "w.whl", "foo", "1", {"../evil.py": b""})
    with pytest.raises(archive.BundleError, match="unsafe member path"):
        archive.wheel_entries(wheel, "foo")


def entry(path, data=b"", dist="d", executable=False):
    return archive.Entry(path, dist, len(data), executable, lambda: data)


def test_merge_allows_identical_duplicates_and_refuses_conflicts():
    merged = archive.merge([entry("ns/__init__.py", b"", "a"), entry("ns/__init__.py", b"", "b"), entry("a.py")])
    assert [e.path for e in merged] == ["a.py", "ns/__init__.py"]
    with pytest.raises(archive.BundleError, match="installed by both a and b"):
        archive.merge([entry("x.py", b"1", "a"), entry("x.py", b"2", "b")])


def test_tar_xz_is_deterministic_sorted_and_normalised(tmp_path):
    entries = [entry("b/z.py", b"z"), entry("a.so", b"\x7fELF", executable=True), entry("b/a.py", b"a" * 1000)]
    one, two = tmp_path / "1.tar.xz", tmp_path / "2.tar.xz"
    stats = archive.write_tar_xz(entries, one)
    archive.write_tar_xz(list(reversed(entries)), two)
    assert one.read_bytes() == two.read_bytes()
    assert stats == {"members": 4, "files": 3, "unpacked_bytes": 1005}
    with tarfile.open(one, "r:xz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["a.so", "b", "b/a.py", "b/z.py"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(archive.MTIME, 0, 0, "", "")}
    assert {m.name: m.mode for m in members} == {"a.so": 0o755, "b": 0o755, "b/a.py": 0o644, "b/z.py": 0o644}
    assert lzma.LZMADecompressor().decompress(one.read_bytes())  # plain .xz


def test_tar_xz_extra_files_must_not_collide(tmp_path):
    with pytest.raises(archive.BundleError, match="collides"):
        archive.write_tar_xz([entry("a.py")], tmp_path / "x.tar.xz", {"a.py": b""})


@pytest.mark.parametrize("size, max_part, sizes", [(10, 4, [4, 4, 2]), (8, 4, [4, 4]), (3, 10, [3]), (9, 3, [3, 3, 3])])
def test_split_makes_the_fewest_near_equal_parts(tmp_path, size, max_part, sizes):
    data = bytes(range(size))
    src = tmp_path / "l.tar.xz"
    src.write_bytes(data)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "l.tar.xz.07").write_bytes(b"stale")
    parts = archive.split(src, max_part, tmp_path / "out")
    assert [p["size"] for p in parts] == sizes
    assert [p["name"] for p in parts] == [f"l.tar.xz.{i:02d}" for i in range(1, len(sizes) + 1)]
    assert b"".join((tmp_path / "out" / p["name"]).read_bytes() for p in parts) == data
    assert not (tmp_path / "out" / "l.tar.xz.07").exists()
    assert all(p["sha256"] == sha256(tmp_path / "out" / p["name"]) for p in parts)


@pytest.mark.parametrize("size, caps, sizes", [(35, (13, 23), [13, 22]), (40, (13, 23), [13, 23, 4]),
                                               (5, (13, 23), [5]), (0, 4, [0])])
def test_part_sizes_per_part_caps(size, caps, sizes):
    assert archive.part_sizes(size, caps) == sizes


def test_part_sizes_refuse_non_positive_caps():
    with pytest.raises(archive.BundleError, match="positive"):
        archive.part_sizes(10, (5, 0))
    with pytest.raises(archive.BundleError, match="positive"):
        archive.part_sizes(10, 0)


# ---------------------------------------------------------------- a whole layer, here and on the device


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A two-wheel layer built into tmp_path/repo/.offline, its manifest in tmp_path/manifests."""
    wheels = tmp_path / "repo" / ".offline" / "wheels"
    a = make_wheel(wheels / "toya-1.0-py3-none-any.whl", "toya", "1.0", {
        "toya/__init__.py": b"from toyb import VALUE\n", "toya/big/blob.bin": bytes(5000), "toya/tests/t.py": b""},
        requires=["toyb>=2", "absent-thing; python_version < '3'"])
    b = make_wheel(wheels / "toyb-2.0-py3-none-any.whl", "toyb", "2.0", {"toyb/__init__.py": b"VALUE = 42\n"})
    lay = Layer(name="toy", closure=True, part_size=200, smoke=("toya",),
                trims=(Trim("toya", drop=("toya/big/*", "toya/tests/*"), why="test data"),))
    (tmp_path / "manifests").mkdir()
    lockfile = tmp_path / "manifests" / "toy.lock"
    lockfile.write_text("".join(lock.Pin(n, v, sha256(w), w.name).line() + "\n"
                                for n, v, w in (("toya", "1.0", a), ("toyb", "2.0", b))))
    monkeypatch.setattr(Layer, "lockfile", property(lambda self: lockfile))
    monkeypatch.setattr(device, "SITE_ROOT", tmp_path / "sites")
    return lay, tmp_path


def build_toy(lay, tmp_path):
    return bundle.build(lay, root=tmp_path / "repo" / ".offline", manifest=tmp_path / "manifests" / "toy.manifest.json")


def test_build_writes_parts_and_a_manifest_and_is_reproducible(toy):
    lay, tmp_path = toy
    doc = build_toy(lay, tmp_path)
    first = doc["archive"]["sha256"]
    assert build_toy(lay, tmp_path)["archive"]["sha256"] == first
    on_disk = json.loads((tmp_path / "manifests" / "toy.manifest.json").read_text())
    assert on_disk == doc
    toya = next(w for w in doc["wheels"] if w["name"] == "toya")
    assert toya["dropped"] == ["toya/big/", "toya/tests/"] and toya["dropped_bytes"] == 5000
    assert toya["sha256"] == sha256(tmp_path / "repo" / ".offline" / "wheels" / toya["filename"])
    assert len(doc["parts"]) >= 2 and all(p["size"] <= 200 for p in doc["parts"])
    assert doc["parts_dir"] == ".offline/toy" and doc["smoke"] == ["toya"]
    assert doc["lock"]["sha256"] == sha256(tmp_path / "manifests" / "toy.lock")
    with tarfile.open(tmp_path / "repo" / ".offline" / "build" / "toy.tar.xz", "r:xz") as tar:
        names = tar.getnames()
    assert "toya/big/blob.bin" not in names and "toyb/__init__.py" in names


def run_setup(tmp_path, capsys, *layers_):
    rc = device.main(["setup", *layers_, "--manifests", str(tmp_path / "manifests"), "--repo", str(tmp_path / "repo")])
    out, err = capsys.readouterr()
    return rc, out, err


def test_device_accumulates_parts_over_calls_then_unpacks_once(toy, capsys):
    lay, tmp_path = toy
    doc = build_toy(lay, tmp_path)
    parts_dir = tmp_path / "repo" / ".offline" / "toy"
    held = {p["name"]: (parts_dir / p["name"]).read_bytes() for p in doc["parts"]}
    for p in doc["parts"][1:]:  # the first call carried only part 1
        (parts_dir / p["name"]).unlink()
    rc, out, err = run_setup(tmp_path, capsys, "toy")
    assert rc == device.EXIT_MISSING and out == ""
    assert f"part 2 of {len(doc['parts'])} missing: .offline/toy/toy.tar.xz.02" in err
    for name, data in held.items():  # the next call carries the rest; part 1 stayed on the machine
        (parts_dir / name).write_bytes(data)
    rc, out, err = run_setup(tmp_path, capsys, "toy")
    site = tmp_path / "sites" / "site-toy"
    assert rc == 0, err
    assert out == f"export PYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}}\n"
    assert (site / "toyb" / "__init__.py").read_text() == "VALUE = 42\n"
    assert json.loads((site / device.MARKER).read_text())["archive_sha256"] == doc["archive"]["sha256"]
    assert "imports ok: toya" in err and "requirement:" not in err
    rc, out, err = run_setup(tmp_path, capsys, "toy")  # warm machine: nothing is unpacked again
    assert rc == 0 and "already unpacked" in err


def test_device_refuses_a_part_with_other_bytes(toy, capsys):
    lay, tmp_path = toy
    doc = build_toy(lay, tmp_path)
    (tmp_path / "repo" / ".offline" / "toy" / doc["parts"][0]["name"]).write_bytes(b"x" * doc["parts"][0]["size"])
    rc, _, err = run_setup(tmp_path, capsys, "toy")
    assert rc == device.EXIT_MISSING and "other bytes than the manifest's" in err
    assert device.status(["toy"], tmp_path / "manifests", tmp_path / "repo") == device.EXIT_MISSING


def test_device_reports_an_unmet_requirement_and_a_failed_import(toy, capsys):
    lay, tmp_path = toy
    (tmp_path / "manifests" / "toy.lock").write_text(
        (tmp_path / "manifests" / "toy.lock").read_text().splitlines()[0] + "\n")  # toya alone, without toyb
    build_toy(lay, tmp_path)
    rc, out, err = run_setup(tmp_path, capsys, "toy")
    assert rc == 1 and out == ""
    assert "requirement: toya needs toyb>=2: not installed" in err
    assert "No module named 'toyb'" in err


def test_device_needs_the_layers_below(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "up.manifest.json").write_text(json.dumps({"layer": "up", "below": ["base"]}))
    assert device.main(["setup", "up", "--manifests", str(tmp_path / "m"), "--repo", str(tmp_path)]) == 1
    assert "up needs layer base before it: setup base up" in capsys.readouterr().err


def test_device_script_is_standard_library_only():
    import ast

    tree = ast.parse(Path(device.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    import sys

    assert imported - {"__future__", "packaging"} <= set(sys.stdlib_module_names)


def test_shipped_manifests_match_their_locks():
    for name in layers.LAYERS:
        lay = layers.layer(name)
        if not lay.manifest.is_file():
            continue
        doc = json.loads(lay.manifest.read_text())
        pins = {canonical(p.name): p for p in lock.read(lay.lockfile)}
        assert doc["lock"]["sha256"] == sha256(lay.lockfile), f"{name}: rebuild after re-locking"
        assert {canonical(w["name"]): w["sha256"] for w in doc["wheels"]} == {k: p.sha256 for k, p in pins.items()}
        assert sum(p["size"] for p in doc["parts"]) == doc["archive"]["size"]
        caps = doc["part_size"] if isinstance(doc["part_size"], list) else [doc["part_size"]]
        assert all(p["size"] <= caps[min(i, len(caps) - 1)] for i, p in enumerate(doc["parts"]))


def test_tar_member_bytes_survive(tmp_path):
    data = bytes(range(256)) * 10
    archive.write_tar_xz([entry("x/y.bin", data)], tmp_path / "x.tar.xz")
    with tarfile.open(tmp_path / "x.tar.xz", "r:xz") as tar:
        assert tar.extractfile("x/y.bin").read() == data


# ---------------------------------------------------------------- requirements


def test_unmet_requirements_skip_wheels_taken_alone(tmp_path):
    info = tmp_path / "toyx-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyx\nVersion: 1\nRequires-Dist: not-here-at-all\n")
    doc = {"wheels": [{"name": "toyx"}]}
    assert device.unmet_requirements([doc], [str(tmp_path)]) == ["toyx needs not-here-at-all: not installed"]
    doc["wheels"][0]["requires_checked"] = False
    assert device.unmet_requirements([doc], [str(tmp_path)]) == []


def test_a_shadowed_layer_is_import_checked_as_itself(tmp_path, monkeypatch):
    """The fork's sglang shadows the stock layer's whole: the stock layer (which the overlay check serves
    alone) must still import with only itself and the layers below it on the path."""
    monkeypatch.setattr(device, "SITE_ROOT", tmp_path)
    for layer, body in (("stock", "import no_such_module_here\n"), ("fork", "VALUE = 1\n")):
        (tmp_path / f"site-{layer}" / "pkg").mkdir(parents=True)
        (tmp_path / f"site-{layer}" / "pkg" / "__init__.py").write_text(body)
    docs = [{"layer": "stock", "smoke": ["pkg"]}, {"layer": "fork", "smoke": ["pkg"]}]
    with pytest.raises(device.SetupError, match="stock: importing pkg failed"):
        device.smoke(docs)
    device.smoke(docs[1:])   # the fork alone imports: the stock layer's fault was masked on the joint path
