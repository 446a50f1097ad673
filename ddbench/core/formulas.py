"""The formulas of docs/metrics.md and the percentile rule, once, for every stage that needs them: per request
(TTFT, TPOT, chunk gaps, output rate, τ) and per window (which requests it counts, its throughput). Analysis
(analysis/estimate/metrics.py), the load generator's cells and rounds, the warm-up, `ddbench verify`, the live web
UI and the experiments compute them here. Inputs are raw timings in perf_counter_ns; arrays or scalars."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

MIN_TAIL = 10      # a percentile q needs n·(1−q) ≥ 10 samples beyond it


def ttft_s(send_ns, first_ns):
    """Time to first token: send to the first content chunk."""
    return (np.asarray(first_ns, dtype=float) - np.asarray(send_ns, dtype=float)) / 1e9


def e2e_s(send_ns, end_ns):
    return (np.asarray(end_ns, dtype=float) - np.asarray(send_ns, dtype=float)) / 1e9


def tpot_s(e2e, ttft, tokens):
    """Time per output token after the first: (E2E − TTFT) / (n − 1); NaN for n ≤ 1."""
    n = np.asarray(tokens, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 1, (np.asarray(e2e, dtype=float) - np.asarray(ttft, dtype=float)) / (n - 1), np.nan)


def output_rate(tokens, e2e):
    """One request's own tokens/s over its whole life."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(e2e, dtype=float) > 0, np.asarray(tokens, dtype=float) / e2e, np.nan)


def tau(tokens, steps):
    """Tokens per verify step (Σ tokens / Σ steps when summed first); NaN without steps."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(steps, dtype=float) > 0, np.asarray(tokens, dtype=float) / steps, np.nan)


def span(send_ns, end_ns) -> tuple:
    """First send to last end of some requests: the window of a cell without one of its own (a warm-up window, a
    stretch of rounds, a cell whose status.json has none). Missing ends (None, NaN) are left out, and integer
    timings stay integers (a float loses nanoseconds past 2**53); (nan, nan) where no request ended."""
    ends = [e for e in end_ns if e is not None and e == e]
    if not ends:
        return float("nan"), float("nan")
    return min(s for s in send_ns if s is not None and s == s), max(ends)


def inside(end_ns, start_ns: float, stop_ns: float) -> np.ndarray:
    """The requests a window counts: those that ended inside it, its edges included."""
    end = np.asarray(end_ns, dtype=float)
    with np.errstate(invalid="ignore"):
        return (end >= start_ns) & (end <= stop_ns)


def window_s(start_ns, stop_ns):
    """A window's length in seconds."""
    return (np.asarray(stop_ns, dtype=float) - np.asarray(start_ns, dtype=float)) / 1e9


def throughput(tokens: float, seconds: float) -> float:
    """Aggregate output tokens per second: the tokens of the requests a window counts (inside) over its length;
    NaN for an empty or missing window."""
    return float(tokens) / seconds if seconds > 0 else float("nan")


def gaps_s(t_ns) -> np.ndarray:
    """Time between one request's successive content chunks (what bench tools call ITL)."""
    return np.diff(np.asarray(t_ns, dtype=float)) / 1e9


def span_rate(t_ns) -> float:
    """Events per second between the first and the last of them, (n − 1) / span: free of a cell's edges (its
    window opening before the first arrival, its last request's own latency at its close). NaNs are left out."""
    t = np.asarray(t_ns, dtype=float)
    t = t[~np.isnan(t)]
    span = (t.max() - t.min()) / 1e9 if len(t) > 1 else 0.0
    return (len(t) - 1) / span if span > 0 else float("nan")


def printable(n: int, q: float) -> bool:
    """n·(1−q) ≥ 10, in exact arithmetic: 100·(1−0.9) is 9.999… in floating point."""
    return n * (1 - Fraction(str(q))) >= MIN_TAIL


def percentile(x, q: float) -> float:
    """The q-quantile, or NaN when n is too small to print it ('n too small')."""
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.quantile(x, q)) if printable(len(x), q) else float("nan")
