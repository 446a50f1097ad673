"""CPU use of every Locust process during a cell, sampled from outside.

A busy client inflates latency: Locust's greenlets wait for the CPU, not for the server.
Sampling the process tree from the runner (psutil, every half second) works the same for
one process and for a master with local workers, and costs the client nothing.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psutil

CPU_LIMIT = 90.0
CPU_FILE = "client-cpu.jsonl"


class CpuSampler:
    """Samples `pid` and its descendants; each sample is (perf_counter_ns, pid, cpu %)."""

    def __init__(self, pid: int, path: Path, interval_s: float = 0.5):
        self.root, self.path, self.interval = pid, path, interval_s
        self.samples: list[tuple[int, int, float]] = []
        self._procs: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> list[tuple[int, int, float]]:
        self._stop.set()
        self._thread.join()
        return self.samples

    def _run(self) -> None:
        with open(self.path, "w") as f:
            while not self._stop.wait(self.interval):
                for pid, cpu in self._sample():
                    t = time.perf_counter_ns()
                    self.samples.append((t, pid, cpu))
                    f.write(json.dumps({"t_ns": t, "pid": pid, "cpu": cpu}) + "\n")
                f.flush()

    def _sample(self) -> list[tuple[int, float]]:
        try:
            root = psutil.Process(self.root)
            tree = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for p in tree:
            known = self._procs.setdefault(p.pid, p)
            try:
                cpu = known.cpu_percent(None)  # since the previous call: the first one reads 0
            except psutil.NoSuchProcess:
                continue
            out.append((p.pid, cpu))
        return out


def peak(samples: list[tuple[int, int, float]], start_ns: int | None, end_ns: int | None) -> float | None:
    """The highest per-process CPU % inside [start, end] (start-up imports are not load)."""
    inside = [c for t, _, c in samples
              if (start_ns is None or t >= start_ns) and (end_ns is None or t <= end_ns)]
    return max(inside) if inside else None
