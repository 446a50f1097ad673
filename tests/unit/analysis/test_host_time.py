"""The host profile: the GPU's idle time inside the scheduler's steps, charged to the frames the scheduler was in."""

import json

import pytest

from analysis.diagnose import host_profile
from containers.host_time import frame_name, summarize

SCHED = "/tmp/site-sglang-ddtree/sglang/srt/managers/scheduler.py(2996): run_batch"
TREE = "/tmp/site-sglang-ddtree/sglang/srt/speculative/ddtree_worker.py(10): build_tree"


def py(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "python_function", "name": name, "ts": ts, "dur": dur, "pid": 7, "tid": tid}


def trace():
    return [
        py(SCHED, 0, 100), py(TREE, 55, 40), py("<built-in method tolist of Tensor object at 0xdeadbeef>", 60, 30),
        py(SCHED, 100, 100), py("/usr/lib/python3/dist-packages/torch/nn/functional.py(5): softmax", 150, 40),
        {"ph": "X", "cat": "cpu_op", "name": "aten::sort", "ts": 160, "dur": 10, "pid": 7, "tid": 1},
        py("/x/threading.py(1): wait", 0, 50, tid=2),              # another thread, covering less of the idle time
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 50, "pid": 0, "tid": 9},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 110, "dur": 40, "pid": 0, "tid": 9},
        {"ph": "X", "cat": "kernel", "name": "after", "ts": 400, "dur": 5, "pid": 0, "tid": 9},   # after the steps
    ]


def test_idle_time_is_charged_to_the_innermost_frame_and_the_sglang_frame_above_it():
    s = summarize(trace())
    # steps 0-200; the GPU busy 10-60 and 110-150: idle 10 + 50 + 50 = 110 us over 2 steps
    assert s["steps"] == 2 and s["window_s"] == pytest.approx(200e-6) and s["gpu_idle_s"] == pytest.approx(110e-6)
    assert s["ms_per_step"] == pytest.approx(0.1) and s["idle_ms_per_step"] == pytest.approx(0.055)
    assert s["idle_covered_s"] == pytest.approx(110e-6)
    leaf = dict(s["top_frames_ms"])      # ms per step
    assert leaf == pytest.approx({"managers/scheduler.py(2996): run_batch": 0.0175,
                                  "nn/functional.py(5): softmax": 0.015,
                                  "<built-in method tolist of Tensor object>": 0.015, "aten::sort": 0.005,
                                  "speculative/ddtree_worker.py(10): build_tree": 0.0025})
    owner = dict(s["top_sglang_ms"])
    assert owner == pytest.approx({"managers/scheduler.py(2996): run_batch": 0.0375,      # tolist counts to the
                                   "speculative/ddtree_worker.py(10): build_tree": 0.0175})  # SGLang frame above it
    assert [n for n, _ in s["top_frames_ms"]][0] == "managers/scheduler.py(2996): run_batch"   # largest first


def test_a_trace_without_steps_uses_the_gpu_span_and_one_without_either_says_so():
    s = summarize([e for e in trace() if e.get("name") != SCHED])
    assert s["steps"] == 0 and s["ms_per_step"] is None and s["window_s"] == pytest.approx(395e-6)
    assert "neither" in summarize([py("x.py(1): f", 0, 5)])["error"]


def test_frame_names_lose_addresses_and_install_prefixes():
    assert frame_name("/a/b/site-packages/sglang/srt/x.py(3): f") == "srt/x.py(3): f"
    assert frame_name("<method 'item' of 'torch._C.TensorBase' object at 0x7f00>") == \
        "<method 'item' of 'torch._C.TensorBase' object>"


def test_the_table_reads_one_row_per_arm_and_concurrency(tmp_path):
    root = tmp_path / "diagnostics" / "host-profile"
    root.mkdir(parents=True)
    (root / "tree-b15-k8-c1.json").write_text(json.dumps({**summarize(trace()), "wall_s": 1.0}))
    (root / "ar-c8.json").write_text(json.dumps({"wall_s": 1.0, "error": "/start_profile answered HTTP 404: x"}))
    t = host_profile.table(tmp_path).set_index(["arm", "concurrency"])
    row = t.loc[("tree-b15-k8", 1)]
    assert row["idle_share"] == pytest.approx(0.55) and row["steps"] == 2
    assert row["top_sglang"].startswith("managers/scheduler.py(2996): run_batch (0.037 ms); speculative/ddtree")
    assert "404" in t.loc[("ar", 8), "error"]
    assert host_profile.table(tmp_path / "elsewhere").empty


def test_the_report_table_has_a_row_per_profiled_unit(tmp_path):
    from types import SimpleNamespace

    from report import tables

    root = tmp_path / "diagnostics" / "host-profile"
    root.mkdir(parents=True)
    (root / "tree-b15-k8-c1.json").write_text(json.dumps(summarize(trace())))
    tex = str(tables.host_profile(SimpleNamespace(host_profile=host_profile.table(tmp_path))))
    assert "b15" in tex and "run\\_batch (0.037 ms)" in tex and "&55&" in tex
    assert tables.host_profile(SimpleNamespace(host_profile=host_profile.table(tmp_path / "none"))) is None
