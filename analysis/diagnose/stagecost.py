"""Where a DDTree step's time goes on SGLang: the fork's stage profiler, from a labelled diagnostic.

ddbench/diagnostics/stage_cost.py runs one separate cell per tree arm with the fork's
--speculative-ddtree-profile on (never a measured cell: the timers cost time) and writes
RUN_DIR/diagnostics/stage-cost.json. Its stages are grouped here into the parts of a step the
study reasons about: draft, tree build, verify, walk, and commit (KV bookkeeping, outputs).
A stage's time is its GPU time where the profiler has one (CUDA events), else its host time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

STAGE_COST = "diagnostics/stage-cost.json"
GROUPS = {
    "draft": ("draft_forward", "draft_head_topk", "draft_kv_append_before", "draft_kv_append_after"),
    "tree build": ("tree_gpu_build", "mask_compile_gpu", "mask_compile", "prepare_verify"),
    "verify": ("target_verify", "sampling_logits_processors"),
    "walk": ("follow_tree_gpu", "accept_argmax", "hidden_select"),
    "commit": ("kv_free_update", "commit_output_cpu"),
}
COLUMNS = ["arm", "part", "ms_per_round", "share", "stages", "rounds", "tau"]


def _ms(entry: dict) -> float:
    gpu, cpu = entry.get("gpu_avg_ms"), entry.get("cpu_avg_ms")
    return float(gpu if gpu is not None else cpu or 0.0)


def read(run_path: Path) -> pd.DataFrame:
    """Per tree arm and part of a step: mean ms per verify round and its share of the profiled step."""
    path = Path(run_path) / STAGE_COST
    if not path.is_file():
        return pd.DataFrame(columns=COLUMNS)
    doc = json.loads(path.read_text())
    rows = []
    for arm, a in (doc.get("arms") or {}).items():
        stages = a.get("stages") or {}
        # mask_compile times the host side of mask_compile_gpu: count the GPU one where both exist
        skip = {"mask_compile"} if "mask_compile_gpu" in stages else set()
        parts = {g: [s for s in names if s in stages and s not in skip] for g, names in GROUPS.items()}
        known = {s for names in parts.values() for s in names}
        parts["other"] = sorted(set(stages) - known - skip)
        total = sum(_ms(stages[s]) for names in parts.values() for s in names)
        steps, tokens = a.get("verify_steps"), a.get("completion_tokens")
        for part, names in parts.items():
            if not names:
                continue
            ms = sum(_ms(stages[s]) for s in names)
            rows.append({"arm": arm, "part": part, "ms_per_round": ms, "share": ms / total if total else float("nan"),
                         "stages": ", ".join(names), "rounds": a.get("rounds"),
                         "tau": tokens / steps if steps and tokens else float("nan")})
    return pd.DataFrame(rows, columns=COLUMNS)
