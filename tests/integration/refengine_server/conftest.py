"""A real server process on a real port, serving the small random pair of tests/conftest.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def pair_dir(word_pair_dir) -> Path:
    return word_pair_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, pair: Path, *flags: str, env: dict | None = None, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        argv = [sys.executable, "-m", "refengine.serve", "--model-path", str(pair / "target"),
                "--port", str(self.port), "--device", "cpu", "--dtype", "float32", "--enable-metrics",
                "--context-length", "256", *flags]
        self.proc = subprocess.Popen(argv, cwd=REPO, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                                     env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
                                     start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not ready in 120 s:\n{log.read_text()[-3000:]}")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def server_factory(pair_dir, tmp_path_factory):
    started = []

    def start(*flags, env=None):
        s = Server(pair_dir, *flags, env=env, log=tmp_path_factory.mktemp("log") / "server.log")
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
