import json
import socket
import threading
import time

import pytest

from containers import bringup, docker_runtime
from containers.ready import BringUpError
from ddbench.sweep import run_sweep
from loadtests.cell import run_cell


def read_status(path):
    return json.loads(path.read_text())


def test_up_serves_a_short_load_and_down_removes_the_container(tmp_path, make_profile, stand_in, refengine_image,
                                                               docker_client):
    profile = make_profile(refengine_image)
    run = tmp_path / "run-1"
    server = bringup.up(profile, "ar", run, command=stand_in, timeout_s=60)
    try:
        status = read_status(run / "ar" / "status.json")
        assert status["status"] == "up" and status["image"] == refengine_image
        assert status["image_id"] == docker_client.images.get(refengine_image).id
        assert status["container"]["command"][:3] == ["python3", "-m", "loadtests.nullserver"]
        assert server.url.startswith("http://127.0.0.1:")
        (container,) = docker_client.containers.list(filters={"label": ["ddbench=1", f"ddbench.run={run.name}"]})
        assert container.labels["ddbench.arm"] == "ar"
        assert container.attrs["HostConfig"]["PortBindings"]["30000/tcp"][0]["HostIp"] == "127.0.0.1"
        cell = run_cell(profile.workload, profile.load, url=server.url, cell_dir=run / "ar" / "c2-r1", arm="ar",
                        concurrency=2, repetition=1, timeout_s=120)
        assert cell.status == "ok", cell.reason
        assert cell.requests == 4 and cell.errors == 0
    finally:
        removed = bringup.down(run_id=run.name)
    assert removed == [f"container {container.name}"]
    assert docker_client.containers.list(all=True, filters={"label": "ddbench=1"}) == []
    log = (run / "ar" / "server.log").read_text()
    assert "null server on http://0.0.0.0:30000" in log


def test_a_container_that_exits_at_start_fails_with_a_summary_traceback_and_log_tail(tmp_path, make_profile,
                                                                                   refengine_image, docker_client,
                                                                                   monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_container_secret_0123456789")  # passed in, never written out
    profile = make_profile(refengine_image)
    run = tmp_path / "run-2"
    # both lines on stderr: Docker's log interleaves two streams in no fixed order
    crash = ["python3", "-c", "import os, sys; print('loading weights with', os.environ['HF_TOKEN'], file=sys.stderr, "
             "flush=True)\nraise FileNotFoundError('stand-in: no weights in /models/target')"]
    t0 = time.monotonic()
    with pytest.raises(BringUpError) as info:
        bringup.up(profile, "ar", run, command=crash, timeout_s=600)
    assert time.monotonic() - t0 < 300  # the exit is noticed, not waited out (generous: CI machines are busy)
    lines = str(info.value).splitlines()
    assert lines[0].startswith("arm 'ar' (refengine, ") and "exited with code 1 before it was ready" in lines[0]
    assert info.value.traceback.splitlines()[-1] == "FileNotFoundError: stand-in: no weights in /models/target"
    assert "loading weights" in info.value.log_tail
    status = read_status(run / "ar" / "status.json")
    assert status["status"] == "failed" and status["reason"] == lines[0]
    log = (run / "ar" / "server.log").read_text()
    assert "loading weights with <redacted>" in log
    assert "hf_container_secret" not in log + str(info.value) + (run / "ar" / "status.json").read_text()
    assert docker_client.containers.list(all=True, filters={"label": "ddbench=1"}) == []


def test_a_container_killed_mid_cell_fails_that_arm_and_the_sweep_goes_on(tmp_path, make_profile, stand_in,
                                                                         refengine_image, docker_client):
    arms = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16}]
    profile = make_profile(refengine_image, arms=arms, concurrency=(2,), requests_per_user=3, repetitions=2)
    run = tmp_path / "run-3"
    slow = [a if a != "30" else "200" for a in stand_in]  # TTFT 200 ms: a cell lasts a few seconds
    killed = {}

    def kill_first_arm():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            records = list((run / "ar" / "c2-r1").glob("requests-*.jsonl"))
            if records and records[0].stat().st_size > 0:  # requests are flowing
                (c,) = docker_client.containers.list(filters={"label": ["ddbench=1", "ddbench.arm=ar"]})
                c.kill()
                killed["at"] = time.monotonic()
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_first_arm, daemon=True)
    killer.start()
    results = run_sweep(profile, run, run_cell, command=slow, timeout_s=60, telemetry_interval_s=0.5)
    killer.join(timeout=5)
    assert "at" in killed, "the first arm's cell never started sending requests"
    first, second = results["ar"]
    assert first.status == "failed" and first.reason.startswith("the server exited with code 137 during the cell")
    assert second.status == "failed" and second.reason == "the server exited with code 137 before this cell"
    assert read_status(run / "ar" / "c2-r1" / "status.json")["status"] == "failed"
    assert [s.status for s in results["linear-b16"]] == ["ok", "ok"], [s.reason for s in results["linear-b16"]]
    telemetry = [json.loads(x) for x in (run / "linear-b16" / "c2-r1" / "telemetry.jsonl").read_text().splitlines()]
    assert telemetry[0]["kind"] == "source" and len(telemetry) >= 2
    assert docker_client.containers.list(all=True, filters={"label": "ddbench=1"}) == []


