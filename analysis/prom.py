"""Prometheus text exposition, reduced to what a before/after difference needs."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ddbench.results import read_run_text

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\d+)?\s*$")


class PromError(ValueError):
    pass


def parse(text: str, source: str = "<metrics>") -> dict[str, float]:
    """Each metric name's value summed over its label sets (models, ranks); buckets are dropped."""
    out: dict[str, float] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise PromError(f"{source}:{n}: not a Prometheus sample line: {line[:80]!r}")
        name, value = m.group(1), m.group(3)
        if name.endswith("_bucket"):
            continue
        try:
            v = float(value)
        except ValueError:
            raise PromError(f"{source}:{n}: value {value!r} of {name} is not a number") from None
        if not math.isnan(v):
            out[name] = out.get(name, 0.0) + v
    return out


def read(path: Path) -> dict[str, float] | None:
    text = read_run_text(path)
    return None if text is None else parse(text, str(path))
