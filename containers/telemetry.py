"""GPU and host samples during a cell, to telemetry.jsonl: clocks, temperature, power, utilization, throttling.

    with Telemetry(cell_dir / "telemetry.jsonl", gpus=[0]):
        run the cell

The first line says where GPU samples come from: "nvml" (nvidia-ml-py), "nvidia-smi" (the
CLI, when NVML cannot be loaded), or "absent" with the reason, since a machine without a
GPU is a fact to record, not an error. Then one line per interval:
{"t_unix", "t_ns" (perf_counter_ns, the records' clock), "host": {...}, "gpus": [...]}.
Throttle reasons are NVML's clock-event bit mask plus the names of the bits that are set.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil

TELEMETRY = "telemetry.jsonl"
# NVML clock-event (throttle) reason bits, named as nvidia-smi names them
REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
           0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
           0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
SMI_FIELDS = ("index", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "utilization.gpu",
              "utilization.memory", "clocks_event_reasons.active", "memory.used")


def reason_names(mask: int | None) -> list[str]:
    return [] if mask is None else [name for bit, name in REASONS.items() if mask & bit]


class NvmlSource:
    name = "nvml"

    def __init__(self, gpus: list[int] | None):
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            pynvml.nvmlShutdown()
            raise RuntimeError("NVML sees no GPU")
        self.indices = [i for i in (gpus if gpus else range(count)) if i < count]
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]

    def _get(self, fn, *args):
        try:
            return fn(*args)
        except self.nvml.NVMLError:  # a field this GPU or driver does not report
            return None

    def sample(self) -> list[dict]:
        n, out = self.nvml, []
        for i, h in zip(self.indices, self.handles, strict=True):
            util = self._get(n.nvmlDeviceGetUtilizationRates, h)
            mem = self._get(n.nvmlDeviceGetMemoryInfo, h)
            power = self._get(n.nvmlDeviceGetPowerUsage, h)
            reasons_fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                n.nvmlDeviceGetCurrentClocksThrottleReasons
            mask = self._get(reasons_fn, h)
            out.append({"index": i, "sm_clock_mhz": self._get(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
                        "mem_clock_mhz": self._get(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
                        "temperature_c": self._get(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
                        "power_w": None if power is None else power / 1000.0,
                        "utilization_gpu_pct": None if util is None else util.gpu,
                        "utilization_mem_pct": None if util is None else util.memory,
                        "memory_used_bytes": None if mem is None else mem.used,
                        "throttle_mask": mask, "throttle": reason_names(mask)})
        return out

    def close(self) -> None:
        self.nvml.nvmlShutdown()


def _number(text: str) -> float | None:
    text = text.strip()
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def _whole(x: float | None) -> int | None:
    return None if x is None else int(x)


def parse_smi(csv_text: str) -> list[dict]:
    """nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits -> samples shaped like NVML's."""
    out = []
    for line in csv_text.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(SMI_FIELDS):
            raise ValueError(f"nvidia-smi line has {len(cols)} fields, expected {len(SMI_FIELDS)}: {line!r}")
        v = dict(zip(SMI_FIELDS, cols, strict=True))
        mask = int(v["clocks_event_reasons.active"], 16) if v["clocks_event_reasons.active"].startswith("0x") else None
        mem = _number(v["memory.used"])
        num = {k: _whole(_number(v[k])) for k in SMI_FIELDS[1:]}.get
        out.append({"index": int(v["index"]), "sm_clock_mhz": num("clocks.sm"), "mem_clock_mhz": num("clocks.mem"),
                    "temperature_c": num("temperature.gpu"), "power_w": _number(v["power.draw"]),
                    "utilization_gpu_pct": num("utilization.gpu"), "utilization_mem_pct": num("utilization.memory"),
                    "memory_used_bytes": None if mem is None else int(mem * 2**20),
                    "throttle_mask": mask, "throttle": reason_names(mask)})
    return out


