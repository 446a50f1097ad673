"""One cell, headless: Locust against a running server, records and status.json in the cell directory.

The orchestrator (`just load`, `reproduce`) calls:

    run_cell(workload: Workload, load: Load, *, url: str, cell_dir: Path, arm: str,
             concurrency: int, repetition: int, processes: int | None = None,
             model: str | None = None, timeout_s: float = 3600.0) -> CellStatus

It brings nothing up: the arm must already serve `url`. It refuses a cell directory that
already holds records (cells are never mixed), fails fast on an unreachable server, runs
`locust -f loadtests/locustfile.py --headless` as a subprocess (with --processes N local
workers when asked), samples the CPU of every Locust process, and writes status.json (a
CellStatus with the measured window) atomically. Locust's CSV/HTML land beside the records
as sanity artifacts; its request count is checked against ours.
"""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ddbench.core import formulas
from ddbench.core.answers import gist, refused
from ddbench.core.cpus import pinner, usable
from ddbench.core.profile import Load, Workload
from ddbench.core.prompts import load_prompt_set
from ddbench.core.records import CellStatus, RequestRecord
from ddbench.core.results import STATUS, record_files, write_json_atomic
from loadtests.client import API_KEY_ENV, streams_token_ids
from loadtests.cpu import CPU_FILE, CPU_LIMIT, CpuSampler, peak
from loadtests.options import cell_argv, resolve_sources
from loadtests.random_prompts import maker
from loadtests.recorder import read_records

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
LOCUST_LOG = "locust.log"
PROBE_TIMEOUT_S = 5.0


class CellError(RuntimeError):
    """A cell that cannot start; the message says why."""


