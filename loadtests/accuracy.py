"""How right are our timings? Cells against the null server, whose schedule is known.

    python -m loadtests.accuracy [--concurrency 1 16 64] [--ttft-ms 80 --itl-ms 20 --tokens 16]
                                 [--sweep] [--throughput] [--out DIR]

For each concurrency it runs one real cell (the same run_cell that `just load` uses) and
compares every record with the schedule:
- TTFT error  = measured TTFT - ttft_ms, and chunk-gap error = measured gap - itl_ms
  (median and p99; p99 is marked when n * 0.01 < 10, as docs/metrics.md asks);
- the client's own share of it: first-chunk arrival - the server's write of that chunk,
  both on the host's one perf_counter clock (the null server logs its writes);
- the peak CPU of the Locust process, and the content chunks it read per second.
--sweep raises C until a cell's client CPU passes 90%; --throughput streams as fast as the
server can write to find the most chunks/s one Locust process sustains.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from contextlib import nullcontext
from itertools import pairwise
from pathlib import Path

from ddbench.core.profile import Load, Workload
from loadtests import nullserver
from loadtests.cell import run_cell
from loadtests.cpu import CPU_LIMIT
from loadtests.recorder import read_records
from loadtests.sigterm import exit_on_sigterm


def quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict:
    return {"n": len(xs), "median": quantile(xs, 0.5), "p99": quantile(xs, 0.99),
            "p99_trusted": len(xs) * 0.01 >= 10}


def measure(c: int, requests_per_user: int, ttft_ms: float, itl_ms: float, tokens: int, tokens_per_chunk: int,
            warmup: int, processes: int, out: Path, url: str | None = None) -> dict:
    cell = out / f"c{c}"
    log = out / f"null-c{c}.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    workload = Workload(prompt_set="loadtests/prompts/chat.jsonl", max_tokens=tokens)
    load = Load(concurrency=[c], warmup_requests=warmup, requests_per_user=requests_per_user, processes=processes)
    load_before = os.getloadavg()[0]
    server = nullcontext(url) if url else nullserver.running(
        log=log, ttft_ms=ttft_ms, itl_ms=itl_ms, tokens=tokens, tokens_per_chunk=tokens_per_chunk)
    with server as url:
        status = run_cell(workload, load, url=url, cell_dir=cell, arm="null", concurrency=c, repetition=1,
                          timeout_s=1800)
    recs = [r for r in read_records(cell) if not r.warmup and r.ok and r.chunks]
    server = {}
    for line in log.read_text().splitlines() if log.is_file() else []:
        row = json.loads(line)
        server[row["rid"]] = row
    ttft_err = [(r.chunks[0].t_ns - r.send_ns) / 1e6 - ttft_ms for r in recs]
    gap_err = [(b.t_ns - a.t_ns) / 1e6 - itl_ms for r in recs for a, b in pairwise(r.chunks)]
    client_delay = [(c_.t_ns - s_) / 1e6 for r in recs if r.request_id in server
                    for c_, s_ in zip(r.chunks, server[r.request_id]["sent_ns"], strict=False)]
    server_late = [(server[r.request_id]["sent_ns"][0] - server[r.request_id]["recv_ns"]) / 1e6 - ttft_ms
                   for r in recs if r.request_id in server and server[r.request_id]["sent_ns"]]
    chunks = sum(len(r.chunks) for r in recs)
    window_s = ((status.window_end_ns or 0) - (status.window_start_ns or 0)) / 1e9
    return {"concurrency": c, "status": status.status, "reason": status.reason, "requests": status.requests,
            "errors": status.errors, "client_cpu_max": status.client_cpu_max,
            "ttft_error_ms": summary(ttft_err), "gap_error_ms": summary(gap_err),
            "client_delay_ms": summary(client_delay), "server_ttft_late_ms": summary(server_late),
            "chunks_per_s": chunks / window_s / processes if window_s > 0 else None,
            # other work on the host takes CPU from the client and the server: report it beside the errors
            "host_load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)], "host_cpus": os.cpu_count(),
            "cell_dir": str(cell)}


def fmt(s: dict) -> str:
    if s["median"] is None:
        return "n/a"
    return f"{s['median']:+.2f} / {s['p99']:+.2f}{'' if s['p99_trusted'] else '*'}"


def show(row: dict) -> str:
    cpu = "n/a" if row["client_cpu_max"] is None else f"{row['client_cpu_max']:.0f}%"
    cps = "n/a" if row["chunks_per_s"] is None else f"{row['chunks_per_s']:.0f}"
    return (f"C={row['concurrency']:>4}  n={row['requests']:>5}  TTFT err {fmt(row['ttft_error_ms']):>18}  "
            f"gap err {fmt(row['gap_error_ms']):>18}  client delay {fmt(row['client_delay_ms']):>18}  "
            f"server late {fmt(row['server_ttft_late_ms']):>18}  CPU {cpu:>5}  chunks/s/proc {cps:>6}  "
            f"load {row['host_load_1min'][0]:.1f}->{row['host_load_1min'][1]:.1f}/{row['host_cpus']}  "
            f"{row['status']}{' - ' + row['reason'] if row['reason'] else ''}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtests.accuracy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--requests", type=int, default=1000, help="measured requests per cell (split over users)")
    ap.add_argument("--min-per-user", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--ttft-ms", type=float, default=80)
    ap.add_argument("--itl-ms", type=float, default=20)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--sweep", action="store_true", help="then raise C until client CPU passes 90%%")
    ap.add_argument("--max-concurrency", type=int, default=512, help="where the sweep stops regardless")
    ap.add_argument("--throughput", action="store_true",
                    help="only: one Locust process against streams written with no gap")
    ap.add_argument("--out", type=Path, help="keep the cells here (default: a temporary directory)")
    ap.add_argument("--url", help="another server with this schedule (e.g. guidellm mock-server) instead of ours")
    a = ap.parse_args(argv)
    exit_on_sigterm()
    out = a.out or Path(tempfile.mkdtemp(prefix="ddbench-accuracy-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []

    def one(c: int, **kw) -> dict:
        params = dict(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens, tokens_per_chunk=a.tokens_per_chunk,
                      warmup=a.warmup, processes=a.processes, url=a.url)
        params.update(kw)
        per_user = max(a.min_per_user, -(-a.requests // c))
        row = measure(c, per_user, out=out / f"{'tp' if a.throughput else 'acc'}-{len(rows)}", **params)
        print(show(row), flush=True)
        rows.append(row)
        return row

    if a.throughput:
        for c in a.concurrency:
            one(c, ttft_ms=0, itl_ms=0)
    else:
        for c in a.concurrency:
            one(c)
        if a.sweep:
            c = max(a.concurrency)
            while c < a.max_concurrency:
                c = min(int(c * 1.5), a.max_concurrency)
                row = one(c)
                if row["client_cpu_max"] is None or row["client_cpu_max"] > CPU_LIMIT or row["status"] != "ok":
                    break
    (out / "accuracy.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"(* p99 from fewer than 1000 samples)  results: {out / 'accuracy.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
