"""GPU time per output token beside wall time per output token, from the gpu-time diagnostic.

The sweep's profiled round (containers/sweep.py time_kernels, a profile's `diagnostics: [gpu-time]`) left,
per arm and C, SGLang's GPU activity over one unit (RUN_DIR/diagnostics/gpu-time/<arm>-c<C>.json: the union
of its kernels' intervals, and the unit's wall time) and the unit's request records beside it. Per output
token: GPU ms (the algorithm's cost on this GPU) and wall ms (what a user waits, host time included); their
quotient is the share of the unit the GPU was busy. The profiler's own cost lengthens the wall a little, so
these are a diagnosis of where time goes, never a throughput.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ddbench.core.results import DIAGNOSTICS, GPU_TIME, read_records

COLUMNS = ["arm", "concurrency", "tokens", "requests", "gpu_busy_s", "wall_s", "gpu_ms_per_token",
           "wall_ms_per_token", "gpu_share", "gpu_events", "error"]
NAME = re.compile(r"^(?P<arm>.+)-c(?P<c>\d+)\.json$")


def _tokens(cell_dir: Path) -> tuple[int, int]:
    """(output tokens, requests) of the unit's finished requests."""
    done = [r for r in read_records(cell_dir) if r.ok and r.usage is not None]
    return sum(r.usage.completion_tokens for r in done), len(done)


def table(run_dir: str | Path) -> pd.DataFrame:
    root = Path(run_dir) / DIAGNOSTICS / GPU_TIME
    rows = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:
        m = NAME.match(path.name)
        if not m:
            continue
        doc = json.loads(path.read_text())
        arm, c = m["arm"], int(m["c"])
        tokens, n = _tokens(root / arm / f"c{c}")
        busy, wall = doc.get("gpu_busy_s", float("nan")), doc.get("wall_s", float("nan"))
        rows.append({"arm": arm, "concurrency": c, "tokens": tokens, "requests": n, "gpu_busy_s": busy,
                     "wall_s": wall, "gpu_ms_per_token": 1e3 * busy / tokens if tokens else float("nan"),
                     "wall_ms_per_token": 1e3 * wall / tokens if tokens else float("nan"),
                     "gpu_share": busy / wall if wall else float("nan"), "gpu_events": doc.get("gpu_events"),
                     "error": doc.get("error")})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["concurrency", "arm"], ignore_index=True)
