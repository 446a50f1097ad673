"""Rounds: every arm's requests interleaved unit by unit, so that each arm samples the same server states.

    run_stretch(targets, load, *, concurrency, repetition, tokenizer=None) -> {arm: CellStatus}

A server drifts through slow and fast states that last seconds. Whole cells (tens of seconds per
arm) sample a handful of them, so a ratio of two arms carries the states' spread. A stretch instead
runs R rounds; in round j every arm serves one *unit* in turn (the arm order rotated by j, so every
arm takes every place equally often): C users at once, each sending one request, the same C prompts
(slots j*C .. j*C+C-1 of the closed-loop order, ddbench/loadtests.plan) to every arm of the round.
A unit is over when its last request ends; the next arm's unit starts then.

At a level with load.unit_s, a unit is a block of that many seconds instead: each user sends its
requests back to back until the block's time is up (user u's k-th request of round j takes slot
u + (j*BLOCK_STRIDE + k)*C, so every arm of a round starts from the same prompts and goes on through
the same sequence), and the unit is over when the last of them ends. Its steady window, all C in
flight, then runs to the first user's last end instead of the first request's end: at C=8 and 512
tokens a speculative unit of one request per user spent about a third of its time in that window,
and which request ended first, decided by a few tokens of acceptance, decided the window.

Each arm's requests of the stretch go to its own cell directory with their round number, and its
status.json gives `busy_ns`, the sum of its units' lengths: the arm's throughput is its tokens over
its own units' steady windows (analysis/estimate/rounds.py), not over the stretch, which the other arms share. The first
load.warmup_requests rounds are unmeasured. Requests are streamed with httpx in threads, one thread per user,
through loadtests/client.py's stream (timed and parsed as Locust's requests are).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import httpx

from ddbench.core import formulas
from ddbench.core.profile import Load, Workload
from ddbench.core.prompts import load_prompt_set
from ddbench.core.records import CellStatus, RequestRecord
from ddbench.core.results import STATUS, record_files, write_json_atomic
from loadtests import plan
from loadtests.client import PATHS, chat_body, stream
from loadtests.options import resolve_sources
from loadtests.random_prompts import maker
from loadtests.recorder import RecordFile, worker_name

BLOCK_STRIDE = 16   # a block's requests per user before its slots run into the next round's


@dataclass(frozen=True)
class Target:
    """One arm of a stretch: where its server answers and where its cell goes."""

    arm: str
    url: str
    cell_dir: Path
    workload: Workload
    model: str
    token_ids: bool = True   # whether the server streams token ids (client.streams_token_ids)


def rotation(arms: list[str], j: int) -> list[str]:
    """Round j's order: the arms rotated by j."""
    k = j % len(arms)
    return arms[k:] + arms[:k]


def _request(client: httpx.Client, t: Target, load: Load, prompt, slot: int, *, concurrency: int,
             repetition: int, round_: int, user: int, warmup: bool) -> RequestRecord:
    w = t.workload
    seed = plan.request_seed(load.seed, repetition, slot) if w.temperature > 0 else None
    if w.output is not None:
        prompt = prompt.model_copy(update={"max_tokens": plan.output_target(w.output, w.max_tokens, load.seed, slot)})
    body = chat_body(prompt, model=t.model, max_tokens=w.max_tokens, temperature=w.temperature, top_p=w.top_p,
                     top_k=w.top_k, ignore_eos=w.ignore_eos, seed=seed, api=w.api, token_ids=t.token_ids)
    rid = uuid.uuid4().hex
    raw = stream(client, body, rid, PATHS[w.api])
    return RequestRecord(
        request_id=rid, arm=t.arm, concurrency=concurrency, repetition=repetition, warmup=warmup,
        prompt_id=prompt.id, category=prompt.category, worker=worker_name(), user=user, round=round_,
        max_tokens=body["max_tokens"], temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, seed=seed,
        target_input_tokens=prompt.input_tokens, target_output_tokens=body["max_tokens"] if w.ignore_eos else None,
        **raw)


def block_slot(user: int, round_: int, k: int, users: int) -> int:
    """The slot of user u's k-th request in a block of round j."""
    return plan.closed_loop_slot(user, round_ * BLOCK_STRIDE + k, users)


