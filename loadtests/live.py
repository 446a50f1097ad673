"""What the web UI shows while a load runs: TTFT, TPOT and chunk-gap percentiles, output tokens/s and τ,
over a sliding window and since the start, with a series over time. The formulas are ddbench.core.formulas',
the same that analysis applies to the records afterwards; this module only chooses which requests.

    fact(record, ar)          one finished request, reduced to what the view needs (sent to the master)
    LiveStats.add(fact)       on the master (or the only process): every process's requests, merged
    LiveStats.snapshot(now)   {"window": ..., "total": ..., "series": [...]}

A request counts in a window when it *ended* inside it, as a measured window counts it in analysis:
output tokens/s = Σ tokens of those requests / the window's length.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ddbench.core import formulas as f
from ddbench.core import prom
from ddbench.core.records import RequestRecord

WINDOW_S = 30.0
BUCKET_S = 2.0
TRAIL_S = 10.0   # a series point's percentiles are over this long before it: a bucket alone is too few
QUANTILES = (0.5, 0.9, 0.99)
# the LLM tab's rows: label, key, digits (negative: seconds shown as ms)
ROWS = [("requests", "requests", 0), ("errors", "errors", 0), ("output tokens/s", "output_tokens_per_s", 1),
        ("tokens/s per user", "per_user_tokens_per_s", 1), ("tau", "tau", 2),
        ("TTFT p50 (ms)", "ttft_p50", -3), ("TTFT p90 (ms)", "ttft_p90", -3), ("TPOT p50 (ms)", "tpot_p50", -3),
        ("TPOT p90 (ms)", "tpot_p90", -3), ("chunk gap p50 (ms)", "gap_p50", -3), ("chunk gap p90 (ms)", "gap_p90", -3)]


def fact(rec: RequestRecord) -> dict:
    """One request's numbers: its end on the wall clock, tokens, TTFT, TPOT, chunk gaps and verify steps
    (the server's per-request count, None when it returns none; LiveStats counts AR as one a token)."""
    ok = rec.ok and rec.end_ns is not None
    end_unix = (rec.send_unix_ns + ((rec.end_ns or rec.send_ns) - rec.send_ns)) / 1e9
    out = {"arm": rec.arm, "users": rec.concurrency, "warmup": rec.warmup, "ok": ok, "end_unix": end_unix,
           "tokens": 0, "ttft": None, "tpot": None, "gaps": [], "steps": None}
    if not ok:
        return out
    tokens = rec.usage.completion_tokens if rec.usage else sum(c.tokens or 0 for c in rec.chunks)
    ttft = float(f.ttft_s(rec.send_ns, rec.chunks[0].t_ns)) if rec.chunks else math.nan
    tpot = float(f.tpot_s(f.e2e_s(rec.send_ns, rec.end_ns), ttft, tokens))
    steps = (rec.spec or {}).get("spec_verify_ct")
    out.update(tokens=tokens, ttft=_num(ttft), tpot=_num(tpot), gaps=f.gaps_s([c.t_ns for c in rec.chunks]).tolist(),
               steps=steps)
    return out


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def summary(facts: list[dict], span_s: float, users: int) -> dict:
    """The figures of one set of requests over span_s seconds; a percentile with too few samples is None."""
    ok = [x for x in facts if x["ok"]]
    tokens = sum(x["tokens"] for x in ok)
    out = {"requests": len(facts), "errors": len(facts) - len(ok), "span_s": round(span_s, 3), "tokens": tokens,
           "output_tokens_per_s": _num(f.throughput(tokens, span_s)) if span_s > 0 else None}
    out["per_user_tokens_per_s"] = (_num(out["output_tokens_per_s"] / users)
                                    if out["output_tokens_per_s"] is not None and users else None)
    series = {"ttft": [x["ttft"] for x in ok if x["ttft"] is not None],
              "tpot": [x["tpot"] for x in ok if x["tpot"] is not None],
              "gap": [g for x in ok for g in x["gaps"]]}
    for name, values in series.items():
        for q in QUANTILES:
            out[f"{name}_p{round(100 * q)}"] = _num(f.percentile(np.asarray(values, dtype=float), q))
    counted = [x for x in ok if x["steps"]]
    out["tau"] = (_num(float(f.tau(sum(x["tokens"] for x in counted), sum(x["steps"] for x in counted))))
                  if counted else None)
    out["tau_source"] = "requests" if counted else None
    return out


@dataclass
class LiveStats:
    """Measured (not warm-up) requests since the last reset, from every Locust process."""

    ar_arms: set[str] = field(default_factory=set)
    window_s: float = WINDOW_S
    started: float | None = None
    stopped: float | None = None   # a stopped load's figures hold still
    users: int = 0
    facts: list[dict] = field(default_factory=list)

    def reset(self, now: float | None = None) -> None:
        self.started, self.stopped, self.facts = now or time.time(), None, []

    def stop(self, now: float | None = None) -> None:
        if self.started is not None and self.stopped is None:
            self.stopped = now or time.time()

    def add(self, x: dict) -> None:
        if x["warmup"]:
            return
        if x["arm"] in self.ar_arms and x["ok"]:   # AR verifies one token per step: τ = 1 by definition
            x = {**x, "steps": x["tokens"]}
        self.facts.append(x)

    def snapshot(self, now: float | None = None, server_tau: Callable[[float], float | None] | None = None,
                 series: bool = True) -> dict:
        """The window (the last window_s seconds, or since the start if shorter), the whole run, and (unless
        series=False, as the LLM tab's table needs none) a series of BUCKET_S buckets. server_tau(since_unix)
        -> τ | None fills τ where the requests carry no verify counts (a server that returns no per-request
        details, as SGLang 0.5.15)."""
        now = min(now or time.time(), self.stopped or math.inf)
        start = self.started or now
        lo = max(start, now - self.window_s)
        window = summary([x for x in self.facts if lo < x["end_unix"] <= now], now - lo, self.users)
        total = summary([x for x in self.facts if x["end_unix"] <= now], now - start, self.users)
        for part, since in ((window, lo), (total, start)):
            if part["tau"] is None and server_tau is not None and (t := server_tau(since)) is not None:
                part["tau"], part["tau_source"] = t, "server /metrics"
        return {"now": now, "started": start, "users": self.users, "window_s": self.window_s,
                "window": window, "total": total, "series": self._series(start, now) if series else []}

    def _series(self, start: float, now: float) -> list[dict]:
        """The last 150 buckets (start + kB, start + (k+1)B]: each one's rate and τ, and the percentiles of the
        TRAIL_S before its end. Facts are bucketed once: this runs at every refresh of the page."""
        ks = range(max(0, math.ceil((now - start) / BUCKET_S) - 150), math.ceil((now - start) / BUCKET_S))
        trail = round(TRAIL_S / BUCKET_S)
        buckets: dict[int, list[dict]] = {}
        for x in self.facts:
            k = math.ceil((x["end_unix"] - start) / BUCKET_S) - 1
            if ks and ks.start - trail < k < ks.stop:
                buckets.setdefault(k, []).append(x)
        out = []
        for k in ks:
            rate = summary(buckets.get(k, []), BUCKET_S, self.users)
            last = summary([x for j in range(k - trail + 1, k + 1) for x in buckets.get(j, [])], TRAIL_S, self.users)
            out.append({"t": round((k + 1) * BUCKET_S, 1), "tokens_per_s": rate["output_tokens_per_s"],
                        "tau": rate["tau"], "ttft_p50": last["ttft_p50"], "tpot_p50": last["tpot_p50"]})
        return out


@dataclass
class ServerCounters:
    """The server's /metrics counters, sampled over time: τ since a moment = Δ generated tokens / Δ verify
    calls between the last sample before it and now (ddbench.core.prom's counters, as analysis differences them)."""

    samples: list[tuple[float, float, float]] = field(default_factory=list)

    def add(self, t: float, metrics: dict[str, float]) -> None:
        if prom.GENERATED in metrics and prom.VERIFY_CALLS in metrics:
            self.samples.append((t, metrics[prom.GENERATED], metrics[prom.VERIFY_CALLS]))
            del self.samples[:-2000]

    def tau(self, since: float) -> float | None:
        before = [x for x in self.samples if x[0] <= since] or self.samples[:1]
        if not before or not self.samples:
            return None
        (_, g0, v0), (_, g1, v1) = before[-1], self.samples[-1]
        return _num(float(f.tau(g1 - g0, v1 - v0))) if v1 > v0 else None


def table(snap: dict) -> list[dict]:
    """The LLM tab's rows: each figure over the window and since the start."""
    def cell(part: dict, key: str, digits: int) -> str:
        v = part.get(key)
        if v is None:
            return "n too small" if key.startswith(("ttft", "tpot", "gap")) else "-"
        return f"{v * 1000:.1f}" if digits < 0 else (f"{v:.{digits}f}" if digits else str(v))

    rows = [{"metric": "arm", "window": snap["arm"], "total": snap["arm"]},
            {"metric": "server", "window": snap["state"], "total": snap["state"]}]
    rows += [{"metric": name, "window": cell(snap["window"], key, d), "total": cell(snap["total"], key, d)}
             for name, key, d in ROWS]
    rows.append({"metric": "tau from", "window": snap["window"]["tau_source"] or "-",
                 "total": snap["total"]["tau_source"] or "-"})
    return rows
