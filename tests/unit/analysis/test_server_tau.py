"""τ of a cell whose records carry no verify steps (SGLang): from the measured requests' stream chunks where
those are provably the verify steps, else from the server's counters, warm-up included."""

from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.trust.checks import server_tau
from ddbench.core import prom


def _run(requests, verify_calls):
    """One arm at C=1, a cell per repetition; requests: (repetition, warmup, completion tokens, chunks, ok)."""
    rq = pd.DataFrame(requests, columns=["repetition", "warmup", "completion_tokens", "content_chunks", "ok"])
    rq["arm"], rq["concurrency"] = "linear", 1
    gen = rq.groupby("repetition")["completion_tokens"].sum()
    server = pd.DataFrame(
        [{"arm": "linear", "concurrency": 1, "repetition": r, "metric": prom.GENERATED, "delta": float(gen[r])}
         for r in verify_calls]
        + [{"arm": "linear", "concurrency": 1, "repetition": r, "metric": prom.VERIFY_CALLS, "delta": float(v)}
           for r, v in verify_calls.items()])
    log = pd.DataFrame(columns=["arm", "concurrency", "repetition", "kind", "accept_len"])
    return SimpleNamespace(requests=rq, server=server, log=log)


# a hard warm-up (64 tokens in 31 steps) and two easy measured requests (64 tokens in 8 steps each)
CELL = [(1, True, 64, 32, True), (1, False, 64, 9, True), (1, False, 64, 9, True)]


def test_chunks_that_add_up_to_the_verify_calls_give_the_measured_requests_tau():
    tau, source = server_tau(_run(CELL, {1: 31 + 8 + 8}), "linear", 1, [1])
    assert tau == pytest.approx(128 / 16) and "stream chunks" in source


def test_otherwise_the_counters_warm_up_included():
    tau, source = server_tau(_run(CELL, {1: 40}), "linear", 1, [1])       # a batched or textless step
    assert tau == pytest.approx(192 / 40) and "warm-up included" in source
    failed = [*CELL[:2], (1, False, 10, 3, False)]
    tau, source = server_tau(_run(failed, {1: 31 + 8 + 2}), "linear", 1, [1])
    assert "warm-up included" in source


def test_every_cell_must_add_up():
    two = CELL + [(2, True, 64, 32, True), (2, False, 64, 9, True), (2, False, 64, 9, True)]
    assert "stream chunks" in server_tau(_run(two, {1: 47, 2: 47}), "linear", 1, [1, 2])[1]
    assert "warm-up included" in server_tau(_run(two, {1: 47, 2: 46}), "linear", 1, [1, 2])[1]


def test_the_counters_themselves_on_request():
    tau, source = server_tau(_run(CELL, {1: 47}), "linear", 1, [1], measured_only=False)
    assert tau == pytest.approx(192 / 47) and "warm-up included" in source
