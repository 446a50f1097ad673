"""Where a step's host time goes: the GPU's idle time inside a profiled window, laid on the Python frames the
server's scheduler thread was in at that moment.

SGLang's profiler (`/start_profile` with CPU and GPU activity and its default `with_stack`) writes the scheduler's
Python calls (`python_function` events), torch's operators and CUDA runtime calls beside the GPU's kernels. The
GPU is idle between kernels while the host decides what to run next; every such microsecond is charged to the
innermost frame the scheduler thread was executing (its *self* time), and again to the innermost SGLang frame
above it, so a reader sees both the hot leaf (a `.tolist()`, a sort, an allocator call) and the SGLang function
that made it. The window runs over the scheduler's forward steps (its run_batch calls): the idle loop
before the first request and after the last is not a step's cost. The profiler's own cost is host work per
call, so the charged times are inflated, the ranking much less.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from containers.kernel_time import GPU_CATEGORIES, busy_spans

CPU_CATEGORIES = ("python_function", "cpu_op", "cuda_runtime", "cuda_driver", "user_annotation")
TOP = 12
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PATH = re.compile(r"^.*/(?=[^/]+/[^/]+\.py\()")   # keep "package/module.py(line): function"
STEP = re.compile(r"managers/scheduler\.py\(\d+\): run_batch$")


def frame_name(name: str) -> str:
    """A frame's name without object addresses or the install prefix."""
    return _PATH.sub("", _ADDRESS.sub("", name))


def _is_sglang(raw: str) -> bool:
    return "sglang/" in raw and ".py(" in raw


def idle_spans(spans: list[tuple[float, float]], window: tuple[float, float]) -> list[tuple[float, float]]:
    """The GPU's idle intervals (µs) inside window, from its merged busy spans (kernel_time.busy_spans)."""
    lo, hi = window
    gaps, end = [], lo
    for a, b in spans:
        if a > end:
            gaps.append((end, min(a, hi)))
        end = max(end, b)
        if end >= hi:
            break
    if end < hi:
        gaps.append((end, hi))
    return [(a, b) for a, b in gaps if b > a]


def steps_of(events: list[dict]) -> list[tuple[float, float]]:
    """The scheduler's run_batch calls (one per forward step, speculative or not), as (start, end) µs."""
    return sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur") or 0)) for e in events
                  if e.get("cat") == "python_function" and STEP.search(str(e.get("name", ""))))


def _threads(events: Iterable[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in CPU_CATEGORIES and "ts" in e:
            out.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    return out


def _self_segments(events: list[dict]) -> list[tuple[float, float, str, str]]:
    """One thread's events, properly nested, cut into the disjoint stretches where each is the innermost:
    (start, end, innermost frame, innermost SGLang frame above it or '')."""
    evs = sorted(events, key=lambda e: (float(e["ts"]), -float(e.get("dur") or 0)))
    out: list[tuple[float, float, str, str]] = []
    stack: list[tuple[float, str, str]] = []   # (end, name, sglang frame at or above)
    cursor = float("-inf")

    def emit(until: float) -> None:
        nonlocal cursor
        if stack and until > cursor:
            _, name, owner = stack[-1]
            out.append((cursor, until, name, owner))
        cursor = max(cursor, until)

    for e in evs:
        start, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur") or 0)
        while stack and stack[-1][0] <= start:
            emit(stack[-1][0])
            stack.pop()
        emit(start)
        raw = str(e.get("name", ""))
        owner = frame_name(raw) if _is_sglang(raw) else (stack[-1][2] if stack else "")
        stack.append((min(end, stack[-1][0]) if stack else end, frame_name(raw), owner))
        cursor = start
    while stack:
        emit(stack[-1][0])
        stack.pop()
    return out


def _charge(segments, gaps) -> tuple[Counter, Counter, float]:
    """Idle µs per innermost frame and per SGLang frame, and the idle µs some frame covered."""
    leaf, owner, covered = Counter(), Counter(), 0.0
    i = 0
    for a, b, name, sg in segments:           # both lists are sorted and disjoint within themselves
        while i < len(gaps) and gaps[i][1] <= a:
            i += 1
        j = i
        while j < len(gaps) and gaps[j][0] < b:
            overlap = min(b, gaps[j][1]) - max(a, gaps[j][0])
            if overlap > 0:
                leaf[name] += overlap
                owner[sg or "(outside SGLang's frames)"] += overlap
                covered += overlap
            j += 1
    return leaf, owner, covered


def summarize(events: list[dict]) -> dict:
    """Over the window of the scheduler's forward steps (run_batch calls; the GPU's first to last event where
    the trace has none): the GPU's busy and idle time per step and, on the thread whose frames cover most of
    the idle time (the scheduler's), the idle time by innermost frame and by SGLang frame, largest first."""
    steps, spans = steps_of(events), busy_spans(events)
    if not steps and not spans:
        return {"error": "the trace holds neither GPU events nor scheduler steps"}
    window = (steps[0][0], steps[-1][1]) if steps else (spans[0][0], spans[-1][1])
    gaps = idle_spans(spans, window)
    length = window[1] - window[0]
    idle = sum(b - a for a, b in gaps)
    threads = _threads(events)
    leaf, owner, covered = Counter(), Counter(), 0.0
    for evs in threads.values():
        charged = _charge(_self_segments(evs), gaps)
        if charged[2] > covered:
            leaf, owner, covered = charged
    n = len(steps) or None
    top = lambda c: [[name, round(us / 1e3 / (n or 1), 4)] for name, us in c.most_common(TOP)]  # noqa: E731
    return {"steps": len(steps), "window_s": length / 1e6, "gpu_busy_s": (length - idle) / 1e6,
            "gpu_idle_s": idle / 1e6, "idle_covered_s": covered / 1e6,
            "ms_per_step": length / 1e3 / n if n else None, "idle_ms_per_step": idle / 1e3 / n if n else None,
            "gpu_events": sum(e.get("cat") in GPU_CATEGORIES for e in events),
            "cpu_events": sum(len(v) for v in threads.values()),
            # per step where the trace counts steps, else over the whole window
            "top_frames_ms": top(leaf), "top_sglang_ms": top(owner)}