def test_down_removes_only_ddbench_containers(tmp_path, make_profile, stand_in, refengine_image, base_image,
                                             docker_client):
    profile = make_profile(refengine_image)
    other = docker_client.containers.run(base_image, ["sleep", "120"], detach=True, labels={"not-ddbench": "1"})
    try:
        server = bringup.up(profile, "ar", tmp_path / "run-4", command=stand_in, timeout_s=60, detach=True)
        assert server.exited() is None
        removed = bringup.down()
        assert len(removed) == 1 and removed[0].startswith("container ddbench-run-4-ar")
        other.reload()
        assert other.status == "running"
    finally:
        other.remove(force=True)


class UnixProxy:
    """TCP on 127.0.0.1 -> the daemon's unix socket: the SDK then talks to a tcp:// DOCKER_HOST."""

    def __init__(self, path="/var/run/docker.sock"):
        self.path = path
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def test_bring_up_works_against_a_tcp_docker_host(tmp_path, make_profile, stand_in, refengine_image, monkeypatch):
    proxy = UnixProxy()
    try:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{proxy.port}")
        profile = make_profile(refengine_image)
        server = bringup.up(profile, "ar", tmp_path / "run-5", command=stand_in, timeout_s=60)
        assert server.url.startswith("http://127.0.0.1:")
        assert docker_runtime.client().api.base_url == f"http://127.0.0.1:{proxy.port}"
        assert bringup.down() == [f"container {server.spec.name}"]
    finally:
        proxy.close()


def test_the_reference_engine_serves_the_shipped_pair_from_its_image(tmp_path, refengine_image, docker_client):
    """No stand-in: refengine.serve inside the image, the shipped checkpoints mounted read-only."""
    import yaml

    from ddbench.core.profile import REPO_ROOT, load_profile

    data = {"name": "containers-real", "backend": {"kind": "refengine", "runtime": "docker", "image": refengine_image},
            "models": {"target": str(REPO_ROOT / "models/qwen3-stdlib-13m"),
                       "drafter": str(REPO_ROOT / "models/qwen3-stdlib-13m-dflash-b16")},
            "runtime": {"dtype": "float32"},
            "arms": [{"id": "linear-b16", "kind": "linear", "block_size": 16}],
            "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 16},
            "load": {"concurrency": [2], "requests_per_user": 2, "warmup_requests": 1, "repetitions": 1}}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    profile = load_profile(path)
    run = tmp_path / "run-real"
    server = bringup.up(profile, "linear-b16", run, timeout_s=300)
    try:
        status = read_status(run / "linear-b16" / "status.json")
        assert status["container"]["command"][:3] == ["python3", "-m", "refengine.serve"]
        cell = run_cell(profile.workload, profile.load, url=server.url, cell_dir=run / "linear-b16" / "c2-r1",
                        arm="linear-b16", concurrency=2, repetition=1, timeout_s=300)
        assert cell.status == "ok", cell.reason
        assert cell.requests == 4 and cell.errors == 0
    finally:
        bringup.down(run_id=run.name)
    records = [json.loads(line) for f in (run / "linear-b16" / "c2-r1").glob("requests-*.jsonl")
               for line in f.read_text().splitlines()]
    assert len(records) == 6  # 2 users x (1 warmup + 2 measured)
    assert all(r["spec"]["spec_verify_ct"] >= 1 and r["usage"]["completion_tokens"] == 16 for r in records)
