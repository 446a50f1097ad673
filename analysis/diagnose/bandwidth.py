"""How close a run's AR decode step comes to the GPU's memory bandwidth, and the papers' figures beside its ratios.

At C = 1 a decode step of a dense model reads every weight once (the KV cache of a few hundred tokens is
megabytes beside gigabytes), so the weight bytes over the AR arm's step time is the HBM bandwidth a
step achieves. The bytes come from the twin's recorded shape (the manifest's models.twin.numbers); the
embedding table is left out, because a lookup reads one row of it. A run of any other pair has no
recorded shape and gets no figure: the shipped pair's step is launch overhead, not memory traffic.
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
