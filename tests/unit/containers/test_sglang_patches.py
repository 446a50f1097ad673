"""ddbench's own patches to the DDTree fork (containers/sglang/patches/, pinned in pin.toml's [[ddtree.patch]]):
each listed file is on disk with its pinned sha256, every file on disk is listed once and in order, and a pin
with a bad patch entry says which entry and which field."""

from __future__ import annotations

import hashlib
import re

import pytest

from containers.sglang_pin import PIN_FILE, Patch, PinError, main, parse, pin

pytestmark = pytest.mark.unit

PATCHES = PIN_FILE.parent / "patches"
NUMBERED = re.compile(r"(\d{4})-[a-z0-9-]+\.patch")
HEAD = f"""
sglang = "0.5.15"
[wheels]
sglang-kernel = "0.4.4"
flashinfer-python = "0.6.12"
transformers = "5.12.1"
torch = "2.11.0"
[ddtree]
repo = "https://github.com/x/sglang"
branch = "ddtree"
commit = "{'a' * 40}"
"""


def entry(file: str | None = "patches/0001-ddtree-topk-cap.patch", sha256: str | None = None) -> str:
    lines = ["[[ddtree.patch]]"]
    if file is not None:
        lines.append(f'file = "{file}"')
    if sha256 is not None:
        lines.append(f'sha256 = "{sha256}"')
    return "\n".join(lines) + '\nwhy = "a test"\n'


def load(tmp_path, *entries: str):
    path = tmp_path / "pin.toml"
    path.write_text(HEAD + "".join(entries))
    return pin(path)


# ---------------------------------------------------------------- the shipped patches


def test_every_pinned_patch_is_on_disk_with_its_sha256():
    patches = pin().patches
    assert patches, "pin.toml lists no [[ddtree.patch]]"
    for q in patches:
        data = q.check()
        assert hashlib.sha256(data).hexdigest() == q.sha256 == hashlib.sha256(q.path.read_bytes()).hexdigest()
        assert q.path.parent == PATCHES and q.why, q.file
        assert b"\ndiff --git a/python/sglang/" in data, f"{q.file}: not a git diff of the fork's python/sglang"


def test_every_patch_file_is_pinned_once_in_numeric_order():
    on_disk = sorted(p.name for p in PATCHES.iterdir())
    listed = [q.file.removeprefix("patches/") for q in pin().patches]
    assert len(listed) == len(set(listed)), f"listed twice: {listed}"
    assert sorted(listed) == on_disk, "every file in containers/sglang/patches/ must be a [[ddtree.patch]] entry"
    numbers = [int(NUMBERED.fullmatch(name).group(1)) if NUMBERED.fullmatch(name) else None for name in listed]
    assert None not in numbers, f"a patch not named NNNN-name.patch: {listed}"
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), f"out of order: {listed}"


def test_the_label_and_record_carry_the_patches(capsys):
    p = pin()
    assert p.label.endswith(f" + {len(p.patches)} ddbench patches")
    assert p.record()["patches"] == [{"file": q.file, "sha256": q.sha256, "why": q.why} for q in p.patches]
    assert main([]) == 0
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("  patch ")] == [q.file for q in p.patches]


# ---------------------------------------------------------------- a bad entry names itself


def test_a_temp_pin_with_good_entries_checks(tmp_path):
    shipped = pin().patches
    p = load(tmp_path, *(entry(q.file, q.sha256) for q in shipped))
    assert [(q.file, q.sha256) for q in p.patches] == [(q.file, q.sha256) for q in shipped]
    assert [q.check() for q in p.patches] == [q.path.read_bytes() for q in shipped]


def test_a_missing_patch_file_fails_naming_it(tmp_path):
    [q] = load(tmp_path, entry("patches/0009-not-there.patch", "0" * 64)).patches
    with pytest.raises(PinError, match=r"ddtree.patch patches/0009-not-there.patch: cannot read it"):
        q.check()


def test_a_wrong_sha256_fails_naming_the_file_and_both_digests(tmp_path):
    real = pin().patches[0]
    [q] = load(tmp_path, entry(real.file, "0" * 64)).patches
    with pytest.raises(PinError, match=rf"ddtree.patch {real.file}: sha256 {real.sha256} on disk, {'0' * 64} pinned"):
        q.check()


def test_a_patch_changed_on_disk_fails(tmp_path, monkeypatch):
    import containers.sglang_pin as sp

    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "0001-x.patch").write_bytes(b"one\n")
    monkeypatch.setattr(sp, "PIN_FILE", tmp_path / "pin.toml")   # patches resolve beside the pin file
    q = Patch("patches/0001-x.patch", hashlib.sha256(b"one\n").hexdigest())
    assert q.check() == b"one\n"
    (tmp_path / "patches" / "0001-x.patch").write_bytes(b"two\n")
    with pytest.raises(PinError, match="0001-x.patch: sha256 .* on disk"):
        q.check()


@pytest.mark.parametrize("bad, words", [
    (entry(file=None, sha256="0" * 64), r"ddtree.patch\[1\].file: missing or not a string"),
    (entry(sha256=None), r"ddtree.patch\[1\].sha256: missing or not a string"),
    (entry(sha256="abc123"), r"ddtree.patch\[1\].sha256: 64 hex digits, got 'abc123'"),
    (entry(sha256="A" * 64), r"ddtree.patch\[1\].sha256: 64 hex digits"),
    (entry("0001-ddtree-topk-cap.patch", "0" * 64), r"ddtree.patch\[1\].file: a path under patches/"),
    (entry("patches/../pin.toml", "0" * 64), r"ddtree.patch\[1\].file: a path under patches/"),
    (entry("/etc/passwd", "0" * 64), r"ddtree.patch\[1\].file: a path under patches/"),
])
def test_a_bad_entry_fails_naming_the_file_and_field(tmp_path, bad, words):
    good = entry(sha256="0" * 64)
    path = tmp_path / "pin.toml"
    path.write_text(HEAD + good + bad)
    with pytest.raises(PinError, match=rf"^{re.escape(str(path))}: {words}"):
        pin(path)
    with pytest.raises(PinError, match=words):
        parse(HEAD + good + bad, "x.toml")
