"""What a profile's server flags cost an arm, against the server's own defaults: both servers up on the profile's
device (one at a time, each sized to its share), then one request at a time in turns at C=1, the order rotated
each round, at each reply length. Prints tokens/s, TPOT and TTFT per server and length; writes flag_cost.json.

    python -m ddbench.flag_cost h100-twin8b-sglang --arm ar --tokens 512 128 --rounds 9 --out DIR \
        --set placement.cpus=4-15

The defaults server keeps only what the build needs to run (NEEDED): the model, the address, the memory share, the
dtype and the profile's attention, sampling and grammar backends, where the offline bundles lack the defaults'.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import httpx

from containers import gpu_memory, local_runtime
from containers.bringup import free_port
from containers.launch import server_command
from containers.ready import wait_ready
from ddbench.core import cpus as cpus_mod
from ddbench.core import formulas
from ddbench.core.profile import load_profile
from ddbench.core.prompts import load_prompts
from ddbench.core.results import write_json_atomic
from loadtests.client import chat_body, stream
from loadtests.rounds import rotation

# flags a server of the offline bundles cannot start without, or that only place it: name -> values they take
NEEDED = {"--model-path": 1, "--tokenizer-path": 1, "--host": 1, "--port": 1, "--mem-fraction-static": 1,
          "--dtype": 1, "--device": 1, "--attention-backend": 1, "--sampling-backend": 1, "--grammar-backend": 1}
FLAGS, DEFAULTS = "flags", "defaults"


def defaults_argv(argv: list[str]) -> list[str]:
    """The launch `python -m MODULE ...` less every flag not in NEEDED (a flag's values go with it)."""
    out, i = argv[:3], 3
    while i < len(argv):
        flag, j = argv[i], i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        if flag in NEEDED:
            out += argv[i:j]
        i = j
    return out


def measure(url: str, body: dict) -> dict:
    """One streamed request: tokens/s over its whole time, TPOT and TTFT as docs/metrics.md defines them."""
    with httpx.Client(base_url=url) as client:
        r = stream(client, body, "flag-cost")
    if r["error"] or not r["chunks"] or not r["usage"]:
        raise RuntimeError(f"{url}: request failed: {r['error'] or 'no chunks or usage in the stream'}")
    return figures(r, r["usage"]["completion_tokens"])


def figures(r: dict, n: int) -> dict:
    """A stream's figures (send_ns, end_ns, chunks, as the client records them) of n output tokens."""
    e2e, ttft = formulas.e2e_s(r["send_ns"], r["end_ns"]), formulas.ttft_s(r["send_ns"], r["chunks"][0].t_ns)
    return {"tokens": n, "tok_s": float(formulas.output_rate(n, e2e)),
            "tpot_ms": 1e3 * float(formulas.tpot_s(e2e, ttft, n)), "ttft_ms": 1e3 * float(ttft)}


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for (server, length) in dict.fromkeys((r["server"], r["max_tokens"]) for r in rows):
        g = [r for r in rows if r["server"] == server and r["max_tokens"] == length]
        out.append({"server": server, "max_tokens": length, "requests": len(g),
                    "tok_s": statistics.fmean(r["tok_s"] for r in g),
                    "tpot_ms": statistics.fmean(r["tpot_ms"] for r in g),
                    "ttft_ms": statistics.median(r["ttft_ms"] for r in g)})
    return out


def run(profile_name: str, arm_id: str, lengths: list[int], rounds: int, out: Path,
        overrides: list[str] | None = None) -> list[dict]:
    profile = load_profile(profile_name, overrides or [])
    arm, prompts = profile.arm(arm_id), load_prompts(profile.workload.prompt_set)
    if arm.kind != "ar":   # the defaults server would drop the drafter's flags and serve AR
        raise ValueError(f"{profile_name}: arm {arm_id} is {arm.kind}; flag_cost compares an AR arm's flags")
    cpus = cpus_mod.usable(profile.placement.cpus, "placement.cpus") if profile.placement.cpus else None
    servers, urls, argvs = [], {}, {}
    try:
        for name in (FLAGS, DEFAULTS):
            sized, _ = gpu_memory.fitted_now(profile)
            port = free_port()
            launch = server_command(sized, arm, port=port, python=sys.executable)
            argv = launch.argv if name == FLAGS else defaults_argv(launch.argv)
            url = f"http://127.0.0.1:{port}"
            s = local_runtime.start(argv, env=launch.env, url=url, log_path=out / f"{name}.log", cpus=cpus)
            servers.append(s)
            wait_ready(url, exited=s.exited, logs=s.logs, timeout_s=900, what=f"the {name} server")
            urls[name], argvs[name] = url, argv
        rows = []
        for length in lengths:
            for j in range(-1, rounds):   # round -1 warms each server up, unmeasured
                prompt = prompts[(j + 1) % len(prompts)]
                body = chat_body(prompt, model=profile.models.target, max_tokens=length, temperature=0)
                for name in rotation([FLAGS, DEFAULTS], j):
                    r = measure(urls[name], body)
                    if j >= 0:
                        rows.append({"server": name, "max_tokens": length, "round": j, "prompt": prompt.id, **r})
    finally:
        for s in servers:
            s.stop()
    means = summary(rows)
    write_json_atomic(out / "flag_cost.json", {"profile": profile_name, "arm": arm_id, "argv": argvs,
                                               "summary": means, "requests": rows})
    return means


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddbench.flag_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--arm", default="ar")
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 128], help="reply lengths (max_tokens, EOS ignored)")
    ap.add_argument("--rounds", type=int, default=9, help="measured requests per server and length")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                    help="a profile override, as ddbench reproduce takes it")
    a = ap.parse_args(argv)
    for s in run(a.profile, a.arm, a.tokens, a.rounds, a.out, a.overrides):
        print(f"{s['max_tokens']:5d} {s['server']:8s} {s['tok_s']:8.2f} tok/s  TPOT {s['tpot_ms']:.3f} ms  "
              f"TTFT {s['ttft_ms']:.1f} ms  ({s['requests']} requests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
