"""`ddbench init`: the profile it writes from a model pair passes `check`, reads the drafter's own block size and
layer ids, leaves out what an engine cannot serve, and for Qwen3-8B matches the shipped profile's arms and flags."""

import json
import socket

import pytest

from containers.launch import server_command
from ddbench import cli
from ddbench.core.profile import PROFILES_DIR, REPO_ROOT, load_profile

TARGET, DRAFTER = "models/qwen3-stdlib-13m", "models/qwen3-stdlib-13m-dflash-b16"
SHIPPED_ARMS = ["ar", "linear-b16", "chain-b15", "tree-b15-k8", "tree-b15-k15", "tree-b63-k63"]


def init(tmp_path, *args, name="out.yaml"):
    out = tmp_path / name
    rc = cli.main(["init", *args, "-o", str(out)])
    return rc, out


def pair(tmp_path, target_edit=None, drafter_edit=None):
    """Copies of the shipped pair's config.json files (all init and check read), edited."""
    dirs = []
    for src, edit in ((TARGET, target_edit), (DRAFTER, drafter_edit)):
        config = json.loads((REPO_ROOT / src / "config.json").read_text())
        if edit:
            edit(config)
        d = tmp_path / src.split("/")[-1]
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        dirs.append(d)
    return dirs


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test: hub ids must be written without looking them up."""
    def refuse(*a, **k):
        raise AssertionError("init tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_shipped_pair_on_the_cpu_passes_check(tmp_path, capsys, no_network):
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, "--engine", "refengine")
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert "profile qwen3-stdlib-13m-cpu" in printed.out and "-m refengine.serve" in printed.out
    p = load_profile(out)
    assert (p.backend.kind, p.placement.device, p.runtime.dtype) == ("refengine", "cpu", "float32")
    assert p.models.target == TARGET and p.models.drafter == DRAFTER
    assert [a.id for a in p.arms] == SHIPPED_ARMS
    assert f"{REPO_ROOT / DRAFTER / 'config.json'}: block_size" in out.read_text()


def test_block_size_comes_from_the_drafter_config(tmp_path, capsys):
    target, drafter = pair(tmp_path, drafter_edit=lambda c: c.update(block_size=8))
    rc, out = init(tmp_path, "--target", str(target), "--drafter", str(drafter))
    assert rc == 0, capsys.readouterr().err
    arms = load_profile(out).arms
    # at block 8 the narrow tree (top-k min(8, 7)) and the full top-k tree are one arm
    assert [a.id for a in arms] == ["ar", "linear-b8", "chain-b7", "tree-b7-k7", "tree-b31-k31"]
    assert {a.block_size for a in arms if a.kind != "ar"} == {8}


def test_every_value_line_says_why(tmp_path, capsys):
    for engine, gpus in (("refengine", []), ("sglang-fork", ["--gpus", "2"]), ("sglang", ["--gpus", "0,1"])):
        rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, "--engine", engine, *gpus,
                       name=f"{engine}.yaml")
        assert rc == 0, capsys.readouterr().err
        lines = out.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("#") or line.endswith(":"):   # a comment, or a section's key
                continue
            assert " # " in line or lines[i - 1].lstrip().startswith("#"), f"{engine}: no comment on {line!r}"


def test_hub_ids_need_no_network(tmp_path, capsys, no_network, monkeypatch):
    rc, out = init(tmp_path, "--target", "Qwen/Qwen3-8B", "--drafter", "z-lab/Qwen3-8B-DFlash-b16", "--gpus", "1")
    assert rc == 0, capsys.readouterr().err
    text = out.read_text()
    assert "from the hub id's '-b16'" in text and "not checked: the drafter's target layer ids" in text
    # SGLang: each arm as deployed, and AR with the overlap switch held equal beside it
    assert [a.id for a in load_profile(out).arms] == ["ar", "ar-no-overlap", *SHIPPED_ARMS[1:]]
    # no block in the name: SGLang's documented default, said so
    rc, out = init(tmp_path, "--target", "org/target", "--drafter", "org/drafter", "--gpus", "1", name="d.yaml")
    assert rc == 0, capsys.readouterr().err
    assert "SGLang's documented default" in out.read_text()
    assert load_profile(out).arm("linear-b16").block_size == 16


def test_layer_ids_beyond_the_target_fail_naming_file_and_field(tmp_path, capsys):
    target, drafter = pair(tmp_path, drafter_edit=lambda c: c["dflash_config"].update(target_layer_ids=[1, 3, 6]))
    rc, out = init(tmp_path, "--target", str(target), "--drafter", str(drafter))
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and not out.exists()
    assert f"{drafter / 'config.json'}: field 'dflash_config.target_layer_ids'" in err
    assert "[6]" in err and f"{target / 'config.json'}: num_hidden_layers = 6" in err


def test_stock_sglang_leaves_ddtree_arms_out_with_a_comment(tmp_path, capsys):
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, "--engine", "sglang", "--gpus", "1")
    assert rc == 0, capsys.readouterr().err
    p = load_profile(out)
    assert [a.id for a in p.arms] == ["ar", "ar-no-overlap", "linear-b16"] and p.backend.ddtree is None
    text = out.read_text()
    for arm in SHIPPED_ARMS[2:]:
        assert f"# {arm}: left out, stock SGLang has no DDTREE" in text


@pytest.mark.parametrize("args,expected", [
    (["--engine", "sglang"], "serves on GPUs: give --gpus"),
    (["--engine", "refengine", "--gpus", "2"], "the reference engine serves on one GPU"),
    (["--gpus", "x"], "--gpus x"),
    (["--engine", "refengine", "--runtime", "docker"], "needs --image"),
    (["--gpus", "4"], "'num_attention_heads' = 6 does not split over tp_size 4"),
])
def test_bad_arguments_fail_before_writing(tmp_path, capsys, args, expected):
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, *args)
    assert rc == cli.EXIT_ERROR and expected in capsys.readouterr().err and not out.exists()


def test_an_existing_file_is_kept_without_force(tmp_path, capsys):
    (tmp_path / "out.yaml").write_text("mine\n")
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER)
    assert rc == cli.EXIT_ERROR and "exists already" in capsys.readouterr().err and out.read_text() == "mine\n"


def test_qwen3_8b_matches_the_shipped_profile(tmp_path, capsys, no_network, monkeypatch):
    """The same arms and, arm by arm, the same server command line and environment as `check` prints."""
    monkeypatch.delenv("QWEN3_8B", raising=False)
    monkeypatch.delenv("QWEN3_8B_DFLASH", raising=False)
    rc, out = init(tmp_path, "--target", "Qwen/Qwen3-8B", "--drafter", "z-lab/Qwen3-8B-DFlash-b16", "--gpus", "1",
                   "--engine", "sglang-fork")
    assert rc == 0, capsys.readouterr().err
    mine, shipped = load_profile(out), load_profile(PROFILES_DIR / "qwen3-8b-1gpu.yaml")
    # never the shipped profile's name: its results would mix with the shipped one's
    assert mine.name == "qwen3-8b-1gpu-init" and mine.backend == shipped.backend and mine.models == shipped.models
    assert mine.arms == shipped.arms
    for arm in shipped.arms:
        a, b = server_command(mine, arm), server_command(shipped, arm)
        assert (a.argv, a.env) == (b.argv, b.env), arm.id


def test_stock_sglang_in_docker_starts_the_registry_image_the_stock_profile_names(tmp_path, capsys):
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, "--gpus", "1", "--engine", "sglang",
                   "--runtime", "docker")
    assert rc == 0, capsys.readouterr().err
    image = load_profile(out).backend.image
    assert image.startswith("lmsysorg/sglang:v0.5.15-cu130@sha256:")
    assert image == load_profile("qwen3-8b-1gpu-stock").backend.image


def test_the_reference_engine_refuses_a_hub_id_it_cannot_find_here(tmp_path, capsys, no_network, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    rc, out = init(tmp_path, "--target", "Qwen/Qwen3-8B", "--drafter", DRAFTER, "--engine", "refengine")
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and not out.exists()
    assert "--target Qwen/Qwen3-8B: the reference engine loads local checkpoints only" in err
    assert str(tmp_path / "hub") in err


def test_the_reference_engine_takes_a_hub_id_from_the_local_cache_and_says_so(tmp_path, capsys, no_network,
                                                                              monkeypatch):
    hub = tmp_path / "hub" / "models--org--tiny"
    snap = hub / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((REPO_ROOT / TARGET / "config.json").read_text())
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    rc, out = init(tmp_path, "--target", "org/tiny", "--drafter", DRAFTER, "--engine", "refengine")
    assert rc == 0, capsys.readouterr().err
    assert load_profile(out).models.target == str(snap)
    assert f"# {snap}: from the Hugging Face cache, org/tiny" in out.read_text()


def test_a_cpu_profile_must_fit_the_hosts_memory(tmp_path, capsys, monkeypatch):
    from ddbench import init as init_mod

    monkeypatch.setattr(init_mod, "fp32_bytes", lambda ck: 16 * 2**30)   # an 8B model's target, and again
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, "--engine", "refengine")
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and not out.exists()
    assert "the pair takes about 32.0 GiB in fp32" in err and "GiB (a server may use 50%)" in err


def test_a_drafter_of_another_hidden_size_is_not_a_pair(tmp_path, capsys):
    target, drafter = pair(tmp_path, drafter_edit=lambda c: c.update(hidden_size=c["hidden_size"] * 2))
    rc, out = init(tmp_path, "--target", str(target), "--drafter", str(drafter))
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and not out.exists()
    assert f"{drafter / 'config.json'}: field 'hidden_size'" in err and "not a pair" in err


@pytest.mark.parametrize("args,expected", [
    (["--name", "Bad Name"], "--name 'Bad Name': a profile name is lower-case"),
    (["--name", "cpu-tiny"], "--name cpu-tiny: a shipped profile's name"),
])
def test_a_bad_name_is_refused_before_anything_is_written(tmp_path, capsys, args, expected):
    rc, out = init(tmp_path, "--target", TARGET, "--drafter", DRAFTER, *args)
    assert rc == cli.EXIT_ERROR and expected in capsys.readouterr().err and not out.exists()


def test_a_directory_as_output_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    rc = cli.main(["init", "--target", TARGET, "--drafter", DRAFTER, "-o", str(tmp_path / "d"), "--force"])
    assert rc == cli.EXIT_ERROR and "a directory; -o names the YAML file to write" in capsys.readouterr().err


def test_paths_resolve_where_the_user_typed_them(tmp_path, capsys, monkeypatch):
    # just runs at the repository root and exports the directory the recipe was called from
    target, drafter = pair(tmp_path)
    sub = tmp_path / "sub"
    sub.mkdir()
    monkeypatch.setenv("DDBENCH_CALLER_DIR", str(sub))
    rc = cli.main(["init", "--target", "../" + target.name, "--drafter", "../" + drafter.name, "-o", "mine.yaml"])
    assert rc == 0, capsys.readouterr().err
    assert (sub / "mine.yaml").is_file() and load_profile("mine.yaml").models.target == str(target)

