"""Prometheus text exposition, reduced to what a before/after difference needs: shared by analysis (the
counters each cell scraped) and the live web UI (τ from a server that returns no per-request details)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ddbench.core.results import read_run_text

# SGLang's counters (the reference engine exports the same): τ = Δ generated tokens / Δ verify calls
GENERATED = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
# vLLM's (v1 engine, /metrics): one draft = one verify step of one request, so τ = 1 + Δ accepted / Δ drafts
VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
# τ of a server that counts no verify steps in any form ddbench reads: reported as such, never guessed
TAU_NOT_REPORTED = (f"not reported: the server exposes no verify-step counters ({VERIFY_CALLS}, {VLLM_DRAFTS}) "
                    "and no 'accept len' log lines")

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
    """A run's scrape file, parsed; None where the run has none."""
    text = read_run_text(path)
    return None if text is None else parse(text, str(path))
