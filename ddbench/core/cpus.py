"""CPU lists ("1", "0,2", "2-7"): which cores the servers and the load generator are pinned to.

On a small host the load generator and the server under test compete for the same cores, and
where the scheduler puts them changes the server's speed from one start to the next. Pinning
each to its own cores takes that choice away (profile: placement.cpus, load.cpus).
"""

from __future__ import annotations

import os
import re

CPU_LIST = r"^\d+(-\d+)?(,\d+(-\d+)?)*$"


def parse(spec: str) -> frozenset[int]:
    """'0,2-3' -> {0, 2, 3}; a range must run upwards."""
    if not re.fullmatch(CPU_LIST, spec):
        raise ValueError(f"not a CPU list (e.g. '1', '0,2', '2-7'): {spec!r}")
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if b < a:
            raise ValueError(f"CPU range {part!r} runs downwards")
        out.update(range(a, b + 1))
    return frozenset(out)


def usable(spec: str, field: str) -> frozenset[int]:
    """The CPUs of spec, refused (naming the profile field) when this process may not run on them."""
    cpus, allowed = parse(spec), os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        raise ValueError(f"{field} '{spec}' names CPU(s) {missing} that this host does not offer "
                         f"(allowed: {sorted(allowed)})")
    return cpus


def pinner(cpus: frozenset[int] | None):
    """A preexec_fn for subprocess.Popen that pins the child before it starts any thread, or None."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)
