"""Side by side with a peer tool: our cell and guidellm's on one workload, closed loop (its `concurrent`
profile) or open loop (its `poisson` profile at the same offered rate).

    python -m loadtests.peer --guidellm /tmp/guidellm-venv/bin/guidellm --concurrency 4 [--rate 4] \
        [--url URL | --ttft-ms 80 --itl-ms 20 --tokens 32] [--prompt-set loadtests/prompts/study5.jsonl]

guidellm lives in its own virtualenv (it pins its own transformers; install it with
torch==2.13.0 pinned so pip takes the CPU wheel). It is given the same prompts (the user
turn of each prompt), the same max_tokens and the same number of concurrent streams, and a
word-level tokenizer built here (it needs a local one; the servers report usage anyway).
Without --url both tools run against a fresh null server of the given schedule.

In open loop (--rate R) both send requests as a Poisson process at R requests/s for --duration-s, at most
--concurrency in flight, and the arrival and achieved rates are compared too: ours from first to last send and
end, as analysis reads a cell (docs/metrics.md), guidellm's per second of its duration.

Compared: median TTFT, and median TPOT = (E2E - TTFT) / (N - 1) for us against guidellm's
median inter-token latency = (last token time - first token time) / (tokens - 1); on a
stream whose last chunk closes it, the two are one quantity.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from contextlib import nullcontext
from pathlib import Path

from ddbench.core.formulas import span_rate
from ddbench.core.profile import Load, Workload
from ddbench.core.prompts import load_prompt_set
from loadtests import nullserver
from loadtests.cell import run_cell
from loadtests.options import resolve_sources
from loadtests.recorder import read_records
from loadtests.sigterm import exit_on_sigterm

AGREE = 0.10


def word_tokenizer(prompts: list[str], out: Path) -> Path:
    """A whitespace word-level tokenizer directory that transformers' AutoTokenizer loads."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {w for p in prompts for w in p.split()} | {f"t{i}" for i in range(4096)}
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(words))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1 << 20}))
    return out


def ours(url: str, prompt_set: str, concurrency: int, requests_per_user: int, max_tokens: int, out: Path,
         rate: float | None = None, duration_s: float = 30.0) -> dict:
    workload = Workload(prompt_set=prompt_set, max_tokens=max_tokens)
    load = (Load(mode="open", rate=rate, arrival="poisson", concurrency=[concurrency], warmup_requests=0,
                 duration_s=duration_s) if rate else
            Load(concurrency=[concurrency], warmup_requests=1, requests_per_user=requests_per_user))
    status = run_cell(workload, load, url=url, cell_dir=out / "ours", arm="peer", concurrency=concurrency,
                      repetition=1)
    sent = [r for r in read_records(out / "ours") if not r.warmup]
    recs = [r for r in sent if r.ok and r.chunks]
    ttft = [(r.chunks[0].t_ns - r.send_ns) / 1e6 for r in recs]
    tpot = [((r.end_ns - r.send_ns) / 1e6 - t) / (r.usage.completion_tokens - 1)
            for r, t in zip(recs, ttft, strict=True) if r.usage and r.usage.completion_tokens > 1]
    row = {"status": status.status, "n": len(recs), "ttft_ms": statistics.median(ttft),
           "tpot_ms": statistics.median(tpot), "client_cpu_max": status.client_cpu_max}
    if rate:   # as analysis reads a cell (docs/metrics.md): first to last event
        row["arrival_rate"] = span_rate([r.intended_send_ns or r.send_ns for r in sent])
        row["achieved_rate"] = span_rate([r.end_ns for r in recs])
    return row


