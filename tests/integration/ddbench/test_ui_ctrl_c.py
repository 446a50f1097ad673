"""Ctrl-C on `just ui`: the UI, Locust and the server it brought up all end, quietly (exit 0, no traceback, no
server left running). Locust runs on gevent, whose event loop runs signal handlers, where no blocking wait
may run: the master's own quit path stops its server."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_ctrl_c_ends_the_ui_and_its_server_quietly(tmp_path, free_port):
    records = tmp_path / "session"
    # a terminal's Ctrl-C: SIGINT to the whole foreground process group, its default action in place
    proc = subprocess.Popen([sys.executable, "-m", "ddbench.ui", "cpu-tiny", "--port", str(free_port),
                             "--records-dir", str(records)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: (os.setsid(), signal.signal(signal.SIGINT, signal.SIG_DFL)),
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 120
        while not (records / "ar" / "status.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.5)
        url = f"http://127.0.0.1:{free_port}/ddbench/stats"
        while time.monotonic() < deadline:
            try:
                if b'"state":"up"' in urllib.request.urlopen(url, timeout=2).read().replace(b" ", b""):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        # a person presses Ctrl-C with no request of theirs in flight: let the server finish answering the poll
        # (gevent prints its own traceback for a request that the interrupt cuts short)
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "could not stop" not in out, out
    server = json.loads((records / "ar" / "status.json").read_text())["url"]
    try:
        urllib.request.urlopen(server + "/health", timeout=2)
        raise AssertionError(f"the server at {server} still answers")
    except OSError:
        pass
