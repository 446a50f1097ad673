"""The locustfile on its own (`locust -f loadtests/locustfile.py --host URL`), outside ddbench's runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loadtests.recorder import read_records

REPO = Path(__file__).resolve().parents[3]
LOCUSTFILE = REPO / "loadtests" / "locustfile.py"


def locust(url, records, *extra, cwd):
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", url, "--headless",
            "--records-dir", str(records), "--prompt-set", "loadtests/prompts/chat.jsonl", "--only-summary", *extra]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_standalone_run_from_another_directory(null_server, tmp_path):
    srv = null_server(ttft_ms=10, itl_ms=2, tokens=6)
    p = locust(srv.url, tmp_path / "r", "-u", "2", "-r", "2", "--requests-per-user", "3", "--category", "json",
               "--arm", "linear-b16", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    recs = read_records(tmp_path / "r")
    assert len(recs) == 6
    assert all(r.category == "json" and r.arm == "linear-b16" and r.concurrency == 2 and r.ok for r in recs)


def test_workers_can_send_records_through_the_master(null_server, tmp_path):
    srv = null_server(ttft_ms=10, itl_ms=2, tokens=6)
    p = locust(srv.url, tmp_path / "r", "-u", "4", "-r", "4", "--processes", "2", "--requests-per-user", "3",
               "--records-to-master", "true", cwd=REPO)
    assert p.returncode == 0, p.stderr
    files = sorted((tmp_path / "r").glob("requests-*.jsonl"))
    recs = read_records(tmp_path / "r")
    assert len(recs) == 12 and len(files) == 2
    # the master wrote them, one file per sending worker, named after that worker
    assert {f.name for f in files} == {f"requests-{w.replace(':', '-')}.jsonl" for w in {r.worker for r in recs}}


def test_bad_options_and_prompt_files_stop_locust_with_a_named_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "category": "code"}\n')
    p = locust("http://127.0.0.1:9", tmp_path / "r", "--prompt-set", str(bad), cwd=REPO)
    assert p.returncode == 2 and f"{bad}:1: messages" in p.stderr
    p = locust("http://127.0.0.1:9", tmp_path / "r", "--mode", "open", cwd=REPO)
    assert p.returncode == 2 and "--mode open needs --rate" in p.stderr