def _unit(pool: ThreadPoolExecutor, client: httpx.Client, t: Target, load: Load, order: list, *, concurrency: int,
          repetition: int, round_: int, warmup: bool) -> list[RequestRecord]:
    """One arm's unit of round j: its C users at once, user u sending closed-loop slot u + j*C's prompt, or in a
    block (load.unit_s at C) sending on back to back until the block's seconds are up."""
    seconds = load.unit_seconds(concurrency)
    deadline = time.perf_counter() + (seconds or 0.0)

    def send(u: int, slot: int) -> RequestRecord:
        return _request(client, t, load, order[slot % len(order)], slot, concurrency=concurrency,
                        repetition=repetition, round_=round_, user=u, warmup=warmup)

    def user(u: int) -> list[RequestRecord]:
        if seconds is None:
            return [send(u, plan.closed_loop_slot(u, round_, concurrency))]
        out = [send(u, block_slot(u, round_, 0, concurrency))]
        while time.perf_counter() < deadline:
            out.append(send(u, block_slot(u, round_, len(out), concurrency)))
        return out

    return [r for rs in pool.map(user, range(concurrency)) for r in rs]


def run_stretch(targets: list[Target], load: Load, *, concurrency: int, repetition: int,
                tokenizer: str | Path | None = None,
                around: Callable[[Target], AbstractContextManager] | None = None) -> dict[str, CellStatus]:
    """Every arm's cell at (concurrency, repetition), run as one stretch of interleaved rounds. around(target),
    when given, wraps each of that arm's measured units (a profiler: containers/kernel_time.py)."""
    for t in targets:
        if record_files(t.cell_dir):
            raise RuntimeError(f"{t.cell_dir}: already holds request records; a cell is never run twice into one "
                               "directory")
    w = targets[0].workload
    prompts = load_prompt_set(resolve_sources(w.prompt_set), w.categories or None,
                              random=maker(w.input, load.seed, tokenizer))
    order = plan.prompt_order(prompts, load.seed)
    rounds = load.warmup_requests + (load.per_user(concurrency) or 1)
    by_arm = {t.arm: t for t in targets}
    files = {}
    busy = dict.fromkeys(by_arm, 0)
    started = time.time()
    for t in targets:
        t.cell_dir.mkdir(parents=True, exist_ok=True)
        files[t.arm] = RecordFile(t.cell_dir, worker_name())
    clients = {t.arm: httpx.Client(base_url=t.url, headers={"Content-Type": "application/json"},
                                   limits=httpx.Limits(max_connections=concurrency)) for t in targets}
    records: dict[str, list[RequestRecord]] = {a: [] for a in by_arm}
    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for j in range(rounds):
                warm = j < load.warmup_requests
                for arm in rotation(list(by_arm), j):
                    t = by_arm[arm]
                    with nullcontext() if around is None or warm else around(t):
                        t0 = time.perf_counter_ns()
                        done = _unit(pool, clients[arm], t, load, order, concurrency=concurrency,
                                     repetition=repetition, round_=j, warmup=warm)
                    if not warm:
                        busy[arm] += time.perf_counter_ns() - t0
                    for rec in done:
                        files[arm].write(rec)
                    records[arm] += done
    finally:
        for c in clients.values():
            c.close()
        for f in files.values():
            f.close()
    ended = time.time()
    return {a: _finish(by_arm[a], records[a], busy[a], concurrency, repetition, started, ended) for a in by_arm}


def _finish(t: Target, records: list[RequestRecord], busy_ns: int, concurrency: int, repetition: int,
            started: float, ended: float) -> CellStatus:
    measured = [r for r in records if not r.warmup]
    errors = sum(not r.ok for r in measured)
    reason = None if measured else "no measured request completed"
    start, stop = formulas.span([r.send_ns for r in measured], [r.end_ns for r in measured])
    if stop != stop:   # no measured request ended: no window
        start = stop = None
    status = CellStatus(arm=t.arm, concurrency=concurrency, repetition=repetition,
                        status="failed" if reason else "ok", reason=reason, started_unix=started, ended_unix=ended,
                        window_start_ns=start, window_end_ns=stop,
                        requests=len(measured), errors=errors, busy_ns=busy_ns or None)
    write_json_atomic(t.cell_dir / STATUS, status.model_dump(mode="json"))
    return status
