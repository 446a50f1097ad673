"""GPU time per output token from the gpu-time diagnostic's files, and the kernel-interval union it rests on."""

import gzip
import json

import pandas as pd
import pytest

from analysis.diagnose import gpu_time
from containers.kernel_time import busy, read_trace
from ddbench.core.records import RequestRecord


def test_busy_time_is_the_union_of_the_gpu_events():
    events = [{"cat": "kernel", "ts": 0, "dur": 10}, {"cat": "kernel", "ts": 5, "dur": 10},   # overlap: 0-15
              {"cat": "gpu_memcpy", "ts": 20, "dur": 5}, {"cat": "kernel", "ts": 21, "dur": 1},  # inside: 20-25
              {"cat": "cpu_op", "ts": 30, "dur": 100},                                           # not the GPU
              {"cat": "kernel", "ts": 40, "dur": 0}]
    b = busy(events)
    assert b["gpu_busy_s"] == pytest.approx(20e-6) and b["gpu_events"] == 5 and b["gpu_span_s"] == pytest.approx(40e-6)


def test_a_packed_trace_reads_as_a_plain_one(tmp_path):
    doc = {"traceEvents": [{"cat": "kernel", "ts": 1, "dur": 2}]}
    with gzip.open(tmp_path / "x.trace.json.gz", "wt") as f:
        json.dump(doc, f)
    assert read_trace(tmp_path / "x.trace.json.gz") == doc["traceEvents"]


def record(tokens: int, ok: bool = True) -> str:
    return RequestRecord(request_id="r", arm="linear-b16", concurrency=2, repetition=0, warmup=False, prompt_id="p",
                         category="c", worker="w", user=0, max_tokens=tokens, temperature=0.0, send_ns=0,
                         send_unix_ns=0, end_ns=1, status=200 if ok else 500, error=None if ok else "HTTP 500",
                         usage={"prompt_tokens": 3, "completion_tokens": tokens}).model_dump_json()


def test_gpu_and_wall_time_per_token(tmp_path):
    root = tmp_path / "diagnostics" / "gpu-time"
    (root / "linear-b16" / "c2").mkdir(parents=True)
    (root / "linear-b16" / "c2" / "requests-h-1.jsonl").write_text("\n".join([record(100), record(300),
                                                                             record(50, ok=False)]) + "\n")
    (root / "linear-b16-c2.json").write_text(json.dumps({"gpu_busy_s": 0.8, "wall_s": 2.0, "gpu_events": 9}))
    (root / "ar-c1.json").write_text(json.dumps({"wall_s": 1.0, "error": "/start_profile answered HTTP 404: x"}))
    t = gpu_time.table(tmp_path).set_index(["arm", "concurrency"])
    lin = t.loc[("linear-b16", 2)]
    assert (lin["tokens"], lin["requests"]) == (400, 2)          # the failed request's tokens do not count
    assert lin["gpu_ms_per_token"] == pytest.approx(2.0) and lin["wall_ms_per_token"] == pytest.approx(5.0)
    assert lin["gpu_share"] == pytest.approx(0.4)
    assert "404" in t.loc[("ar", 1), "error"]
    assert t["measured_gpu_share"].isna().all()                                              # no summary given
    # against the measured cells at C=1: 400 tok/s is 2.5 ms a token, so the GPU was busy 80% of it, and the
    # profiler stretched the unit to twice that. At C=2 the profiled unit (tail included) is not a measured one
    (root / "linear-b16" / "c1").mkdir()
    (root / "linear-b16" / "c1" / "requests-h-1.jsonl").write_text(record(400) + "\n")
    (root / "linear-b16-c1.json").write_text(json.dumps({"gpu_busy_s": 0.8, "wall_s": 2.0}))
    summary = pd.DataFrame({"arm": ["linear-b16", "linear-b16", "ar"], "concurrency": [1, 2, 1],
                            "throughput": [400.0, 400.0, 0.0]})
    m = gpu_time.table(tmp_path, summary).set_index(["arm", "concurrency"])
    assert m.loc[("linear-b16", 1), "measured_wall_ms_per_token"] == pytest.approx(2.5)
    assert m.loc[("linear-b16", 1), "measured_gpu_share"] == pytest.approx(0.8)
    assert m.loc[("linear-b16", 1), "profiler_slowdown"] == pytest.approx(2.0)
    assert m.loc[[("linear-b16", 2), ("ar", 1)], "measured_gpu_share"].isna().all()
    assert gpu_time.table(tmp_path / "elsewhere").empty
