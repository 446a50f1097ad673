from types import SimpleNamespace

import pandas as pd

from refengine.twin import SHAPES
from report import cost


def analysis(device="cuda", twin=True):
    cells = pd.DataFrame({"arm": ["ar", "linear-b16", "ar", "linear-b16"], "kind": ["ar", "linear"] * 2,
                          "concurrency": [8, 8, 1, 1], "status": "ok", "step_time_s": [0.007, 0.014, 0.006, 0.012],
                          "tau": [1.0, 6.2, 1.0, 6.4]})
    speedups = pd.DataFrame({"arm": ["linear-b16"] * 2, "baseline_kind": ["ar"] * 2, "concurrency": [1, 8],
                             "speedup": [3.07, 2.41]})
    models = {"twin": {"shape": "qwen3-8b", "numbers": vars(SHAPES["qwen3-8b"])}} if twin else {}
    manifest = SimpleNamespace(models=models, host=SimpleNamespace(gpus=[{"name": "NVIDIA H200"}]))
    profile = SimpleNamespace(placement=SimpleNamespace(device=device), runtime=SimpleNamespace(dtype="bfloat16"),
                              arm=lambda x: SimpleNamespace(ablation=None))
    return SimpleNamespace(cells=cells, speedups=speedups,
                           run=SimpleNamespace(manifest=manifest, profile=profile, log=pd.DataFrame()))


def decode_lines(arm, tps):
    """One C=1 request's decode log from 40 tokens on, a line every 40 steps at tps(tokens) tokens/s."""
    tokens = list(range(40, 600, 40))
    return pd.DataFrame({"arm": arm, "line": range(len(tokens)), "kind": "decode", "running_req": 1.0,
                         "tokens": [float(t) for t in tokens], "gen_throughput": [tps(t) for t in tokens],
                         "concurrency": 1.0})


def with_ablation(a):
    """An ar-no-overlap arm beside: slower steps at C=1, and linear-b16 over it listed before its deployable row."""
    extra = pd.DataFrame({"arm": ["ar-no-overlap"], "kind": ["ar"], "concurrency": [1], "status": "ok",
                          "step_time_s": [0.009], "tau": [1.0]})
    a.cells = pd.concat([a.cells, extra], ignore_index=True)
    a.speedups = pd.concat([pd.DataFrame({"arm": ["linear-b16"], "baseline_kind": ["ar"], "concurrency": [1],
                                          "speedup": [4.10], "ablation": [True]}),
                            a.speedups.assign(ablation=False)], ignore_index=True)
    a.run.profile.arm = lambda x: SimpleNamespace(ablation="overlap off" if x == "ar-no-overlap" else None)
    return a


def test_a_twin_run_states_its_bandwidth_share_and_the_papers():
    c = cost.context(analysis())
    assert c["twin"] and "53\\% of the NVIDIA H200" in c["bandwidth"]
    rows = [r.split("&") for r in c["papers"].splitlines() if "this run" in r or "PR 16818" in r]
    got = [(r[0].strip(), r[1].strip().replace("{}", ""), r[2].strip(), r[4].split("\\")[0].strip()) for r in rows]
    # this run at each C, in order of C, then the SGLang PR's DFLASH at the same levels
    assert got == [("this run", "ar", "1", "1.00"), ("this run", "linear-b16", "1", "3.07"),
                   ("this run", "ar", "8", "1.00"), ("this run", "linear-b16", "8", "2.41"),
                   ("SGLang PR 16818 (GSM8K, 2k tokens)", "DFLASH", "1", "3.67"),
                   ("SGLang PR 16818 (GSM8K, 2k tokens)", "DFLASH", "8", "2.79"),
                   ("SGLang PR 16818 (GSM8K, 2k tokens)", "DFLASH", "32", "1.66")]
    assert "7.52" in c["papers"] and "5.15" in c["papers"]


def test_the_ablation_ar_is_neither_the_bandwidth_nor_the_baseline_beside_the_papers():
    c = cost.context(with_ablation(analysis()))
    assert "53\\% of the NVIDIA H200" in c["bandwidth"] and "(mean of 1 cells)" in c["bandwidth"]
    row = next(r for r in c["papers"].splitlines() if r.startswith("this run&linear-{}b16&1&"))
    assert "3.07" in row and "4.10" not in row


def test_ar_steps_by_context_are_deployable_ars_alone():
    a = with_ablation(analysis())
    a.run.log = pd.concat([decode_lines("ar", lambda t: 200.0 if t < 320 else 190.0),
                           decode_lines("ar-no-overlap", lambda t: 100.0)], ignore_index=True)
    b = cost.context(a)["bandwidth"]
    assert "5.00 ms below 160 tokens, 5.26 ms from 480 on, or 200 and 190 tokens/s" in b


def test_a_gpu_run_of_the_shipped_pair_gets_the_launch_bound_sentence_only():
    assert cost.context(analysis(twin=False)) == {"twin": False}


def test_a_cpu_run_gets_nothing():
    assert cost.context(analysis(device="cpu")) is None
