"""server.log lines that carry measurements: SGLang's `Decode batch` line, our `DDTree window`
line, and the events that show a cell started clean (cache flush, server ready).

    [2026-11-29 08:10:00] Decode batch, #running-req: 8, #token: 9120, token usage: 0.04, accept len: 4.12, ...
    [2026-11-29 08:10:00 TP0] DDTree window, steps: 40, avg tree nodes: 15.00, avg accepted depth: 3.10, ...

Timestamps have one-second resolution and no zone; they are read as UTC (containers run in UTC).
"""

from __future__ import annotations

import calendar
import re
from pathlib import Path

import pandas as pd

from ddbench.core.results import read_run_text

_PREFIX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)?(?:\s+([^\]]*))?\]\s*(.*)$")
# field names as they appear in the log -> column names
DECODE_FIELDS = {"#running-req": "running_req", "#token": "tokens", "token usage": "token_usage",
                 "accept len": "accept_len", "accept rate": "accept_rate", "cuda graph": "cuda_graph",
                 "gen throughput (token/s)": "gen_throughput", "#queue-req": "queue_req"}
DDTREE_FIELDS = {"steps": "steps", "avg tree nodes": "avg_nodes", "avg accepted depth": "avg_depth",
                 "avg commit length": "avg_commit"}
EVENTS = {"Cache flushed successfully": "flush", "The server is fired up": "ready"}
COLUMNS = ["line", "t_unix", "rank", "kind", *DECODE_FIELDS.values(), *DDTREE_FIELDS.values()]


def parse(text: str) -> pd.DataFrame:
    rows = []
    for n, raw in enumerate(text.splitlines(), start=1):
        m = _PREFIX.match(raw)
        if not m:
            continue
        stamp, rank, body = m.groups()
        row = _body(body)
        if row is None:
            continue
        rows.append({"line": n, "t_unix": _unix(stamp), "rank": rank or "", **row})
    df = pd.DataFrame(rows, columns=COLUMNS)
    # with tensor parallelism every rank may log the same window; rank 0 speaks for all, and
    # untagged lines come from processes outside the ranks (e.g. the HTTP server)
    ranks = sorted(set(df["rank"]) - {""}, key=lambda r: (not r.endswith("0"), r))
    if len(ranks) > 1:
        df = df[df["rank"].isin(["", ranks[0]])]
    return df.reset_index(drop=True)


def _unix(stamp: str) -> float:
    """'2026-11-29 08:10:00' as UTC seconds (strptime is too slow for logs of 10^5 lines)."""
    return float(calendar.timegm((int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]), int(stamp[11:13]),
                                  int(stamp[14:16]), int(stamp[17:19]), 0, 0, 0)))


def _body(body: str) -> dict | None:
    for marker, kind in EVENTS.items():
        if marker in body:
            return {"kind": kind}
    for head, kind, fields in (("Decode batch", "decode", DECODE_FIELDS), ("DDTree window", "ddtree", DDTREE_FIELDS)):
        if body.startswith(head):
            out = {"kind": kind}
            for part in body[len(head):].split(","):
                key, sep, value = part.partition(":")
                col = fields.get(key.strip())
                if sep and col:
                    out[col] = _value(value.strip())
            return out
    return None


def _value(s: str):
    if s in ("True", "False"):
        return s == "True"
    try:
        return float(s)
    except ValueError:
        return None


def read(path: Path) -> pd.DataFrame:
    text = read_run_text(path, errors="replace")
    return pd.DataFrame(columns=COLUMNS) if text is None else parse(text)