def theirs(guidellm: str, url: str, prompts: list[str], concurrency: int, requests: int, max_tokens: int,
           out: Path, rate: float | None = None, duration_s: float = 30.0) -> dict:
    data = out / "guidellm-prompts.jsonl"
    # guidellm stops at the end of its data: one row per request, cycling the prompt set; in open loop, rows
    # for twice the requests the rate offers, so that the duration ends the run
    n = int(2 * rate * duration_s) + 10 if rate else requests
    rows = [prompts[i % len(prompts)] for i in range(n)]
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in rows))
    tokenizer = word_tokenizer(prompts, out / "tokenizer")
    report = out / "guidellm.json"
    load = (["--profile", f"kind=poisson,rate={rate},max_concurrency={concurrency}",
             "--constraint", f"kind=max_duration,seconds={duration_s}"] if rate else
            ["--profile", f"kind=concurrent,streams={concurrency}",
             "--constraint", f"kind=max_requests,count={requests}"])
    argv = [guidellm, "run",
            # greedy and the full length, as ours sends (guidellm sends neither by default: the server's default
            # temperature then samples, and acceptance falls with it)
            "--backend", f"kind=openai_http,target={url},request_format=/v1/chat/completions,"
                         f"max_tokens={max_tokens},http2=false,extras.body.temperature=0,extras.body.ignore_eos=true",
            *load,
            "--data", f"kind=json_file,path={data}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
            "--output", f"kind=json,path={report}",
            "--disable-console-interactive"]
    # one worker process unless told otherwise: its default several took the server's CPU on a 2-core host
    env = {**os.environ, "GUIDELLM__MAX_WORKER_PROCESSES": os.environ.get("GUIDELLM__MAX_WORKER_PROCESSES", "1")}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env)
    (out / "guidellm.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0 or not report.is_file():
        raise RuntimeError(f"guidellm failed (exit {p.returncode}); see {out / 'guidellm.log'}")
    return parse_report(json.loads(report.read_text()))


def parse_report(report: dict) -> dict:
    bench = report["benchmarks"][0]
    m = bench["metrics"]

    def median(name: str) -> float:
        return m[name]["successful"]["median"]

    # its rates are per second of the benchmark's duration: requests sent (total) and completed (successful)
    totals = m.get("request_totals", {})
    return {"n": totals.get("successful"),
            "ttft_ms": median("time_to_first_token_ms"), "tpot_ms": median("inter_token_latency_ms"),
            "guidellm_tpot_ms": median("time_per_output_token_ms"),
            "arrival_rate": totals["total"] / bench["duration"] if "total" in totals and bench.get("duration")
            else float("nan"),
            "achieved_rate": m["requests_per_second"]["successful"]["mean"]}


def server_ttft(log: Path) -> dict[str, float]:
    """Median of (first content write - request read) as the null server logged it, per tool."""
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    side = {"ours": [], "guidellm": []}
    for r in rows:
        if r["sent_ns"]:
            side["ours" if r["rid"] else "guidellm"].append((r["sent_ns"][0] - r["recv_ns"]) / 1e6)
    return {k: statistics.median(v) for k, v in side.items() if v}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtests.peer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--guidellm", default="/tmp/guidellm-venv/bin/guidellm")
    ap.add_argument("--url", help="a running server (default: a fresh null server)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests-per-user", type=int, default=25)
    ap.add_argument("--rate", type=float, help="open loop: requests/s offered as a Poisson process, --concurrency "
                                               "the cap on requests in flight")
    ap.add_argument("--duration-s", type=float, default=30.0, help="open loop: how long each tool offers load")
    ap.add_argument("--prompt-set", default="loadtests/prompts/study5.jsonl")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ttft-ms", type=float, default=80)
    ap.add_argument("--itl-ms", type=float, default=20)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    exit_on_sigterm()
    out = a.out or Path(tempfile.mkdtemp(prefix="ddbench-peer-"))
    out.mkdir(parents=True, exist_ok=True)
    prompts = [p.messages[-1].content for p in load_prompt_set(resolve_sources(a.prompt_set))]
    log = out / "null-server.jsonl"
    server = (nullcontext(a.url) if a.url else
              nullserver.running(log=log, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.max_tokens))
    with server as url:
        us = ours(url, a.prompt_set, a.concurrency, a.requests_per_user, a.max_tokens, out, a.rate, a.duration_s)
        them = theirs(a.guidellm, url, prompts, a.concurrency, a.concurrency * a.requests_per_user,
                      a.max_tokens, out, a.rate, a.duration_s)
    rows = {"ours": us, "guidellm": them, "url": url, "concurrency": a.concurrency, "rate": a.rate}
    if log.is_file():
        # the server's own view of each tool's requests: only ours carry an X-Request-Id
        for who, side in server_ttft(log).items():
            rows[who]["server_ttft_ms"] = side
            print(f"server-side median TTFT of {who}'s requests: {side:.2f} ms")
    for side in (us, them):
        if "achieved_rate" in side:
            side["served"] = side["achieved_rate"] / side["arrival_rate"]
    for k, label in (("ttft_ms", "median TTFT (ms)"), ("tpot_ms", "median TPOT (ms)"),
                     ("arrival_rate", "arrival rate (req/s)"), ("achieved_rate", "achieved rate (req/s)"),
                     ("served", "served (achieved/arr.)")):
        if k not in us:
            continue
        diff = (us[k] - them[k]) / them[k]
        rows[f"{k}_diff"] = diff
        print(f"{label:22} ours {us[k]:8.2f}   guidellm {them[k]:8.2f}   "
              f"diff {diff:+.1%}  {'agree' if abs(diff) <= AGREE else 'DIFFER'}")
    (out / "peer.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"results: {out / 'peer.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
