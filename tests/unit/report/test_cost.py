from types import SimpleNamespace

import pandas as pd

from refengine.twin import SHAPES
from report import cost


def analysis(device="cuda", twin=True):
    cells = pd.DataFrame({"arm": ["ar", "linear-b16"], "kind": ["ar", "linear"], "concurrency": 1, "status": "ok",
                          "step_time_s": [0.006, 0.012], "tau": [1.0, 6.4]})
    speedups = pd.DataFrame({"arm": ["linear-b16"], "baseline_kind": ["ar"], "concurrency": [1], "speedup": [3.07]})
    models = {"twin": {"shape": "qwen3-8b", "numbers": vars(SHAPES["qwen3-8b"])}} if twin else {}
    manifest = SimpleNamespace(models=models, host=SimpleNamespace(gpus=[{"name": "NVIDIA H200"}]))
    profile = SimpleNamespace(placement=SimpleNamespace(device=device), runtime=SimpleNamespace(dtype="bfloat16"))
    return SimpleNamespace(cells=cells, speedups=speedups, run=SimpleNamespace(manifest=manifest, profile=profile))


def test_a_twin_run_states_its_bandwidth_share_and_the_papers():
    c = cost.context(analysis())
    assert c["twin"] and "53\\% of the NVIDIA H200" in c["bandwidth"]
    assert "3.07" in c["papers"] and "7.52" in c["papers"] and "5.15" in c["papers"]


def test_a_gpu_run_of_the_shipped_pair_gets_the_launch_bound_sentence_only():
    assert cost.context(analysis(twin=False)) == {"twin": False}


def test_a_cpu_run_gets_nothing():
    assert cost.context(analysis(device="cpu")) is None
