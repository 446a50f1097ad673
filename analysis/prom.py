"""Prometheus text exposition of a run's scrapes (the parser is ddbench.prom's)."""

from __future__ import annotations

from pathlib import Path

from ddbench.prom import GENERATED, VERIFY_CALLS, PromError, parse  # noqa: F401
from ddbench.results import read_run_text


def read(path: Path) -> dict[str, float] | None:
    text = read_run_text(path)
    return None if text is None else parse(text, str(path))
