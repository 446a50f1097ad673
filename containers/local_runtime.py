"""Run a server as a subprocess on this host: the same handle as a container, without Docker.

The server gets its own process group (with the log pump that redacts its output into
server.log), so stopping it stops everything it started. A server this process owns is
stopped at exit and on SIGINT/SIGTERM; one started detached (`up`, leaving it running) is
recorded in a state file so that `down` from another process can stop it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from containers import cleanup
from ddbench.core.cpus import pinner
from ddbench.core.profile import REPO_ROOT

STOP_TIMEOUT_S = 10
STATE_DIR = Path(os.environ.get("DDBENCH_STATE_DIR") or Path.home() / ".cache" / "ddbench") / "local"


class LocalServer:
    def __init__(self, pgid: int, pid: int, created: float, url: str, log_path: Path, proc=None, labels=None,
                 pump=None):
        self.pgid, self.pid, self.created = pgid, pid, created
        self.url, self.log_path, self.proc, self.pump = url, log_path, proc, pump
        self.labels = labels or {}

    @property
    def ident(self) -> str:
        return f"pid {self.pid}"

    def image_id(self) -> None:
        return None

    def _same_process(self) -> psutil.Process | None:
        # a pid can be reused once the server is gone: trust it only with the start time we saw
        try:
            p = psutil.Process(self.pid)
            return p if abs(p.create_time() - self.created) < 1.0 and p.status() != psutil.STATUS_ZOMBIE else None
        except psutil.NoSuchProcess:
            return None

    def exited(self) -> str | None:
        if self.proc is not None:
            rc = self.proc.poll()
            if rc is None:
                return None
            return f"exited with code {rc}" if rc >= 0 else f"was killed by {signal.Signals(-rc).name}"
        return None if self._same_process() else "exited"

    def logs(self) -> str:
        if self.pump is not None and self.proc is not None and self.proc.poll() is not None:
            try:  # the server is gone: let the pump write what is left in the pipe first
                self.pump.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def stop(self) -> None:
        """SIGTERM the whole group, SIGKILL what is left after a grace period."""
        try:
            os.killpg(self.pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and _group_alive(self.pgid):
            if self.proc is not None:
                self.proc.poll()
            time.sleep(0.05)
        if _group_alive(self.pgid):
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in (self.proc, self.pump):
            if p is not None:
                p.wait()
        cleanup.disown(self)
        state_file(self.pgid).unlink(missing_ok=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # members that exited but were not reaped yet (our own children) do not count
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return False


def state_file(pgid: int) -> Path:
    return STATE_DIR / f"{pgid}.json"


def start(argv: list[str], *, env: dict[str, str], url: str, log_path: Path, labels: dict[str, str] | None = None,
          detach: bool = False, cwd: Path = REPO_ROOT, cpus: frozenset[int] | None = None) -> LocalServer:
    """Start argv in a new process group, its output redacted into log_path; cpus pins the server."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    read, write = os.pipe()
    full_env = {**os.environ, **env}
    try:
        pump = subprocess.Popen([sys.executable, "-m", "containers.logpump", str(log_path)], stdin=read,
                                cwd=REPO_ROOT, env=full_env, process_group=0)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=write, stderr=subprocess.STDOUT, cwd=cwd,
                                    env=full_env, process_group=pump.pid, preexec_fn=pinner(cpus))
        except OSError:
            os.killpg(pump.pid, signal.SIGKILL)
            raise
    finally:
        os.close(read)
        os.close(write)
    server = LocalServer(pump.pid, proc.pid, psutil.Process(proc.pid).create_time(), url, log_path, proc, labels,
                         pump)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state_file(server.pgid).write_text(json.dumps({
        "pgid": server.pgid, "pid": server.pid, "created": server.created, "url": url, "log": str(log_path),
        "argv": argv, "labels": labels or {}}))
    if not detach:
        cleanup.own(server)
    return server


def recorded() -> list[LocalServer]:
    """Servers started here, detached or not, whose process still runs."""
    out = []
    for path in sorted(STATE_DIR.glob("*.json")):
        try:
            s = json.loads(path.read_text())
            server = LocalServer(s["pgid"], s["pid"], s["created"], s["url"], Path(s["log"]), labels=s.get("labels"))
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
            continue
        if server._same_process() or _group_alive(server.pgid):
            out.append(server)
        else:
            path.unlink(missing_ok=True)
    return out


def down(filters: dict[str, str] | None = None) -> list[str]:
    stopped = []
    for server in recorded():
        if all(server.labels.get(k) == v for k, v in (filters or {}).items()):
            server.stop()
            stopped.append(f"{server.labels.get('ddbench.arm', '?')} ({server.ident})")
    return stopped
