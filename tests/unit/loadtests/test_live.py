"""The web UI's live figures: which requests a window holds, and the shared formulas over them."""

import pytest

from ddbench.core.records import Chunk, RequestRecord, Usage
from loadtests.live import LiveStats, ServerCounters, fact, summary, table

T0 = 1_000.0   # wall clock of the load's start, s


def rec(send_ns=0, chunks=(10, 20, 30, 40), end_ns=50, tokens=4, spec=None, warmup=False, status=200, arm="linear"):
    ms = 1_000_000
    return RequestRecord(request_id="r", arm=arm, concurrency=2, repetition=1, warmup=warmup, prompt_id="p",
                         category="c", worker="w", user=0, max_tokens=tokens, temperature=0.0,
                         send_ns=send_ns * ms, send_unix_ns=int(T0 * 1e9) + send_ns * ms,
                         chunks=[Chunk(t_ns=(send_ns + t) * ms, text="x") for t in chunks],
                         end_ns=(send_ns + end_ns) * ms, status=status,
                         usage=Usage(prompt_tokens=3, completion_tokens=tokens),
                         spec=spec)


def test_a_fact_carries_the_formulas_of_analysis():
    x = fact(rec(spec={"spec_verify_ct": 2}))
    assert x["ttft"] == pytest.approx(0.010) and x["tpot"] == pytest.approx((0.050 - 0.010) / 3)
    assert x["gaps"] == pytest.approx([0.010, 0.010, 0.010]) and x["steps"] == 2 and x["tokens"] == 4
    assert x["end_unix"] == pytest.approx(T0 + 0.050)
    failed = fact(rec(status=500))
    assert not failed["ok"] and failed["tokens"] == 0 and failed["ttft"] is None


def facts(n, every_ms=100, steps=2, arm="linear"):
    return [fact(rec(send_ns=i * every_ms, spec={"spec_verify_ct": steps} if steps else None, arm=arm))
            for i in range(n)]


def test_the_window_holds_the_requests_that_ended_in_it():
    s = LiveStats(window_s=1.0)
    s.reset(T0)
    s.users = 2
    for x in facts(30):               # ends at T0 + 0.05, 0.15, ... 2.95
        s.add(x)
    snap = s.snapshot(now=T0 + 3.0)
    assert snap["window"]["requests"] == 10 and snap["total"]["requests"] == 30
    assert snap["window"]["output_tokens_per_s"] == pytest.approx(40 / 1.0)
    assert snap["total"]["output_tokens_per_s"] == pytest.approx(120 / 3.0)
    assert snap["total"]["per_user_tokens_per_s"] == pytest.approx(20.0)
    assert snap["total"]["tau"] == pytest.approx(2.0) and snap["total"]["tau_source"] == "requests"
    # 30 TTFTs print a median but not p90 (n·(1−q) ≥ 10), 10 do not print a median; 90 gaps no p90
    assert snap["total"]["ttft_p50"] == pytest.approx(0.010) and snap["total"]["ttft_p90"] is None
    assert snap["window"]["ttft_p50"] is None and snap["total"]["gap_p90"] is None
    # 2 s buckets: 20 requests of 4 tokens end in the first, 10 in the second (cut at now)
    assert [p["tokens_per_s"] for p in snap["series"]] == pytest.approx([40.0, 20.0])
    # a point's percentiles are over the trailing 10 s: 20 and then 30 requests, enough for a median
    assert [p["ttft_p50"] for p in snap["series"]] == pytest.approx([0.010, 0.010])


def test_a_stopped_load_holds_still_and_warmup_is_left_out():
    s = LiveStats(window_s=30)
    s.reset(T0)
    s.add(fact(rec(warmup=True)))
    for x in facts(5):
        s.add(x)
    s.stop(T0 + 1.0)
    later = s.snapshot(now=T0 + 100.0)
    assert later["total"]["requests"] == 5 and later["total"]["span_s"] == pytest.approx(1.0)
    assert later["total"]["output_tokens_per_s"] == pytest.approx(20.0)


def test_ar_counts_a_step_a_token_and_servers_without_counts_fall_back_to_metrics():
    s = LiveStats(ar_arms={"ar"})
    s.reset(T0)
    for x in facts(3, steps=None, arm="ar"):
        s.add(x)
    assert s.snapshot(now=T0 + 1)["total"]["tau"] == 1.0
    sg = LiveStats()
    sg.reset(T0)
    for x in facts(3, steps=None):
        sg.add(x)
    counters = ServerCounters()
    for t, gen, ver in [(T0 - 1, 100, 50), (T0 + 0.5, 400, 100), (T0 + 1, 700, 150)]:
        counters.add(t, {"sglang:generation_tokens_total": gen, "sglang:spec_verify_calls_total": ver})
    snap = sg.snapshot(now=T0 + 1, server_tau=counters.tau)
    assert snap["total"]["tau"] == pytest.approx(600 / 100) and snap["total"]["tau_source"] == "server /metrics"
    assert counters.tau(T0 + 0.5) == pytest.approx(300 / 50)
    assert ServerCounters().tau(T0) is None


def test_the_llm_tab_rows_say_when_n_is_too_small():
    s = LiveStats()
    s.reset(T0)
    for x in facts(3):
        s.add(x)
    snap = {**s.snapshot(now=T0 + 1), "arm": "linear", "state": "up"}
    rows = {r["metric"]: r for r in table(snap)}
    assert rows["TTFT p50 (ms)"]["total"] == "n too small" and rows["tau"]["total"] == "2.00"
    assert rows["output tokens/s"]["total"] == "12.0" and rows["arm"]["window"] == "linear"


def test_an_empty_window_has_no_rate():
    empty = summary([], 0.0, 2)
    assert empty["output_tokens_per_s"] is None and empty["tau"] is None and empty["requests"] == 0
