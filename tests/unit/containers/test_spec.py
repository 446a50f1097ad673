import pytest

from containers.docker_runtime import run_kwargs, server_host
from containers.launch import server_command
from containers.spec import HF_CACHE_MOUNT, LABEL, WORKDIR, build_spec, container_name
from ddbench.core.profile import REPO_ROOT, Profile, load_profile


def refengine_docker(**over) -> Profile:
    data = {"name": "ref-docker",
            "backend": {"kind": "refengine", "runtime": "docker", "image": "ddbench/refengine:cpu"},
            "models": {"target": "models/ddbench-tiny-target", "drafter": "models/ddbench-tiny-dflash-b16"},
            "runtime": {"dtype": "float32"},
            "arms": [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16}],
            "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 8},
            "load": {"concurrency": [1], "requests_per_user": 1}}
    data.update(over)
    return Profile.model_validate(data)


def test_gpu_arm_gets_its_gpus_host_ipc_and_the_generated_command(monkeypatch, tmp_path):
    monkeypatch.delenv("DDBENCH_BIND", raising=False)
    p = load_profile("kimi-k2.6-8xrtx6000")
    arm = p.arm("tree-b32-k32")
    spec = build_spec(p, arm, run_id="r1", arm_dir=tmp_path / "tree-b32-k32", host_port=31000)
    assert spec.command == server_command(p, arm, host="0.0.0.0", port=30000).argv
    assert spec.gpus == [0, 1, 2, 3, 4, 5, 6, 7]
    assert spec.ipc_mode == "host" and spec.shm_size is None
    assert "SGLANG_DDTREE_MAX_TOPK" not in spec.env  # the pinned fork's top-k is min(B, vocab)
    assert "CUDA_VISIBLE_DEVICES" not in spec.env  # the runtime maps GPUs, renumbered from 0
    assert spec.labels == {LABEL: "1", "ddbench.profile": p.name, "ddbench.run": "r1", "ddbench.arm": "tree-b32-k32",
                           "ddbench.log": str(tmp_path / "tree-b32-k32" / "server.log")}
    kw = run_kwargs(spec)
    assert kw["ports"] == {"30000/tcp": ("127.0.0.1", 31000)}
    assert kw["device_requests"][0]["DeviceIDs"] == [str(g) for g in range(8)]
    assert kw["device_requests"][0]["Capabilities"] == [["gpu"]]
    assert kw["ipc_mode"] == "host"


def test_hub_models_come_through_the_hf_cache_and_tokens_are_passed_never_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    p = load_profile("qwen3-8b-1gpu")
    spec = build_spec(p, p.arm("linear-b16"), run_id="r1")
    assert spec.env["HF_TOKEN"] == "hf_secret_value_123"
    assert spec.env["HF_HOME"] == HF_CACHE_MOUNT
    assert [(m.source, m.target, m.read_only) for m in spec.mounts] == [(str(tmp_path / "hf"), HF_CACHE_MOUNT, False)]
    public = spec.public()
    assert "hf_secret_value_123" not in repr(public)
    assert "HF_TOKEN" in public["env_names"]


def test_refengine_checkpoints_are_mounted_read_only_where_the_command_names_them(tmp_path):
    p = refengine_docker()
    spec = build_spec(p, p.arm("linear-b16"), run_id="r2", arm_dir=tmp_path / "linear-b16")
    targets = {m.target: m for m in spec.mounts}
    mounted = targets[f"{WORKDIR}/models/ddbench-tiny-target"]
    assert mounted.source == str((REPO_ROOT / "models/ddbench-tiny-target").resolve()) and mounted.read_only
    assert f"{WORKDIR}/models/ddbench-tiny-dflash-b16" in targets
    assert targets["/results"].source == str((tmp_path / "linear-b16").resolve()) and not targets["/results"].read_only
    assert spec.workdir == WORKDIR
    assert spec.command[:3] == ["python3", "-m", "refengine.serve"]
    assert "models/ddbench-tiny-target" in spec.command
    assert spec.shm_size == "2g" and spec.gpus == [] and spec.ipc_mode is None
    assert "device_requests" not in run_kwargs(spec)


def test_a_command_override_replaces_only_the_command():
    p = refengine_docker()
    spec = build_spec(p, p.arm("ar"), run_id="r3", command=["python3", "-m", "loadtests.nullserver"])
    assert spec.command == ["python3", "-m", "loadtests.nullserver"]
    assert spec.image == "ddbench/refengine:cpu"


def test_the_bind_address_can_be_widened_for_a_remote_client(monkeypatch):
    monkeypatch.setenv("DDBENCH_BIND", "0.0.0.0")
    p = refengine_docker()
    assert run_kwargs(build_spec(p, p.arm("ar"), run_id="r"))["ports"]["30000/tcp"][0] == "0.0.0.0"


def test_local_profiles_have_no_container():
    p = load_profile("cpu-tiny")
    with pytest.raises(ValueError, match="backend.image"):
        build_spec(p, p.arm("ar"), run_id="r")


@pytest.mark.parametrize("docker_host, expected", [
    ("", "127.0.0.1"), ("unix:///var/run/docker.sock", "127.0.0.1"),
    ("tcp://10.1.2.3:2375", "10.1.2.3"), ("ssh://me@gpu-box", "gpu-box"), ("ssh://me@gpu-box:2222", "gpu-box")])
def test_the_server_url_names_the_docker_host(monkeypatch, docker_host, expected):
    monkeypatch.delenv("DDBENCH_SERVER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    assert server_host() == expected


def test_container_names_are_valid_docker_names():
    assert container_name("20260101T000000Z-ab12cd", "tree-b15-k8") == "ddbench-20260101T000000Z-ab12cd-tree-b15-k8"
    assert container_name("a/b c", "x") == "ddbench-a-b-c-x"
