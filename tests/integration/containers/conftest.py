"""Real Docker: a local base image (debootstrap) and the refengine image, built once per session and
reused while their inputs are unchanged; no ddbench-labelled container survives a test."""

import subprocess
import sys
import time

import pytest
import yaml

from containers import local_runtime
from containers.images import BASE_TAG, build_base, build_refengine
from ddbench.core.profile import REPO_ROOT, load_profile

# the stand-in server (loadtests.nullserver) until refengine.serve can serve a checkpoint here;
# "{port}" becomes the port inside the container. Pointing these tests at the real server is
# dropping `command=` from the bring-up calls.
STAND_IN = ["python3", "-m", "loadtests.nullserver", "--host", "0.0.0.0", "--port", "{port}",
            "--ttft-ms", "30", "--itl-ms", "10", "--tokens", "16"]


def _docker():
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception:
        return None


@pytest.fixture(scope="session")
def docker_client():
    client = _docker()
    if client is None:
        pytest.skip("no Docker daemon reachable (start one: nohup dockerd >/var/log/ddbench-dockerd.log 2>&1 &)")
    return client


@pytest.fixture(scope="session")
def base_image(docker_client):
    built = build_base(BASE_TAG)
    print(f"\nbase image {built.tag}: " + ("reused" if built.cached else f"built in {built.seconds:.0f} s"))
    return built.tag


@pytest.fixture(scope="session")
def refengine_image(base_image):
    if not (REPO_ROOT / "wheelhouse" / "cpu" / "requirements.lock").is_file():
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "containers.wheelhouse", "--variant", "cpu"], check=True)
        print(f"\nwheelhouse downloaded in {time.monotonic() - t0:.0f} s")
    built = build_refengine("cpu", base=base_image)
    print(f"\nrefengine image {built.tag}: " + ("reused" if built.cached else f"built in {built.seconds:.0f} s"))
    return built.tag


@pytest.fixture(autouse=True)
def no_ddbench_container_left():
    """Remove ddbench=1 containers after every test, pass or fail, and fail a test that left one."""
    yield
    client = _docker()
    if client is None:
        return
    left = client.containers.list(all=True, filters={"label": "ddbench=1"})
    for c in left:
        c.remove(force=True)
    assert not left, f"the test left ddbench containers behind: {[c.name for c in left]}"


@pytest.fixture(autouse=True)
def local_state(tmp_path, monkeypatch):
    """Each test's local servers are recorded in its own state directory; none may outlive the test."""
    state = tmp_path / "state"
    monkeypatch.setenv("DDBENCH_STATE_DIR", str(state))
    monkeypatch.setattr(local_runtime, "STATE_DIR", state / "local")
    yield state
    left = local_runtime.recorded()
    for s in left:
        s.stop()
    assert not left, f"the test left local servers running: {[s.ident for s in left]}"


@pytest.fixture
def stand_in():
    return list(STAND_IN)


@pytest.fixture
def make_profile(tmp_path):
    return lambda image, **kw: write_profile(tmp_path, image, **kw)


def write_profile(tmp_path, image: str | None, arms=None, concurrency=(2,), requests_per_user=2, repetitions=1,
                  warmup=1):
    """A profile for the stand-in server; its 'checkpoints' are empty directories (mounted, never read)."""
    for name in ("target", "drafter"):
        (tmp_path / "models" / name).mkdir(parents=True, exist_ok=True)
    data = {
        "name": "containers-it",
        "backend": {"kind": "refengine", "runtime": "docker" if image else "local",
                    **({"image": image} if image else {})},
        "models": {"target": str(tmp_path / "models" / "target"), "drafter": str(tmp_path / "models" / "drafter")},
        "runtime": {"dtype": "float32"},
        "arms": arms or [{"id": "ar", "kind": "ar"}],
        "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 16},
        "load": {"concurrency": list(concurrency), "requests_per_user": requests_per_user,
                 "warmup_requests": warmup, "repetitions": repetitions}}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profile(path)
