"""The one pin (containers/sglang/pin.toml): its accessor, and that every copy of it agrees."""

from __future__ import annotations

import json
import re

import pytest

from containers.offline import fork, lock
from containers.offline.layers import SGLANG, canonical
from containers.sglang_flags import FLAGS_DIR, load_table, table_for
from containers.sglang_pin import PIN_FILE, WHEELS, PinError, parse, pin
from ddbench.core.profile import PROFILES_DIR, load_profile

pytestmark = pytest.mark.unit

SHA = "a" * 40
GOOD = f"""
sglang = "0.5.15"
[wheels]
sglang-kernel = "0.4.4"
flashinfer-python = "0.6.12"
transformers = "5.12.1"
torch = "2.11.0"
[ddtree]
repo = "https://github.com/x/sglang"
branch = "ddtree"
commit = "{SHA}"
[[ddtree.cherry_pick]]
repo = "https://github.com/sgl-project/sglang"
commit = "{'b' * 40}"
why = "rope"
"""


def test_parse_reads_every_field():
    p = parse(GOOD, "x.toml")
    assert (p.sglang, p.repo, p.branch, p.commit) == ("0.5.15", "https://github.com/x/sglang", "ddtree", SHA)
    assert p.wheels == {"sglang-kernel": "0.4.4", "flashinfer-python": "0.6.12", "transformers": "5.12.1",
                        "torch": "2.11.0"}
    [cp] = p.cherry_picks
    assert (cp.commit, cp.why) == ("b" * 40, "rope")
    assert p.flags_table == "ddtree-fork-aaaaaaaa" and p.label == "x/sglang@aaaaaaaa + bbbbbbbbb"
    assert p.record()["cherry_picks"] == [{"repo": "https://github.com/sgl-project/sglang", "commit": "b" * 40,
                                           "why": "rope"}]


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace(SHA, "398fc2c7"), "ddtree.commit: a full 40-hex commit SHA"),
    (lambda t: t.replace("b" * 40, "main"), r"ddtree.cherry_pick\[0\].commit: a full 40-hex"),
    (lambda t: t.replace('torch = "2.11.0"\n', ""), r"\[wheels\]: missing torch"),
    (lambda t: t.replace('repo = "https://github.com/x/sglang"\n', ""), "ddtree.repo: missing"),
    (lambda t: t + "[[", "not valid TOML"),
])
def test_parse_errors_name_the_key(edit, words):
    with pytest.raises(PinError, match=words):
        parse(edit(GOOD), "x.toml")


def test_the_shipped_pin_is_ddtree_on_sglangs_v2_runtime():
    p = pin()
    assert p.repo == "https://github.com/Rancy-Wang/sglang" and p.branch == "ddtree-v2"
    assert re.fullmatch(r"[0-9a-f]{40}", p.commit) and set(WHEELS) <= set(p.wheels)
    # ddtree-v2 needs sglang-kernel 0.4.5 and torch 2.11.0 (its pyproject): the release that carries both
    assert (p.sglang, p.wheels["sglang-kernel"], p.wheels["torch"]) == ("0.5.17", "0.4.5", "2.11.0")
    # the top-k cap (chain, capped tree) and the per-step statistics stay expressible on the new runtime
    names = [q.file for q in p.patches]
    assert any("topk-cap" in n for n in names) and any("step-stats" in n for n in names)


# ---------------------------------------------------------------- every copy agrees with the pin


def test_the_sglang_layer_carries_the_pinned_compiled_parts():
    p = pin()
    want = {"sglang": p.sglang, **{k: v for k, v in p.wheels.items() if k != "torch"}}  # torch is the image's
    locked = {p_.key: p_.version for p_ in lock.read(SGLANG.lockfile)}
    assert {canonical(k): locked.get(canonical(k)) for k in want} == {canonical(k): v for k, v in want.items()}
    req = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", SGLANG.requirements.read_text(), re.M))
    assert {canonical(k): v for k, v in req.items() if canonical(k) in {canonical(w) for w in want}} == \
        {canonical(k): v for k, v in want.items()}
    if SGLANG.manifest.is_file():
        built = {canonical(w["name"]): w["version"] for w in json.loads(SGLANG.manifest.read_text())["wheels"]}
        assert {canonical(k): built.get(canonical(k)) for k in want} == {canonical(k): v for k, v in want.items()}


def test_the_fork_layers_manifest_is_the_pins():
    if not fork.MANIFEST.is_file():
        pytest.skip("sglang-ddtree not built")
    p, doc = pin(), json.loads(fork.MANIFEST.read_text())
    assert (doc["source"]["repo"], doc["source"]["commit"]) == (p.repo, p.commit)
    assert [(c["repo"], c["commit"]) for c in doc["source"]["cherry_picks"]] == \
        [(c.repo, c.commit) for c in p.cherry_picks]
    assert doc["expects"] == dict(sorted(p.wheels.items()))


def test_the_flag_table_is_read_from_the_pinned_commit():
    p = pin()
    assert (FLAGS_DIR / f"{p.flags_table}.json").is_file(), \
        f"python -m containers.sglang_flags extract-git GIT --pin (makes {p.flags_table}.json)"
    table = load_table(p.flags_table)
    assert table["source"]["commit"] == p.commit and "DDTREE" in table["speculative_algorithms"]


def test_fork_profiles_and_dockerfiles_name_the_pinned_release():
    p = pin()
    fork_profiles = [load_profile(f.stem) for f in sorted(PROFILES_DIR.glob("*.yaml"))]
    fork_profiles = [q for q in fork_profiles if q.backend.ddtree == "fork"]
    assert fork_profiles, "no shipped profile runs on the pinned fork"
    for q in fork_profiles:
        assert q.backend.version == p.sglang, q.name
        assert {table_for(q, a.kind) for a in q.arms} == {p.flags_table}, q.name
    # the Dockerfiles carry no copy of the pin: images.py passes it as build args, and a build without
    # them stops; the registry base is the pinned release's image
    for dockerfile in sorted((PIN_FILE.parent).glob("Dockerfile*")):
        text = dockerfile.read_text()
        for arg in ("SGLANG_VERSION", "DDTREE_REPO", "DDTREE_COMMIT", "EXPECT", "NEED_SM"):
            assert re.search(rf"^ARG {arg}$", text, re.M), (dockerfile.name, arg)
        assert not re.search(r"\b[0-9a-f]{40}\b", text), f"{dockerfile.name} names a commit"
        # the registry base is the pinned release's image by digest, given at build time (images.registry_base)
        assert not re.search(r"^ARG SGLANG_IMAGE=", text, re.M), f"{dockerfile.name} defaults the registry base"
