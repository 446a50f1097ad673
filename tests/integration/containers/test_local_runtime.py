"""The local runtime with real processes: process groups, the log pump, Ctrl-C/SIGTERM cleanup, detach + down."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import httpx
import psutil
import pytest

from containers import bringup, local_runtime
from containers.ready import BringUpError
from ddbench.core.profile import REPO_ROOT


def stand_in_local():
    return [sys.executable, "-m", "loadtests.nullserver", "--port", "{port}", "--ttft-ms", "5", "--itl-ms", "1",
            "--tokens", "4"]


def group_alive(pgid: int) -> bool:
    return local_runtime._group_alive(pgid)


def wait_gone(pgid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.05)
    return False


def test_a_local_server_runs_in_its_own_group_and_stops_with_everything_it_started(tmp_path, make_profile):
    profile = make_profile(None)
    run = tmp_path / "run-1"
    cmd = stand_in_local()[:3] + ["--port", "{port}", "--ttft-ms", "5", "--itl-ms", "1", "--tokens", "4"]
    server = bringup.up(profile, "ar", run, command=cmd, timeout_s=30)
    assert os.getpgid(server.pid) == server.pgid != os.getpgid(0)
    members = [p for p in psutil.process_iter() if os.getpgid(p.pid) == server.pgid]
    assert len(members) == 2  # the server and its log pump
    r = httpx.post(server.url + "/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert r.status_code == 200
    status = json.loads((run / "ar" / "status.json").read_text())
    assert status["status"] == "up" and status["runtime"] == "local" and status["url"] == server.url
    server.stop()
    assert not group_alive(server.pgid)
    assert server.exited() is not None
    log = (run / "ar" / "server.log").read_text()
    assert "null server on http://127.0.0.1:" in log
    assert local_runtime.recorded() == []


def test_a_local_server_that_crashes_fails_with_its_traceback_and_secrets_stay_out_of_its_log(tmp_path, make_profile,
                                                                                               monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_local_secret_0123456789")
    profile = make_profile(None)
    crash = [sys.executable, "-c", "import os; print('token', os.environ['HF_TOKEN'], flush=True)\n"
             "raise ValueError('bad checkpoint')"]
    with pytest.raises(BringUpError) as info:
        bringup.up(profile, "ar", tmp_path / "run-2", command=crash, timeout_s=30)
    assert "exited with code 1 before it was ready" in info.value.summary
    assert info.value.traceback.splitlines()[-1] == "ValueError: bad checkpoint"
    log = (tmp_path / "run-2" / "ar" / "server.log").read_text()
    assert "token <redacted>" in log and "hf_local_secret_0123456789" not in log + str(info.value)
    assert json.loads((tmp_path / "run-2" / "ar" / "status.json").read_text())["status"] == "failed"


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path, make_profile):
    profile = make_profile(None)
    silent = [sys.executable, "-c", "import time; print('warming up', flush=True); time.sleep(600)"]
    t0 = time.monotonic()
    with pytest.raises(BringUpError) as info:
        bringup.up(profile, "ar", tmp_path / "run-3", command=silent, timeout_s=2)
    assert time.monotonic() - t0 < 60
    assert info.value.summary.startswith("arm 'ar' (refengine, pid ") and "not ready after 2 s" in info.value.summary
    assert "warming up" in info.value.log_tail
    assert local_runtime.recorded() == []


SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from containers.bringup import up
    from ddbench.core.profile import load_profile
    profile = load_profile(sys.argv[1])
    server = up(profile, "ar", Path(sys.argv[2]), command=sys.argv[4:], timeout_s=30, detach=sys.argv[3] == "detach")
    print(server.pgid, flush=True)
    if sys.argv[3] != "detach":
        time.sleep(120)
""")


def start_script(tmp_path, mode: str):
    profile = tmp_path / "profile.yaml"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(profile), str(tmp_path / f"run-{mode}"), mode,
                             *stand_in_local()], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env={**os.environ})
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"the script did not bring the server up: {line!r}"
    return proc, int(line)


# Ctrl-C ends Python by KeyboardInterrupt, which exits by SIGINT itself (-2); SIGTERM exits 128 + 15
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_ctrl_c_or_sigterm_stops_the_server_of_the_process_that_owns_it(tmp_path, make_profile, sig, code):
    make_profile(None)
    proc, pgid = start_script(tmp_path, "own")
    assert group_alive(pgid)
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == code
    assert wait_gone(pgid), "the server outlived its owner"


def test_normal_exit_stops_owned_servers_too(tmp_path, make_profile):
    make_profile(None)
    script = SCRIPT.replace("time.sleep(120)", "pass")
    profile = tmp_path / "profile.yaml"
    out = subprocess.run([sys.executable, "-c", script, str(profile), str(tmp_path / "run-exit"), "own",
                          *stand_in_local()], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert wait_gone(int(out.stdout.strip()))


def test_a_detached_server_outlives_up_and_down_stops_it(tmp_path, make_profile):
    make_profile(None)
    proc, pgid = start_script(tmp_path, "detach")
    assert proc.wait(timeout=30) == 0
    assert group_alive(pgid), "a detached server must keep running after up exits"
    out = subprocess.run([sys.executable, "-m", "containers.down", "--arm", "ar"], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "stopped local ar (pid " in out.stdout
    assert wait_gone(pgid)
    again = subprocess.run([sys.executable, "-m", "containers.down"], capture_output=True, text=True,
                           cwd=REPO_ROOT, timeout=60)
    assert "no ddbench server was running" in again.stdout


def test_up_names_a_missing_arm_and_exits_1():
    out = subprocess.run([sys.executable, "-m", "containers.up", "cpu-tiny", "no-such-arm"], capture_output=True,
                         text=True, cwd=REPO_ROOT, timeout=60)
    assert out.returncode == 1
    assert "profile 'cpu-tiny' has no arm 'no-such-arm'" in out.stderr


def test_a_port_taken_before_the_server_binds_it_is_picked_again(tmp_path, make_profile):
    """The first start finds its port taken (as uvicorn says it), the second serves: up() retries only that."""
    marker = tmp_path / "tried"
    script = textwrap.dedent(f"""
        import pathlib, runpy, sys
        marker = pathlib.Path({str(marker)!r})
        if not marker.exists():
            marker.write_text("1")
            print("ERROR:    [Errno 98] error while attempting to bind on address: address already in use", flush=True)
            sys.exit(3)
        sys.argv = ["nullserver"] + sys.argv[1:]
        runpy.run_module("loadtests.nullserver", run_name="__main__")
    """)
    cmd = [sys.executable, "-c", script] + stand_in_local()[3:]
    server = bringup.up(make_profile(None), "ar", tmp_path / "run", command=cmd, timeout_s=30)
    try:
        assert httpx.get(server.url + "/v1/models").status_code == 200
    finally:
        server.stop()
    log = (tmp_path / "run" / "ar" / "server.log").read_text()
    assert "address already in use" in log and "null server on http://127.0.0.1:" in log  # both attempts kept


def test_a_server_that_fails_for_another_reason_is_not_retried(tmp_path, make_profile):
    count = tmp_path / "starts"
    script = f"import pathlib; f = pathlib.Path({str(count)!r}); f.write_text(f.read_text() + 'x' if f.exists() " \
             f"else 'x'); print('RuntimeError: no model here', flush=True); raise SystemExit(1)"
    with pytest.raises(BringUpError, match="exited with code 1"):
        bringup.up(make_profile(None), "ar", tmp_path / "run", command=[sys.executable, "-c", script], timeout_s=30)
    assert count.read_text() == "x"
