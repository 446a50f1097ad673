"""`ddbench bench --arm ID=URL [--arm ID=URL ...]`: servers you run, measured in one line.

    just bench --arm ar=http://h:30000 --arm linear-b16=http://h:30001 [--concurrency 1,8,32 | --rate 2,4,8]
               [--api completions] [--slo ttft_ms=200,tpot_ms=30] [-o mine.yaml]

Peers' bench tools take a URL and flags; this is the same door into ddbench. It writes the external profile
it runs (-o, default bench.yaml where you typed the command), so that `just reproduce mine.yaml` repeats it,
then runs it as reproduce does (exit status included). Each arm's kind and shape come from its id (ar,
linear-b16, chain-b15, tree-b15-k8; a suffix such as ar-vllm is free), and the run's "server matches its
arm" check holds each against what its server reports of itself.
"""

from __future__ import annotations

import argparse
import re
import sys

import yaml

from ddbench import reproduce
from ddbench.core.profile import ProfileError, Slo, caller_path, load_profile, name_from

ARM_ID = re.compile(r"^(?:(?P<ar>ar)|linear-b(?P<lb>\d+)|chain-b(?P<cb>\d+)|tree-b(?P<tb>\d+)-k(?P<tk>\d+))"
                    r"(?:-[a-z0-9._-]+)?$")


class BenchError(ValueError):
    pass


def arm(spec: str, block: int, api_key_env: str | None, model: str | None) -> dict:
    """'tree-b15-k8=http://h:30002' -> the profile's arm: its kind and shape from the id."""
    arm_id, sep, url = spec.partition("=")
    m = ARM_ID.match(arm_id)
    if not sep or not url.startswith(("http://", "https://")) or m is None:
        raise BenchError(f"--arm {spec}: give ID=URL, the id one of ar, linear-b<N>, chain-b<N>, tree-b<B>-k<K> "
                         "(a suffix such as -vllm allowed), the url http(s)://host:port")
    out: dict = {"id": arm_id, "url": url}
    if m["ar"]:
        out["kind"] = "ar"
    elif m["lb"]:
        out.update(kind="linear", block_size=int(m["lb"]))
    elif m["cb"]:
        out.update(kind="chain", block_size=int(m["cb"]) + 1)
    else:
        out.update(kind="tree", block_size=block, budget=int(m["tb"]), topk=int(m["tk"]))
    return out | ({"api_key_env": api_key_env} if api_key_env else {}) | ({"model": model} if model else {})


def key_values(text: str, flag: str) -> dict[str, float]:
    try:
        return {k.strip(): float(v) for k, v in (kv.split("=", 1) for kv in text.split(",") if kv.strip())}
    except ValueError:
        raise BenchError(f"{flag} {text}: give key=value pairs, comma-separated (ttft_ms=200,tpot_ms=30)") from None


def numbers(text: str, flag: str, kind: type, example: str) -> list:
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"{flag} {text}: give {example}") from None


def load(a: argparse.Namespace) -> dict:
    """Closed loop at each --concurrency level, or with --rate an open-loop sweep: requests arrive at each rate
    (Poisson) for --duration seconds a cell, at most --concurrency's largest level in flight (default 64)."""
    concurrency = numbers(a.concurrency or ("64" if a.rate else "1,8"), "--concurrency", int, "levels such as 1,8,32")
    if not a.rate:
        return {"concurrency": concurrency, "warmup_requests": 1, "requests_per_user": a.requests,
                "repetitions": a.repetitions}
    return {"mode": "open", "rate": numbers(a.rate, "--rate", float, "requests/s such as 2,4,8"),
            "arrival": "poisson", "concurrency": [max(concurrency)], "warmup_requests": 0, "duration_s": a.duration,
            "repetitions": a.repetitions}


def profile(a: argparse.Namespace, name: str) -> dict:
    out = {"name": name, "description": "servers measured as found, written by ddbench bench",
           "backend": {"kind": "external"},
           "arms": [arm(s, a.block, a.api_key_env, a.model) for s in a.arm],
           "workload": {"prompt_set": a.prompts, "api": a.api, "max_tokens": a.max_tokens, "temperature": 0,
                        "ignore_eos": True},
           "load": load(a)}
    if a.slo:
        out["slo"] = Slo(**key_values(a.slo, "--slo")).model_dump(exclude_none=True)
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="ddbench bench", description=__doc__.split("\n")[0],
                                 epilog=reproduce.EXIT_CODES)
    ap.add_argument("--arm", action="append", required=True, metavar="ID=URL",
                    help="an arm and its server, e.g. ar=http://h:30000 or tree-b15-k8=http://h:30002; repeat it")
    ap.add_argument("--concurrency", help="levels, comma-separated (default 1,8); with --rate, the most requests "
                                          "in flight (default 64)")
    ap.add_argument("--rate", help="offered rates in requests/s, comma-separated: an open-loop sweep instead")
    ap.add_argument("--duration", type=float, default=30.0, help="with --rate: seconds a cell (default 30)")
    ap.add_argument("--requests", type=int, default=10, help="measured requests per user and cell (default 10)")
    ap.add_argument("--repetitions", type=int, default=3, help="cells per arm and level, interleaved (default 3)")
    ap.add_argument("--max-tokens", type=int, default=256, help="tokens each request generates (default 256)")
    ap.add_argument("--prompts", default="loadtests/prompts/chat.jsonl", help="prompt set (a JSONL path, pypi:...)")
    ap.add_argument("--api", choices=("chat", "completions"), default="chat",
                    help="the endpoint: /v1/chat/completions (default) or /v1/completions")
    ap.add_argument("--slo", help="objectives for goodput, e.g. ttft_ms=200,tpot_ms=30")
    ap.add_argument("--block", type=int, default=16, help="the drafter's block size, for tree arms (default 16)")
    ap.add_argument("--api-key-env", help="the NAME of the variable holding every server's API key")
    ap.add_argument("--model", help="the served model name (default: the first /v1/models lists)")
    ap.add_argument("-o", "--output", default="bench.yaml", help="the profile to write (default bench.yaml)")
    ap.add_argument("--force", action="store_true", help="overwrite the profile if it exists")
    ap.add_argument("--no-report", action="store_true", help="tables only, on a machine without TeX")
    ap.add_argument("--results-root", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    out = caller_path(a.output)
    name = name_from(out.stem, "bench")
    try:
        if out.exists() and not a.force:
            raise BenchError(f"{out}: exists already (--force overwrites it; `just reproduce {a.output}` reruns it)")
        text = yaml.safe_dump(profile(a, name), sort_keys=False)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"# Written by: ddbench bench {' '.join(argv or sys.argv[1:])}\n{text}")
        load_profile(str(out))   # what reproduce will read, validated before anything runs
    except (BenchError, ProfileError, ValueError) as e:
        print(f"ddbench bench: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out}; running it (`just reproduce {out}` repeats it)", file=sys.stderr)
    return reproduce.main([str(out), *(["--no-report"] if a.no_report else []),
                           *(["--results-root", a.results_root] if a.results_root else [])])


if __name__ == "__main__":
    sys.exit(main())