class SmiSource:
    name = "nvidia-smi"

    def __init__(self, gpus: list[int] | None):
        self.exe = shutil.which("nvidia-smi")
        if not self.exe:
            raise RuntimeError("nvidia-smi is not on PATH")
        self.gpus = gpus
        if not self.sample():
            raise RuntimeError("nvidia-smi lists no GPU")

    def sample(self) -> list[dict]:
        argv = [self.exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"]
        if self.gpus:
            argv.append("--id=" + ",".join(map(str, self.gpus)))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        if proc.returncode != 0:
            raise RuntimeError(f"nvidia-smi failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return parse_smi(proc.stdout)

    def close(self) -> None:
        pass


def open_source(gpus: list[int] | None) -> tuple[object | None, str]:
    """NVML, else nvidia-smi, else None with the reasons both gave."""
    reasons = []
    for cls in (NvmlSource, SmiSource):
        try:
            return cls(gpus), cls.name
        except Exception as e:  # no library, no driver, no device: each means "not this way"
            reasons.append(f"{cls.name}: {type(e).__name__}: {e}")
    return None, "; ".join(reasons)


class ForeignCpu:
    """CPU the host spent outside this process and its descendants (the servers of a local runtime, the
    load generator) since the last reading, in cores: on a shared machine, other work that a cell's
    throughput would silently absorb. A containerized server is not a descendant, and counts as foreign."""

    def __init__(self):
        self._last: tuple[float, float, dict[int, float]] | None = None

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

    @staticmethod
    def _ours() -> dict[int, float]:
        me = psutil.Process()
        out = {}
        for p in [me, *me.children(recursive=True)]:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.Error:   # exited between the listing and the reading
                continue
        return out

    def read(self) -> float | None:
        now, busy, ours = time.monotonic(), self._busy(), self._ours()
        last, self._last = self._last, (now, busy, ours)
        if last is None or now <= last[0]:
            return None
        t0, busy0, ours0 = last
        # a process new since the last reading counts from 0; one that exited drops its final interval
        own = sum(cpu - ours0.get(pid, 0.0) for pid, cpu in ours.items())
        return round(max(0.0, (busy - busy0) - own) / (now - t0), 3)


def host_sample(foreign: ForeignCpu) -> dict:
    mem = psutil.virtual_memory()
    return {"cpu_pct": psutil.cpu_percent(interval=None), "mem_used_bytes": mem.total - mem.available,
            "load1": psutil.getloadavg()[0], "foreign_cores": foreign.read()}


class Telemetry:
    """Samples every interval_s in a thread until closed; usable as a context manager."""

    def __init__(self, path: Path, gpus: list[int] | None = None, interval_s: float = 1.0):
        self.path, self.gpus, self.interval_s = Path(path), gpus, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0

    def start(self) -> Telemetry:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", buffering=1)
        self.source, detail = open_source(self.gpus)
        head = {"kind": "source", "gpu": self.source.name if self.source else "absent", "t_unix": time.time()}
        if self.source is None:
            head["reason"] = detail
        self._write(head)
        psutil.cpu_percent(interval=None)  # the first reading is meaningless; this primes it
        self.foreign = ForeignCpu()
        self.foreign.read()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def _write(self, obj: dict) -> None:
        self._file.write(json.dumps(obj) + "\n")

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                break

    def sample(self) -> None:
        row = {"kind": "sample", "t_unix": time.time(), "t_ns": time.perf_counter_ns(),
               "host": host_sample(self.foreign)}
        if self.source is not None:
            try:
                row["gpus"] = self.source.sample()
            except Exception as e:  # a GPU that fell off the bus mid-cell is itself worth a line
                row["gpu_error"] = f"{type(e).__name__}: {e}"
        self._write(row)
        self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 3 * self.interval_s))
        self.sample()  # one sample at the end, so even a short cell has its closing state
        if self.source is not None:
            self.source.close()
        self._file.close()

    def __enter__(self) -> Telemetry:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
