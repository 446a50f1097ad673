"""Prometheus text exposition of a run's scrapes (the parser is ddbench.core.prom's)."""

from __future__ import annotations

from pathlib import Path

from ddbench.core.prom import (  # noqa: F401
    GENERATED,
    TAU_NOT_REPORTED,
    VERIFY_CALLS,
    VLLM_ACCEPTED,
    VLLM_DRAFT_TOKENS,
    VLLM_DRAFTS,
    PromError,
    parse,
)
from ddbench.core.results import read_run_text


def read(path: Path) -> dict[str, float] | None:
    text = read_run_text(path)
    return None if text is None else parse(text, str(path))
