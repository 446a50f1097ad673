"""Where a step's host time goes, from the host-profile diagnostic.

The sweep's host-profile round (ddbench/sweep.py time_host, a profile's `diagnostics: [host-profile]`) left,
per arm at C=1 and C=8, a summary of one unit's first forward steps under SGLang's profiler with CPU activity and
Python stacks (RUN_DIR/diagnostics/host-profile/<arm>-c<C>.json, containers/host_time.py): the GPU's idle time
per step and the frames the scheduler thread was in meanwhile, per step. The profiler adds host work to every
Python call, so the times are the profiled server's; the ranking is what the table is for.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.diagnose.gpu_time import profiled
from ddbench.core.results import DIAGNOSTICS, HOST_PROFILE

COLUMNS = ["arm", "concurrency", "steps", "ms_per_step", "idle_ms_per_step", "idle_share", "top_sglang", "top_frames",
           "error"]
SHOWN = 3


def _top(pairs: list | None) -> str:
    return "; ".join(f"{name} ({ms:.2g} ms)" for name, ms in (pairs or [])[:SHOWN])


def table(run_dir: str | Path) -> pd.DataFrame:
    """One row per profiled (arm, C): ms per step, the GPU's idle ms per step and share, the three SGLang
    functions and the three innermost frames holding most of the idle time (ms per step each)."""
    root = Path(run_dir) / DIAGNOSTICS / HOST_PROFILE
    rows = []
    for arm, c, doc in profiled(root):
        window, idle = doc.get("window_s"), doc.get("gpu_idle_s")
        rows.append({"arm": arm, "concurrency": c, "steps": doc.get("steps"),
                     "ms_per_step": doc.get("ms_per_step"), "idle_ms_per_step": doc.get("idle_ms_per_step"),
                     "idle_share": idle / window if window and idle is not None else float("nan"),
                     "top_sglang": _top(doc.get("top_sglang_ms")), "top_frames": _top(doc.get("top_frames_ms")),
                     "error": doc.get("error")})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["concurrency", "arm"], ignore_index=True)
