"""Whole cells against a real null server process: real Locust, real HTTP, real files."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

from ddbench.core.prompts import load_prompts
from ddbench.core.records import CellStatus
from loadtests import plan
from loadtests.recorder import read_records

REPO = Path(__file__).resolve().parents[3]


def run(profile, url, cell_dir, concurrency, *extra, timeout=180):
    argv = [sys.executable, "-m", "loadtests", "run", "--profile", str(profile), "--arm", "ar",
            "--concurrency", str(concurrency), "--url", url, "--cell-dir", str(cell_dir), *extra]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def status(cell_dir) -> CellStatus:
    return CellStatus.model_validate_json((cell_dir / "status.json").read_text())


def locust_total(cell_dir) -> int:
    rows = (cell_dir / "locust_stats.csv").read_text().splitlines()
    agg = [r for r in rows if ",Aggregated," in r][0]
    return int(agg.split(",")[2])


def test_closed_loop_cell_records_every_stream_as_sent(null_server, write_profile, tmp_path):
    # a long gap makes a reader that waits for a full buffer show up as ~one gap of TTFT error
    srv = null_server(ttft_ms=150, itl_ms=250, tokens=12, tokens_per_chunk=4)
    prof = write_profile({"concurrency": [4], "warmup_requests": 1, "requests_per_user": 3, "seed": 5})
    cell = tmp_path / "ar" / "c4-r1"
    p = run(prof, srv.url, cell, 4)
    assert p.returncode == 0, p.stdout + p.stderr
    st = status(cell)
    assert (st.status, st.requests, st.errors, st.arm, st.concurrency, st.repetition) == ("ok", 12, 0, "ar", 4, 1)
    recs = read_records(cell)
    assert len(recs) == 16 == locust_total(cell)
    assert sum(r.warmup for r in recs) == 4
    for r in recs:
        assert r.ok and r.finish_reason == "length"
        assert r.usage.completion_tokens == 12
        assert r.spec == {"spec_verify_ct": 3, "spec_accept_length": 4.0, "spec_num_correct_drafts": 9}
        assert [c.text for c in r.chunks] == [" t0 t1 t2 t3", " t4 t5 t6 t7", " t8 t9 t10 t11"]
        assert r.send_ns < r.headers_ns <= r.chunks[0].t_ns < r.chunks[-1].t_ns <= r.end_ns
    ttft_ms = [(r.chunks[0].t_ns - r.send_ns) / 1e6 for r in recs if not r.warmup]
    gaps_ms = [(b.t_ns - a.t_ns) / 1e6 for r in recs if not r.warmup for a, b in pairwise(r.chunks)]
    assert 150 <= statistics.median(ttft_ms) < 150 + 250 / 2
    assert abs(statistics.median(gaps_ms) - 250) < 250 / 2
    # each user's warmup comes first; the measured prompts are the plan's multiset for C=4
    assert sorted(r.user for r in recs) == sorted(list(range(4)) * 4)
    order = plan.prompt_order(load_prompts(REPO / "loadtests/prompts/study5.jsonl"), 5)
    expected = Counter(order[k % len(order)].id for k in range(4, 16))
    assert Counter(r.prompt_id for r in recs if not r.warmup) == expected
    assert st.window_start_ns == max(r.end_ns for r in recs if r.warmup)
    assert st.window_end_ns == max(r.end_ns for r in recs)
    # the server saw the request ids the records carry, and before them the one request that asks whether it
    # streams token ids (client.streams_token_ids)
    server_ids = [json.loads(line)["rid"] for line in srv.log.read_text().splitlines()]
    assert server_ids[0] == "token-ids-probe" and set(server_ids[1:]) == {r.request_id for r in recs}


def test_every_repetition_of_a_cell_sends_the_same_prompts(null_server, write_profile, tmp_path):
    # a C=1 cell sends 3 of study5's 5 prompts: a repetition must not draw another subset
    srv = null_server(ttft_ms=1, itl_ms=1, tokens=2)
    prof = write_profile({"concurrency": [1], "warmup_requests": 1, "requests_per_user": 2, "seed": 3})
    sent = []
    for rep in (1, 2, 3):
        cell = tmp_path / "ar" / f"c1-r{rep}"
        p = run(prof, srv.url, cell, 1, "--repetition", str(rep))
        assert p.returncode == 0, p.stdout + p.stderr
        recs = sorted(read_records(cell), key=lambda r: r.send_ns)
        assert {r.repetition for r in recs} == {rep}
        sent.append([(r.warmup, r.prompt_id) for r in recs])
    assert sent[0] == sent[1] == sent[2]
    assert len({pid for _, pid in sent[0]}) == 3


def test_two_local_workers_write_one_record_per_completed_request(null_server, write_profile, tmp_path):
    srv = null_server(ttft_ms=20, itl_ms=5, tokens=8)
    prof = write_profile({"concurrency": [5], "warmup_requests": 1, "requests_per_user": 4, "processes": 2})
    cell = tmp_path / "c5-r1"
    p = run(prof, srv.url, cell, 5)
    assert p.returncode == 0, p.stdout + p.stderr
    files = sorted(cell.glob("requests-*.jsonl"))
    assert len(files) == 2
    recs = read_records(cell)
    assert len(recs) == locust_total(cell) == 5 * 5
    assert len({r.worker for r in recs}) == 2
    assert sorted({r.user for r in recs}) == [0, 1, 2, 3, 4]  # one index space across processes
    assert status(cell).status == "ok" and status(cell).requests == 20


def test_server_errors_and_dropped_streams_become_records(null_server, write_profile, tmp_path):
    srv = null_server(ttft_ms=10, itl_ms=5, tokens=10, error_every=3, drop_every=4)
    prof = write_profile({"concurrency": [2], "warmup_requests": 0, "requests_per_user": 6})
    cell = tmp_path / "c2-r1"
    p = run(prof, srv.url, cell, 2)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = read_records(cell)
    assert len(recs) == 12 == locust_total(cell)
    http_errors = [r for r in recs if r.status == 500]
    dropped = [r for r in recs if r.status == 200 and r.error]
    assert len(http_errors) == 4 and all("injected error" in r.error for r in http_errors)
    assert dropped and all(r.finish_reason is None and 0 < len(r.chunks) < 10 for r in dropped)
    st = status(cell)
    assert st.status == "ok" and st.errors == len(http_errors) + len(dropped)


def test_unreachable_server_fails_fast_with_a_clear_message(write_profile, free_port, tmp_path):
    prof = write_profile({"concurrency": [2], "requests_per_user": 1})
    t = time.monotonic()
    p = run(prof, f"http://127.0.0.1:{free_port}", tmp_path / "c", 2, timeout=60)
    assert time.monotonic() - t < 30
    assert p.returncode == 1 and "cannot reach the server" in p.stdout
    st = status(tmp_path / "c")
    assert st.status == "failed" and "Connection refused" in st.reason


def test_a_malformed_prompt_file_is_named_before_any_load(null_server, write_profile, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "category": "code", "messages": [{"role": "user", "content": "x"}]}\n{"id": \n')
    prof = write_profile({"concurrency": [1], "requests_per_user": 1}, {"prompt_set": str(bad)})
    p = run(prof, "http://127.0.0.1:9", tmp_path / "c", 1, timeout=60)
    assert p.returncode == 2 and f"{bad}:2: not valid JSON" in p.stderr


def test_open_loop_records_intended_send_times(null_server, write_profile, tmp_path):
    srv = null_server(ttft_ms=10, itl_ms=2, tokens=4)
    prof = write_profile({"mode": "open", "rate": 40, "arrival": "constant", "concurrency": [3],
                          "warmup_requests": 1, "requests_per_user": 3})
    cell = tmp_path / "c3-r1"
    p = run(prof, srv.url, cell, 3)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = sorted(read_records(cell), key=lambda r: r.intended_send_ns)
    assert len(recs) == 12 and sum(r.warmup for r in recs) == 3
    assert all(r.warmup for r in recs[:3])
    spacing = [(b.intended_send_ns - a.intended_send_ns) / 1e6 for a, b in pairwise(recs)]
    assert all(abs(s - 25.0) < 0.01 for s in spacing)  # the schedule itself, not measured timing
    assert all(r.send_ns >= r.intended_send_ns for r in recs)
    assert status(cell).window_start_ns == recs[3].intended_send_ns


def test_duration_mode_ends_cleanly(null_server, write_profile, tmp_path):
    srv = null_server(ttft_ms=30, itl_ms=10, tokens=10)
    prof = write_profile({"concurrency": [3], "warmup_requests": 1, "duration_s": 1.0})
    cell = tmp_path / "c3-r1"
    p = run(prof, srv.url, cell, 3)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = read_records(cell)
    measured = [r for r in recs if not r.warmup]
    assert len(recs) == locust_total(cell)
    assert all(r.ok and len(r.chunks) == 10 for r in recs)  # nothing cut off
    for u in range(3):
        mine = sorted((r for r in measured if r.user == u), key=lambda r: r.send_ns)
        assert 3 <= len(mine) <= 10  # ~130 ms per request over 1 s
        warm_end = next(r.end_ns for r in recs if r.user == u and r.warmup)
        assert all(r.send_ns < warm_end + 1.1e9 for r in mine)