def probe(url: str) -> str:
    """The served model's name, or a CellError that says the server cannot be reached."""
    try:
        r = httpx.get(url.rstrip("/") + "/v1/models", timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as e:
        raise CellError(f"cannot reach the server at {url}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise CellError(refused(f"{url}/v1/models", r.status_code, r.text))
    try:
        return r.json()["data"][0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise CellError(f"{url}/v1/models did not list a model: {gist(r.text)}") from None


def locust_argv(workload: Workload, load: Load, *, url: str, cell_dir: Path, arm: str, concurrency: int,
                repetition: int, processes: int, model: str, tokenizer: str | Path | None = None,
                token_ids: bool = True) -> list[str]:
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
            # all users at once: closed-loop users start together, warmup absorbs the burst
            "-u", str(concurrency), "-r", str(max(concurrency, 1000)), "--host", url,
            "--csv", str(cell_dir / "locust"), "--html", str(cell_dir / "locust.html"),
            "--exit-code-on-error", "0", "--only-summary", "--stop-timeout", "10"]
    return argv + processes_argv(processes) + cell_argv(workload, load, arm=arm, concurrency=concurrency,
                                                        repetition=repetition, records_dir=cell_dir, model=model,
                                                        tokenizer=tokenizer, token_ids=token_ids)


def processes_argv(processes: int) -> list[str]:
    """--processes N, with a master port of its own: Locust's default (5557) is shared by every run on the
    host, so a second multi-process Locust (a UI beside a sweep) would fail to bind."""
    if processes <= 1:
        return []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    return ["--processes", str(processes), "--master-bind-port", port, "--master-port", port]


def run_cell(workload: Workload, load: Load, *, url: str, cell_dir: Path, arm: str, concurrency: int,
             repetition: int, processes: int | None = None, model: str | None = None,
             timeout_s: float = 3600.0, api_key_env: str | None = None,
             tokenizer: str | Path | None = None, token_ids: bool | None = None) -> CellStatus:
    """api_key_env: the name of the variable holding the server's API key (an external arm's), which the
    load generator then sends; the key is passed by environment only. tokenizer: the target's tokenizer
    directory, which random prompts are measured with. token_ids: whether the server streams token ids
    (None: asked here, client.streams_token_ids)."""
    cell_dir = Path(cell_dir)
    if record_files(cell_dir):
        raise CellError(f"{cell_dir}: already holds request records; a cell is never run twice into one directory")
    load_prompt_set(resolve_sources(workload.prompt_set), workload.categories or None,  # errors name file:line
                    random=maker(workload.input, load.seed, tokenizer))
    cell_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    base = dict(arm=arm, concurrency=concurrency, repetition=repetition, started_unix=started)
    try:
        model = model or probe(url)
        token_ids = streams_token_ids(url, model, workload.api) if token_ids is None else token_ids
    except CellError as e:
        return finish(cell_dir, CellStatus(**base, status="failed", reason=str(e), ended_unix=time.time()))
    try:
        cpus = usable(load.cpus, "load.cpus") if load.cpus else None
    except ValueError as e:
        return finish(cell_dir, CellStatus(**base, status="failed", reason=str(e), ended_unix=time.time()))
    argv = locust_argv(workload, load, url=url, cell_dir=cell_dir, arm=arm, concurrency=concurrency,
                       repetition=repetition, processes=processes or load.processes, model=model,
                       tokenizer=tokenizer, token_ids=token_ids)
    with open(cell_dir / LOCUST_LOG, "w") as logf:
        env = {**os.environ, API_KEY_ENV: api_key_env} if api_key_env else None
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, cwd=LOCUSTFILE.parent.parent,
                                preexec_fn=pinner(cpus), env=env)
        sampler = CpuSampler(proc.pid, cell_dir / CPU_FILE).start()
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:  # also when we are interrupted: never leave Locust running
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
            rc = proc.wait()
            samples = sampler.stop()
    records = read_records(cell_dir)
    status = judge(records, load, concurrency, rc, timed_out, timeout_s, cell_dir)
    start_ns, end_ns = status.window_start_ns, status.window_end_ns
    cpu = peak(samples, start_ns, end_ns)
    status = status.model_copy(update={**base, "ended_unix": time.time(), "client_cpu_max": cpu})
    if status.status == "ok" and cpu is not None and cpu > CPU_LIMIT:
        status = status.model_copy(update={
            "reason": f"client CPU peaked at {cpu:.0f}% (> {CPU_LIMIT:.0f}%): latencies may be inflated"})
    return finish(cell_dir, status)


def finish(cell_dir: Path, status: CellStatus) -> CellStatus:
    write_json_atomic(cell_dir / STATUS, status.model_dump(mode="json"))
    return status


def window(records: list[RequestRecord], mode: str) -> tuple[int | None, int | None]:
    """Warmup done (every user past its warmup) .. the last measured request ended."""
    measured = [r for r in records if not r.warmup and r.end_ns is not None]
    if not measured:
        return None, None
    warm_ends = [r.end_ns for r in records if r.warmup and r.end_ns is not None]
    first, last = formulas.span([r.send_ns for r in measured], [r.end_ns for r in measured])
    if mode == "open":
        first = min(r.intended_send_ns or r.send_ns for r in measured)
    elif warm_ends:
        first = max(warm_ends)
    return first, last


def judge(records: list[RequestRecord], load: Load, concurrency: int, rc: int, timed_out: bool,
          timeout_s: float, cell_dir: Path) -> CellStatus:
    measured = [r for r in records if not r.warmup]
    errors = sum(not r.ok for r in measured)
    start, end = window(records, load.mode)
    fields = dict(arm="", concurrency=concurrency, repetition=0, requests=len(measured), errors=errors,
                  window_start_ns=start, window_end_ns=end)
    reason = None
    if timed_out:
        reason = f"the cell ran past its {timeout_s:.0f} s limit and was stopped"
    elif rc != 0:
        reason = f"locust exited with code {rc}; see {cell_dir / LOCUST_LOG}"
    elif not measured:
        reason = "no measured request completed"
    elif (n := load.per_user(concurrency)) and load.mode == "closed" and len(measured) != concurrency * n:
        reason = (f"expected {concurrency} x {n} measured requests, "
                  f"got {len(measured)} records (a Locust process died?)")
    else:
        counted = locust_count(cell_dir)
        if counted is not None and counted != len(records):
            reason = f"Locust counted {counted} requests but {len(records)} records were written"
    return CellStatus(**fields, status="failed" if reason else "ok", reason=reason)


def locust_count(cell_dir: Path) -> int | None:
    """Requests in Locust's own CSV (its Aggregated row), a cross-check on the records."""
    path = cell_dir / "locust_stats.csv"
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("Name") == "Aggregated":
                return int(row["Request Count"])
    return None
