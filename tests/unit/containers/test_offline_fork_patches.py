"""ddbench's patches on the fork (containers/offline/fork.py checkout/apply_patch): applied after the cherry-picks,
committed as ddbench with a fixed date (the same head everywhere), refused by name when they do not apply;
and, where the real fork's mirror is here, the four shipped patches against the pinned commit."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_offline_fork import commit, fake_fork, git  # noqa: F401  (fake_fork: a fixture)

import containers.sglang_pin as sglang_pin
from containers.offline import archive, fork
from containers.sglang_pin import Patch, pin

pytestmark = pytest.mark.unit

MIRROR = Path("/work/.mirror/Rancy-Wang+sglang/repo")
ARGS = "python/sglang/srt/server_args.py"


def make_patch(src: Path, branch: str, files: dict[str, str]) -> bytes:
    """A `git diff` of files edited on top of branch (src left as it was)."""
    git(src, "checkout", "-q", branch)
    for rel, text in files.items():
        (src / rel).write_text(text)
    data = subprocess.run(["git", "-C", str(src), "diff"], check=True, capture_output=True).stdout
    git(src, "checkout", "-q", "--", ".")
    return data


@pytest.fixture
def patched(fake_fork, tmp_path, monkeypatch):  # noqa: F811  (the fixture imported above)
    """The fake fork, and a pin dir (patches resolve beside the pin file) holding one patch to server_args.py."""
    pin_dir = tmp_path / "pin"
    (pin_dir / "patches").mkdir(parents=True)
    monkeypatch.setattr(sglang_pin, "PIN_FILE", pin_dir / "pin.toml")

    def add(name: str, data: bytes) -> Patch:
        (pin_dir / "patches" / name).write_bytes(data)
        return Patch(f"patches/{name}", hashlib.sha256(data).hexdigest(), "test")

    good = add("0001-args.patch", make_patch(fake_fork["src"], "ddtree", {ARGS: "ARGS = 3\n"}))
    return {**fake_fork, "add": add, "good": good, "pin": replace(fake_fork["pin"], patches=(good,))}


def show(work: Path, fmt: str) -> str:
    return git(work, "log", "-1", f"--format={fmt}")


def test_a_patch_is_applied_after_the_picks_and_committed_as_ddbench(patched):
    f = patched
    work = f["tmp"] / "w1"
    picks, patches = fork.checkout(f["bare"], f["pin"], work)
    [cp], [q] = picks, patches
    assert (work / ARGS).read_text() == "ARGS = 3\n"
    assert git(work, "status", "--porcelain") == ""             # applied and committed, nothing left over
    assert git(work, "rev-parse", "HEAD~1") == cp["result"]      # on top of the cherry-pick
    assert q == {"file": "patches/0001-args.patch", "sha256": f["good"].sha256,
                 "result": git(work, "rev-parse", "HEAD"), "files": [ARGS]}
    assert show(work, "%an <%ae> %aI|%cn <%ce> %cI|%s") == (
        "ddbench <ddbench@invalid> 1980-01-01T00:00:00+00:00|ddbench <ddbench@invalid> 1980-01-01T00:00:00+00:00|"
        "ddbench patch 0001-args.patch")


def test_the_patched_head_is_the_same_on_every_checkout(patched, monkeypatch):
    f = patched
    _, [a] = fork.checkout(f["bare"], f["pin"], f["tmp"] / "w1")
    # whoever builds, whenever: another identity and clock in the environment change nothing
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "someone else")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "else@example.invalid")
        monkeypatch.setenv(f"GIT_{who}_DATE", "2031-05-06T07:08:09+0200")
    _, [b] = fork.checkout(f["bare"], f["pin"], f["tmp"] / "w2")
    assert a["result"] == b["result"]
    doc = fork.build(f["bare"], f["tmp"] / "repo" / ".offline", manifest=None, p=f["pin"])
    assert doc["source"]["head"] == a["result"] and doc["source"]["patches"] == [a]


def test_patches_apply_in_order(patched):
    f = patched
    work = f["tmp"] / "w0"
    fork.checkout(f["bare"], f["pin"], work)            # the second patch is made on the first's result
    (work / ARGS).write_text("ARGS = 4\n")
    data = subprocess.run(["git", "-C", str(work), "diff"], check=True, capture_output=True).stdout
    second = f["add"]("0002-args-again.patch", data)
    _, patches = fork.checkout(f["bare"], replace(f["pin"], patches=(f["good"], second)), f["tmp"] / "w1")
    assert [q["file"] for q in patches] == ["patches/0001-args.patch", "patches/0002-args-again.patch"]
    assert (f["tmp"] / "w1" / ARGS).read_text() == "ARGS = 4\n"
    with pytest.raises(archive.BundleError, match="ddbench patch patches/0002-args-again.patch does not apply"):
        fork.checkout(f["bare"], replace(f["pin"], patches=(second, f["good"])), f["tmp"] / "w2")


def test_a_patch_that_does_not_apply_is_refused_by_name(patched):
    f = patched
    git(f["src"], "checkout", "-q", "-b", "elsewhere", f["ddtree"])
    commit(f["src"], {ARGS: "ARGS = 9\n"}, "a tree the patch was not made against")
    bad = f["add"]("0002-stale.patch", make_patch(f["src"], "elsewhere", {ARGS: "ARGS = 10\n"}))
    work = f["tmp"] / "w"
    with pytest.raises(archive.BundleError) as e:
        fork.checkout(f["bare"], replace(f["pin"], patches=(f["good"], bad)), work)
    head = git(work, "rev-parse", "HEAD")                 # the first patch's commit: the one it failed on
    assert f"ddbench patch patches/0002-stale.patch does not apply to {head} (re-make it against the pin)" \
        in str(e.value)
    assert show(work, "%s") == "ddbench patch 0001-args.patch"


def test_a_patch_that_is_not_the_pinned_one_is_refused_before_applying(patched):
    f = patched
    f["good"].path.write_bytes(f["good"].path.read_bytes().replace(b"ARGS = 3", b"ARGS = 5"))
    with pytest.raises(archive.BundleError, match=r"ddtree.patch patches/0001-args.patch: sha256 \w+ on disk"):
        fork.checkout(f["bare"], f["pin"], f["tmp"] / "w")
    assert (f["tmp"] / "w" / ARGS).read_text() == "ARGS = 2\n"   # nothing applied


# ---------------------------------------------------------------- the real fork, where its mirror is here


@pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason=f"no mirror of the fork at {MIRROR}")
def test_the_shipped_patches_apply_in_order_to_the_pinned_commit(tmp_path):
    p = pin()
    if not fork.has_commit(MIRROR, p.commit):
        pytest.skip(f"{MIRROR} does not hold {p.commit}")
    work = tmp_path / "sglang"
    picks, none = fork.checkout(MIRROR, replace(p, patches=()), work)   # the pinned commit + the cherry-picks
    assert none == [] and git(work, "status", "--porcelain") == ""
    results = []
    for q in p.patches:
        check = subprocess.run(["git", "apply", "--check", "--whitespace=nowarn"], cwd=work, input=q.check(),
                               capture_output=True)
        assert check.returncode == 0, f"{q.file}: {check.stderr.decode()}"
        results.append(fork.apply_patch(q, work))
    assert [r["file"] for r in results] == [q.file for q in p.patches]
    if fork.MANIFEST.is_file():  # the committed layer was built from exactly these commits
        doc = json.loads(fork.MANIFEST.read_text())["source"]
        assert [c["result"] for c in picks] == [c["result"] for c in doc["cherry_picks"]]
        assert [(r["file"], r["sha256"], r["result"]) for r in results] == \
            [(r["file"], r["sha256"], r["result"]) for r in doc["patches"]]
        assert git(work, "rev-parse", "HEAD") == doc["head"]
