"""Locust's web UI on 127.0.0.1:8089, with ddbench's options in its form and its LLM view (liveweb.py).

    run_ui(profile, profile_ref, arm, *, url=None, port=8089, processes=None, records_dir=None,
           locustfiles=(LOCUSTFILE,)) -> int

With url it drives that server. Without, the Locust master brings the arm up itself (and switches arms),
through the servers that a further locustfile gives the live view (liveweb.SERVERS: `ddbench ui` passes
ddbench/ui_servers.py). Records of every run started from the UI go to results/adhoc/<time>/ (one file per Locust
process). This blocks until the UI process ends and returns its exit code.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from ddbench.core.profile import Profile
from ddbench.core.results import RESULTS_ROOT
from loadtests.cell import LOCUSTFILE, probe, processes_argv
from loadtests.client import streams_token_ids
from loadtests.options import cell_argv

UI_HOST = "127.0.0.1"
UI_PORT = 8089


def adhoc_dir() -> Path:
    return RESULTS_ROOT / "adhoc" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def ui_argv(profile: Profile, profile_ref: str, arm: str, *, url: str | None, port: int, processes: int,
            records_dir: Path, model: str, token_ids: bool = True,
            locustfiles: tuple[Path, ...] = (LOCUSTFILE,)) -> list[str]:
    profile.arm(arm)  # an unknown arm is an error naming the profile's arms
    users = profile.load.concurrency[0]
    argv = [sys.executable, "-m", "locust", "-f", ",".join(map(str, locustfiles)), "--web-host", UI_HOST,
            "--web-port", str(port), "-u", str(users), "-r", str(max(users, 100)), "--ddbench-live",
            "--ddbench-profile", profile_ref]
    argv += ["--host", url] if url else ["--ddbench-serve"]
    argv += processes_argv(processes)
    # concurrency 0: each record carries the user count chosen in the UI
    return argv + cell_argv(profile.workload, profile.load_for(arm), arm=arm, concurrency=0, repetition=1,
                            records_dir=records_dir, model=model, token_ids=token_ids)


def run_ui(profile: Profile, profile_ref: str, arm: str, *, url: str | None = None, port: int = UI_PORT,
           processes: int | None = None, records_dir: Path | None = None,
           locustfiles: tuple[Path, ...] = (LOCUSTFILE,)) -> int:
    records_dir = records_dir or adhoc_dir()
    model = probe(url) if url else ""
    argv = ui_argv(profile, profile_ref, arm, url=url, port=port, processes=processes or profile.load.processes,
                   records_dir=records_dir, model=model, locustfiles=locustfiles,
                   token_ids=streams_token_ids(url, model, profile.workload.api) if url else True)
    print(f"Locust web UI on http://{UI_HOST}:{port}, LLM view on http://{UI_HOST}:{port}/ddbench  "
          f"(records: {records_dir})", flush=True)
    proc = subprocess.Popen(argv, cwd=LOCUSTFILE.parent.parent)
    if threading.current_thread() is threading.main_thread():
        # a SIGTERM to us must not orphan the UI: turn it into an exit that runs the finally
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return proc.wait()  # Locust got the same Ctrl-C and is shutting down
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)   # the master takes its server down as it quits
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
