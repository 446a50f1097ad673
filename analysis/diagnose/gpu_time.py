"""GPU time per output token beside wall time per output token, from the gpu-time diagnostic.

The sweep's profiled round (ddbench/sweep.py time_kernels, a profile's `diagnostics: [gpu-time]`) left,
per arm and C, SGLang's GPU activity over one unit (RUN_DIR/diagnostics/gpu-time/<arm>-c<C>.json: the union
of its kernels' intervals, and the unit's wall time) and the unit's request records beside it. Per output
token: GPU ms (the algorithm's cost on this GPU) and wall ms (what a user waits, host time included). The
profiler's own cost is host work per kernel, so it lengthens a host-bound unit's wall most: on the H100 twin
a DFLASH unit at C=1 ran 60% longer profiled than the measured cells beside it, an AR unit 1% longer. So the
GPU's busy share is taken against the measured wall (1000 / the arm's output tok/s at that C, from the
summary), and the profiled unit's slowdown stands beside it; at C=1 only, where a profiled unit is one request
as a measured one is. At C>1 the profiled unit is whole, its tail (fewer than C requests left, small batches)
included, while the measured rounds count steady windows: on the twin its GPU time per token exceeded the
measured wall time per token, so no share is taken there. These are a diagnosis of where time goes, never a
throughput.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ddbench.core.results import DIAGNOSTICS, GPU_TIME, read_records

COLUMNS = ["arm", "concurrency", "tokens", "requests", "gpu_busy_s", "wall_s", "gpu_ms_per_token",
           "wall_ms_per_token", "gpu_share", "measured_wall_ms_per_token", "measured_gpu_share", "profiler_slowdown",
           "gpu_events", "error"]
NAME = re.compile(r"^(?P<arm>.+)-c(?P<c>\d+)\.json$")


def _tokens(cell_dir: Path) -> tuple[int, int]:
    """(output tokens, requests) of the unit's finished requests."""
    done = [r for r in read_records(cell_dir) if r.ok and r.usage is not None]
    return sum(r.usage.completion_tokens for r in done), len(done)


def profiled(root: Path):
    """(arm, C, summary) for each <arm>-c<C>.json a profiled round left in root (gpu-time, host-profile)."""
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:
        m = NAME.match(path.name)
        if m:
            yield m["arm"], int(m["c"]), json.loads(path.read_text())


def table(run_dir: str | Path, summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per profiled (arm, C); summary (arm, concurrency, throughput: the measured cells) gives the
    measured wall per token at C=1 that the busy share is taken against."""
    root = Path(run_dir) / DIAGNOSTICS / GPU_TIME
    measured = {} if summary is None or summary.empty else \
        {str(r.arm): 1e3 / r.throughput for r in summary.itertuples() if r.concurrency == 1 and r.throughput > 0}
    rows = []
    for arm, c, doc in profiled(root):
        tokens, n = _tokens(root / arm / f"c{c}")
        busy, wall = doc.get("gpu_busy_s", float("nan")), doc.get("wall_s", float("nan"))
        gpu_ms = 1e3 * busy / tokens if tokens else float("nan")
        wall_ms = 1e3 * wall / tokens if tokens else float("nan")
        ms = measured.get(arm, float("nan")) if c == 1 else float("nan")
        rows.append({"arm": arm, "concurrency": c, "tokens": tokens, "requests": n, "gpu_busy_s": busy,
                     "wall_s": wall, "gpu_ms_per_token": gpu_ms, "wall_ms_per_token": wall_ms,
                     "gpu_share": busy / wall if wall else float("nan"), "measured_wall_ms_per_token": ms,
                     "measured_gpu_share": gpu_ms / ms, "profiler_slowdown": wall_ms / ms,
                     "gpu_events": doc.get("gpu_events"), "error": doc.get("error")})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["concurrency", "arm"], ignore_index=True)
