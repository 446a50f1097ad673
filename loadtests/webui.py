"""Locust's web UI on 127.0.0.1:8089 against a running arm, with ddbench's options in its form.

    run_ui(profile: Profile, arm: str, *, url: str, port: int = 8089, processes: int | None = None,
           records_dir: Path | None = None) -> int

Records of every run started from the UI go to results/adhoc/<time>/ (one file per Locust
process). Bringing the arm up and down is the caller's part (`just ui` wraps this once
bring-up exists); this blocks until the UI process ends and returns its exit code.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from ddbench.profile import Profile
from ddbench.results import RESULTS_ROOT
from loadtests.cell import LOCUSTFILE, probe
from loadtests.options import cell_argv

UI_HOST = "127.0.0.1"
UI_PORT = 8089


def adhoc_dir() -> Path:
    return RESULTS_ROOT / "adhoc" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def ui_argv(profile: Profile, arm: str, *, url: str, port: int, processes: int, records_dir: Path,
            model: str) -> list[str]:
    profile.arm(arm)  # an unknown arm is an error naming the profile's arms
    users = profile.load.concurrency[0]
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", url,
            "--web-host", UI_HOST, "--web-port", str(port), "-u", str(users), "-r", str(max(users, 100))]
    if processes > 1:
        argv += ["--processes", str(processes)]
    # concurrency 0: each record carries the user count chosen in the UI
    return argv + cell_argv(profile.workload, profile.load, arm=arm, concurrency=0, repetition=1,
                            records_dir=records_dir, model=model)


def run_ui(profile: Profile, arm: str, *, url: str, port: int = UI_PORT, processes: int | None = None,
           records_dir: Path | None = None) -> int:
    records_dir = records_dir or adhoc_dir()
    argv = ui_argv(profile, arm, url=url, port=port, processes=processes or profile.load.processes,
                   records_dir=records_dir, model=probe(url))
    print(f"Locust web UI on http://{UI_HOST}:{port}  (records: {records_dir})", flush=True)
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
            proc.wait()
