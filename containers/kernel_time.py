"""GPU time against wall time: SGLang's torch profiler around one unit of requests, read down to a summary.

    with KernelTimer(url, dest_json):   # the server profiles GPU activity while the block runs
        ... send the unit's requests ...

A speculative step on SGLang leaves the GPU idle part of the time: the host (scheduler, drafter
bookkeeping, sampling) sits between kernels. Wall time per output token mixes the algorithm's cost with
the build's host overhead; the GPU's own time per token (the union of its kernels' intervals over the
unit) separates them. The server writes a chrome trace (`/start_profile` with GPU activity, then
`/stop_profile`, SGLang's own endpoints); it is read here into `dest_json` and deleted, since a trace of
a few seconds runs to tens of MB. Only a server on this host (runtime local) can be read this way.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from ddbench.core.results import write_json_atomic

EXPORT_WAIT_S = 120.0      # /stop_profile returns before the trace is written
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def busy_spans(events: list[dict]) -> list[tuple[float, float]]:
    """The GPU events' [ts, ts + dur) intervals (µs in chrome traces), merged and sorted."""
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur") or 0)) for e in events
                   if e.get("cat") in GPU_CATEGORIES and "ts" in e)
    out: list[tuple[float, float]] = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def busy(events: list[dict]) -> dict:
    """The union of the GPU events' intervals: busy time, count, span."""
    spans = busy_spans(events)
    first = spans[0][0] if spans else float("nan")
    last = spans[-1][1] if spans else float("nan")
    return {"gpu_busy_s": sum(b - a for a, b in spans) / 1e6,
            "gpu_events": sum(e.get("cat") in GPU_CATEGORIES and "ts" in e for e in events),
            "gpu_span_s": (last - first) / 1e6}


def read_trace(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc.get("traceEvents", []) if isinstance(doc, dict) else doc


class KernelTimer:
    """Profile one server's GPU activity over a `with` block; the summary (with the block's wall time and
    what the caller adds through `note`) lands in dest_json. Failures are recorded there, never raised:
    a diagnostic must not fail the sweep.

    activities ("CPU" as well) and num_steps (the server stops itself after that many forward steps) serve the
    host profile (containers/host_time.py, its summarize); the default is the GPU's busy time alone."""

    def __init__(self, url: str, dest_json: Path, headers: dict[str, str] | None = None, *,
                 activities: tuple[str, ...] = ("GPU",), num_steps: int | None = None,
                 summarize: Callable[[list[dict]], dict] = busy):
        self.url, self.dest, self.headers = url.rstrip("/"), Path(dest_json), headers or {}
        self.activities, self.num_steps, self.summarize = list(activities), num_steps, summarize
        self.extra: dict = {}

    def note(self, **facts) -> None:
        self.extra.update(facts)

    def __enter__(self) -> KernelTimer:
        self.dir = Path(tempfile.mkdtemp(prefix="ddbench-kernels-"))
        self.error = None
        try:
            r = httpx.post(self.url + "/start_profile", headers=self.headers, timeout=60,
                           json={"output_dir": str(self.dir), "activities": self.activities,
                                 "with_stack": "CPU" in self.activities,
                                 "record_shapes": False, "profile_prefix": "ddbench",
                                 **({"num_steps": self.num_steps} if self.num_steps else {})})
            if r.status_code != 200:
                self.error = f"/start_profile answered HTTP {r.status_code}: {r.text.strip()[:200]}"
        except httpx.HTTPError as e:
            self.error = f"/start_profile: {type(e).__name__}: {e}"
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self.t0
        out = {"url": self.url, "wall_s": wall, **self.extra}
        try:
            if self.error is None:
                out.update(self._collect())
        except (OSError, ValueError, httpx.HTTPError) as e:
            self.error = f"{type(e).__name__}: {e}"
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.error:
            out["error"] = self.error
        write_json_atomic(self.dest, out)

    def _collect(self) -> dict:
        r = httpx.post(self.url + "/stop_profile", headers=self.headers, timeout=EXPORT_WAIT_S)
        if r.status_code != 200 and not self.num_steps:   # with num_steps the server may have stopped itself
            raise ValueError(f"/stop_profile answered HTTP {r.status_code}: {r.text.strip()[:200]}")
        deadline = time.monotonic() + EXPORT_WAIT_S
        while True:   # the scheduler exports after answering: wait for a complete file
            traces = sorted(self.dir.glob("*.trace.json*"))
            if traces:
                try:
                    events = [e for t in traces for e in read_trace(t)]
                    return {**self.summarize(events), "traces": len(traces),
                            "trace_mb": round(sum(t.stat().st_size for t in traces) / 1e6, 2)}
                except (OSError, EOFError, ValueError):
                    pass   # still being written
            if time.monotonic() > deadline:
                raise ValueError(f"no complete trace in {self.dir} {EXPORT_WAIT_S:.0f} s after /stop_profile")
            time.sleep(0.5)
