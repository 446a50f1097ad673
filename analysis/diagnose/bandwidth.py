"""How close a run's AR decode step comes to the GPU's memory bandwidth, and the papers' figures beside its ratios.

At C = 1 a decode step of a dense model reads every weight once (the KV cache of a few hundred tokens is
megabytes beside gigabytes), so the weight bytes over the AR arm's step time is the HBM bandwidth a
step achieves. The bytes come from the twin's recorded shape (the manifest's models.twin.numbers); the
embedding table is left out, because a lookup reads one row of it. A run of any other pair has no
recorded shape and gets no figure: the shipped pair's step is launch overhead, not memory traffic.

The step also grows with the context: the attention reads the KV cache, a few MB, but its kernel's time grows
with the tokens each of its splits walks. So a reply's length moves AR's tokens/s, and step_by_context says by
how much on the run's own server.
"""

from __future__ import annotations

import math

import pandas as pd

# Peak HBM bandwidth by GPU name, TB/s, from the vendors' datasheets (H200 SXM 4.8, H100 SXM 3.35, B200 8).
PEAK_TB_S = {"H200": 4.8, "H100": 3.35, "B200": 8.0}

# Published Qwen3-8B figures at T = 0, on other prompts than ddbench's, each at its concurrency c. The papers:
# batch 1, Hugging Face backend (not a serving engine): DFlash (arXiv 2602.06036) GSM8K on an H200; DDTree
# (arXiv 2604.12989) MATH-500, its best tree budget against DFlash. DFlash in SGLang (PR sgl-project/sglang#16818):
# z-lab's DFlash b16, GSM8K, up to 2k new tokens, TP1, acceptance length 6.3-6.4 at every C.
PAPERS = (
    {"source": "DFlash paper (H200, GSM8K)", "arm": "DFlash", "c": 1, "tau": 6.54, "over_ar": 5.15},
    {"source": "DDTree paper (MATH-500)", "arm": "DFlash", "c": 1, "tau": 7.79, "over_ar": 5.56},
    {"source": "DDTree paper (MATH-500)", "arm": "DDTree", "c": 1, "tau": 10.73, "over_ar": 7.52},
    *({"source": "SGLang PR 16818 (GSM8K, 2k tokens)", "arm": "DFLASH", "c": c, "tau": 6.36, "over_ar": x}
      for c, x in ((1, 3.67), (8, 2.79), (32, 1.66))),
)


def weight_bytes(n: dict, bytes_per_param: int = 2) -> int:
    """Bytes of target weights one forward reads: every layer's projections and MLP, and the LM head."""
    h, hd = n["hidden_size"], n["head_dim"]
    attn = h * hd * (2 * n["num_attention_heads"] + 2 * n["num_key_value_heads"])
    mlp = 3 * h * n["intermediate_size"]
    return bytes_per_param * (n["num_hidden_layers"] * (attn + mlp) + n["vocab_size"] * h)


def peak_tb_s(gpu_name: str) -> float | None:
    return next((v for k, v in PEAK_TB_S.items() if k in gpu_name), None)


def ar_bandwidth(cells: pd.DataFrame, numbers: dict | None, gpu_name: str, dtype: str) -> dict | None:
    """The AR arm's C = 1 step against the weight-read floor; None without a recorded shape or an AR cell."""
    if not numbers or dtype not in ("bfloat16", "float16", "bf16", "fp16"):
        return None
    ar = cells[(cells["kind"] == "ar") & (cells["concurrency"] == 1) & (cells["status"] == "ok")]
    steps = ar["step_time_s"].dropna()
    if steps.empty:
        return None
    step = float(steps.mean())
    nbytes = weight_bytes(numbers)
    peak = peak_tb_s(gpu_name)
    achieved = nbytes / step / 1e12
    return {"bytes": nbytes, "step_s": step, "cells": len(steps), "achieved_tb_s": achieved, "peak_tb_s": peak,
            "share": achieved / peak if peak else math.nan, "floor_s": nbytes / (peak * 1e12) if peak else math.nan,
            "gpu": gpu_name}


# context bins, tokens: a 512-token reply on a chat prompt spans about 60 to 560
CONTEXT_BINS = (0, 160, 320, 480)


def step_by_context(log: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    """AR's C = 1 step time by the context its attention reads, from SGLang's decode log (server_log).

    A `Decode batch` line's throughput covers the steps since the line before it. The first line of a request
    also covers the idle time before the request (under the rounds schedule, the other arms' turns), so a line
    counts only where the line before it was the same request's: one running request, fewer tokens (none is
    a line logged as a request left)."""
    none = pd.DataFrame(columns=["lo", "hi", "lines", "step_ms"])
    if log.empty or not {"arm", "kind", "running_req", "tokens", "gen_throughput", "concurrency"} <= set(log.columns):
        return none
    rows = []
    for _, g in log[log["arm"].isin(arms) & (log["kind"] == "decode")].groupby("arm"):
        g = g.sort_values("line")
        prev_tokens, prev_running = g["tokens"].shift(), g["running_req"].shift()
        same = (g["running_req"] == 1) & (prev_running == 1) & (prev_tokens > 0) & (prev_tokens < g["tokens"])
        rows.append(g[same & (g["concurrency"] == 1) & (g["gen_throughput"] > 0)])
    lines = pd.concat(rows) if rows else none
    if lines.empty:
        return none
    edges = [*CONTEXT_BINS, math.inf]
    out = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        b = lines[(lines["tokens"] >= lo) & (lines["tokens"] < hi)]
        if len(b):   # the steps of a bin over its lines' throughputs: each line covers the same number of steps
            out.append({"lo": lo, "hi": hi, "lines": len(b), "step_ms": float((1e3 / b["gen_throughput"]).mean())})
    return pd.DataFrame(out, columns=none.columns)
