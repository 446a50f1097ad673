"""Each measurement has one definition (ddbench/core/formulas.py): one recorded cell, read by every path that
reports a figure of it (the analysis, `ddbench verify`, the warm-up's window, the live web UI, the flag-cost
experiment), gives the same throughput, TTFT and TPOT to the last bit. A second definition anywhere breaks it."""

from __future__ import annotations

import math

import pytest
from handrun import T0, profile, rec

from analysis.analyze import analyze
from ddbench import flag_cost, sweep, verify
from ddbench.core import formulas
from ddbench.core.records import CellStatus
from ddbench.core.results import write_json_atomic, write_text_atomic
from loadtests import cell, live

pytestmark = pytest.mark.unit

MS = 1_000_000


def _records():
    # three requests of one AR cell, timings that no round number hides: chunks of 1 to 3 tokens
    return [rec("ar", "ar-c1-r1-p1", 0, [(37, "a", 1), (61, " b", 2), (90, " c", 1)], 97, 4, prompt="p1"),
            rec("ar", "ar-c1-r1-p2", 101, [(149, "x", 1), (173, "y", 3)], 211, 4, prompt="p2"),
            rec("ar", "ar-c1-r1-p3", 214, [(251, "q", 2), (299, "r", 1), (331, "s", 2)], 337, 5, prompt="p3")]


@pytest.fixture
def recorded(tmp_path):
    prof = profile(arms=[{"id": "ar", "kind": "ar"}], load={"concurrency": [1], "requests_per_user": 3})
    run = tmp_path / prof.name / "r1"
    d = run / "ar" / "c1-r1"
    recs = _records()
    write_text_atomic(d / "requests-h-1.jsonl", "".join(r.model_dump_json() + "\n" for r in recs))
    start, end = cell.window(recs, "closed")
    st = CellStatus(arm="ar", concurrency=1, repetition=1, status="ok", started_unix=1.8e9, ended_unix=1.8e9 + 1,
                    requests=3, errors=0, window_start_ns=start, window_end_ns=end, client_cpu_max=10.0)
    write_json_atomic(d / "status.json", st.model_dump(mode="json"))
    write_json_atomic(run / "manifest.json", {"profile": prof.model_dump(mode="json"), "profile_digest": prof.digest(),
                                              "prompt_set_digest": "ab" * 32})
    return run, d, recs


def test_one_cell_gives_one_throughput_on_every_path(recorded):
    run, d, recs = recorded
    a = analyze(run, bootstrap=10)
    analysed = float(a.cells.set_index(["arm", "concurrency", "repetition"]).loc[("ar", 1, 1), "throughput"])
    assert analysed == pytest.approx(13 / 0.337, rel=1e-12)      # 13 tokens, first send to last end
    assert verify.throughput(d) == analysed
    assert sweep.window_throughput(d) == analysed
    # the web UI's window slides on the wall clock; over the cell's own window it reads the same
    start, end = cell.window(recs, "closed")
    span_s = float(formulas.window_s(start, end))
    assert live.summary([live.fact(r) for r in recs], span_s, users=1)["output_tokens_per_s"] == analysed


def test_one_request_gives_one_ttft_and_tpot_on_every_path(recorded):
    run, _, recs = recorded
    req = analyze(run, bootstrap=10).requests.set_index("request_id")
    for r in recs:
        mine = req.loc[r.request_id]
        fact = live.fact(r)
        assert fact["ttft"] == mine["ttft_s"] and fact["tpot"] == mine["tpot_s"]
        # the experiment's figures, from the same stream as its client records it
        m = flag_cost.figures({"send_ns": r.send_ns, "end_ns": r.end_ns, "chunks": r.chunks}, r.usage.completion_tokens)
        assert m["ttft_ms"] == 1e3 * mine["ttft_s"] and m["tpot_ms"] == 1e3 * mine["tpot_s"]
        assert not math.isnan(m["tok_s"])
    assert recs[0].chunks[0].t_ns - recs[0].send_ns == 37 * MS and recs[0].send_ns >= T0
