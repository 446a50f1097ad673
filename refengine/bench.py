"""`python -m refengine.bench`: output tokens/s of each arm in one run, at concurrency 1.

    python -m refengine.bench                                   # a random pair (tau ~ 1: mechanics only)
    python -m refengine.bench --target models/T --drafter models/D --prompts loadtests/prompts/chat.jsonl
    python -m refengine.bench ... --concurrency 1,8       # aggregate tokens/s under continuous batching

Arms run interleaved prompt by prompt (after one warm-up each), so drift in machine speed
hits every arm alike. Prints, per arm: decode tokens/s (prefill excluded) and its ratio to
AR, end-to-end tokens/s, tau (committed tokens per verify step), and the mean per-step time
in draft, verify and bookkeeping (tree build + walk + KV compaction). `--json` writes it all.

`--concurrency 1,8` instead runs every prompt through refengine.batch with at most C requests
in flight (a new one takes each freed row), and prints aggregate output tokens/s per arm and
C, with its ratio to C=1: what batching buys. Arms and concurrencies alternate, round by round.

`--forward-costs` times the bare forwards a step is made of; `--kernels` says what each spends its
time in (a GPU's CUDA kernels, or the CPU's aten ops, by self time per forward): where a step's
time goes beyond the weights it must read. The pair runs fused as the server runs it (one GEMM for
q/k/v, one for gate/up: refengine.layers.fuse); `--unfused` keeps the separate projections.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from refengine.batch import generate_all
from refengine.ddtree import PARTS
from refengine.drafter import Drafter
from refengine.engine import Engine
from refengine.layers import fuse
from refengine.model import Target
from refengine.output import Output
from refengine.pair import random_pair
from refengine.plan import Plan
from refengine.request import Request
from refengine.sampling import Sampling

DEFAULT_ARMS = "ar,linear-b16,chain-b15,tree-b15-k8"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class ArmResult:
    arm: str
    requests: int
    tokens: int
    steps: int
    prefill_s: float
    decode_s: float
    draft_s: float
    verify_s: float
    bookkeeping_s: float

    @property
    def decode_tps(self) -> float:
        return self.tokens / self.decode_s

    @property
    def e2e_tps(self) -> float:
        return self.tokens / (self.prefill_s + self.decode_s)

    @property
    def tau(self) -> float:
        return self.tokens / self.steps

    def per_step_ms(self, seconds: float) -> float:
        return 1e3 * seconds / self.steps

    def add(self, out: Output) -> None:
        self.requests += 1
        self.tokens += sum(s.committed for s in out.steps)  # tokens made by decode steps
        self.steps += len(out.steps)
        self.prefill_s += out.prefill_s
        self.decode_s += out.decode_s
        for s in out.steps:
            self.draft_s += s.draft_s
            self.verify_s += s.verify_s
            self.bookkeeping_s += s.bookkeeping_s


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m refengine.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", type=Path, help="target checkpoint dir (default: a random pair)")
    p.add_argument("--drafter", type=Path, help="drafter checkpoint dir (with --target)")
    p.add_argument("--tokenizer", type=Path, help="default: the target dir, when it has tokenizer.json")
    p.add_argument("--prompts", type=Path, default=Path("loadtests/prompts/chat.jsonl"),
                   help="prompt set (JSONL: id, category, messages); used when a tokenizer is present")
    p.add_argument("--arms", default=DEFAULT_ARMS, help=f"comma-separated arm ids (default {DEFAULT_ARMS})")
    p.add_argument("--n-prompts", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--ignore-eos", action="store_true", help="run every request to max_tokens")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: float32 on CPU, else bfloat16")
    p.add_argument("--graphs", action="store_true", help="CUDA graphs for the fixed-shape forwards")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--seed", type=int, default=0, help="random pair / random prompts")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--concurrency", help="comma-separated C values: aggregate tokens/s under batching")
    p.add_argument("--rounds", type=int, default=2, help="with --concurrency: passes over the prompts")
    p.add_argument("--forward-costs", action="store_true", help="also time the bare forwards a step is made of")
    p.add_argument("--kernels", action="store_true",
                   help="also what each bare forward spends its time in: CUDA kernels by device time on a GPU, "
                        "aten ops by host time on the CPU (torch.profiler)")
    p.add_argument("--unfused", action="store_true",
                   help="keep q/k/v and gate/up as separate GEMMs (the server fuses them: refengine.layers.fuse)")
    p.add_argument("--profile", action="store_true",
                   help="also split the tree arms' bookkeeping into its parts (host time per step, torch.profiler)")
    return p.parse_args(argv)


def load(args) -> tuple[Target, Drafter, list[list[int]], list[int], str]:
    dtype = DTYPES[args.dtype] if args.dtype else (torch.float32 if args.device == "cpu" else torch.bfloat16)
    if args.target is None:
        target, drafter = random_pair(seed=args.seed, vocab_size=4096, hidden_size=384, intermediate_size=1024,
                                      num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=2,
                                      head_dim=64, draft_layers=2, std=0.05)
        target, drafter = target.to(args.device, dtype), drafter.to(args.device, dtype)
        gen = torch.Generator().manual_seed(args.seed)
        prompts = [torch.randint(0, 4095, (48,), generator=gen).tolist() for _ in range(args.n_prompts)]
        return target, drafter, prompts, [], f"random pair (seed {args.seed}), random prompts"
    if args.drafter is None:
        sys.exit("--target needs --drafter")
    target = Target.from_pretrained(args.target, dtype, args.device)
    drafter = Drafter.from_pretrained(args.drafter, dtype, args.device)
    tok_dir = args.tokenizer or args.target
    if not (tok_dir / "tokenizer.json").is_file():
        sys.exit(f"{tok_dir}: no tokenizer.json (pass --tokenizer)")
    from ddbench.core.prompts import load_prompts
    from refengine.tokenizer import Tokenizer

    tok = Tokenizer.from_pretrained(tok_dir)
    chosen = load_prompts(args.prompts)[:args.n_prompts]
    prompts = [tok.encode(tok.chat_prompt([m.model_dump() for m in p.messages])) for p in chosen]
    what = f"{args.target} + {args.drafter}, {len(prompts)} prompts of {args.prompts}"
    return target, drafter, prompts, tok.eos_ids, what


def run(engine: Engine, arms: list[str], prompts: list[list[int]], max_tokens: int, stop: list[int]):
    plans = {a: Plan.parse(a) for a in arms}
    results = {a: ArmResult(a, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0) for a in arms}
    outputs: dict[str, list[list[int]]] = {a: [] for a in arms}
    for a in arms:  # warm-up: allocator, kernels, graphs
        engine.generate(prompts[0], plans[a], Sampling(), max_tokens=min(max_tokens, 16), stop_ids=stop)
    for prompt in prompts:
        for a in arms:
            out = engine.generate(prompt, plans[a], Sampling(), max_tokens=max_tokens, stop_ids=stop)
            results[a].add(out)
            outputs[a].append(out.tokens)
    return results, outputs


def forwards(engine: Engine, context: int = 64) -> dict[str, Callable[[], object]]:
    """The bare forwards a step is made of, after `context` cached tokens, each ready to call again."""
    t, d = engine.target, engine.drafter
    dev = engine.device
    ids = torch.zeros(1, context, dtype=torch.long, device=dev)
    b = d.block_size
    tcache, dcache = t.new_cache(1, context + b), d.new_cache(1, context + b)
    t(ids, torch.arange(context, device=dev)[None], cache=tcache)
    tcache.set_length(0, context)
    dcache.set_length(0, context)  # zeros: the cost of attending is the same
    block = d.embed(t, torch.full((1, b), d.mask_token_id, device=dev))
    out = {f"target {n}-token forward": lambda n=n: t(
        ids[:, :n], torch.arange(context, context + n, device=dev)[None], cache=tcache,
        layers=d.target_layer_ids) for n in (1, b)}
    out[f"drafter {b}-token block"] = lambda: d.logits(t, d(
        block, torch.arange(context, context + b, device=dev)[None], cache=dcache)[:, 1:])
    return out


@torch.inference_mode()
def forward_costs(engine: Engine, context: int = 64, reps: int = 20) -> dict[str, float]:
    """Mean ms of the forwards a step is made of, after `context` cached tokens: what bounds the ratios."""

    def clock(fn) -> float:
        fn()
        start = engine.clock()
        for _ in range(reps):
            fn()
        return 1e3 * (engine.clock() - start) / reps

    return {name: clock(fn) for name, fn in forwards(engine, context).items()}


@torch.inference_mode()
def kernel_costs(engine: Engine, context: int = 64, reps: int = 10, top: int = 12) -> dict[str, dict]:
    """What each bare forward spends its time in, by self time per forward: on a GPU its CUDA kernels' device
    time (eager, so every kernel shows; a graph replays the same kernels without the launches), on the CPU
    its aten ops' host time. Per forward: the total, the kernel count and the `top` kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    gpu = engine.device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if gpu else [ProfilerActivity.CPU]
    out = {}
    for name, fn in forwards(engine, context).items():
        fn()
        with profile(activities=activities) as prof:
            for _ in range(reps):
                fn()
            if gpu:
                torch.cuda.synchronize()
        rows = [{"kernel": e.key, "calls": e.count / reps,
                 "us": (e.self_device_time_total if gpu else e.self_cpu_time_total) / reps}
                for e in prof.key_averages() if (e.device_type == DeviceType.CUDA) == gpu]
        rows.sort(key=lambda r: -r["us"])
        out[name] = {"total_us": sum(r["us"] for r in rows), "kernels": sum(r["calls"] for r in rows),
                     "top": rows[:top]}
    return out


@torch.inference_mode()
def profile_parts(engine: Engine, arms: list[str], prompts: list[list[int]], max_tokens: int,
                  stop: list[int]) -> dict[str, dict[str, float]]:
    """Per tree/chain arm, the host time per step (us) of each labelled part of ddtree.step's
    bookkeeping (a part that waits for the GPU, as topk's copy to the host does, counts the wait)."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for a in arms:
        plan = Plan.parse(a)
        if plan.kind not in ("tree", "chain"):
            continue
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            steps = sum(len(engine.generate(p, plan, Sampling(), max_tokens=max_tokens, stop_ids=stop).steps)
                        for p in prompts)
        times = {e.key: e.cpu_time_total for e in prof.key_averages()}
        out[a] = {part: times.get(part, 0.0) / steps for part in PARTS}
    return out


def report(results: dict[str, ArmResult], outputs, header: str) -> list[str]:
    base = results.get("ar")
    lines = [header, f"{'arm':<16}{'tok/s':>9}{'x ar':>7}{'e2e tok/s':>11}{'tau':>7}"
                     f"{'draft ms':>10}{'verify ms':>11}{'bookkeep ms':>13}{'bk/verify':>11}{'same as ar':>12}"]
    for a, r in results.items():
        ratio = r.decode_tps / base.decode_tps if base else float("nan")
        same = sum(o == b for o, b in zip(outputs[a], outputs["ar"], strict=True)) if base else 0
        lines.append(f"{a:<16}{r.decode_tps:>9.1f}{ratio:>7.2f}{r.e2e_tps:>11.1f}{r.tau:>7.2f}"
                     f"{r.per_step_ms(r.draft_s):>10.2f}{r.per_step_ms(r.verify_s):>11.2f}"
                     f"{r.per_step_ms(r.bookkeeping_s):>13.3f}{r.bookkeeping_s / r.verify_s:>11.1%}"
                     f"{f'{same}/{r.requests}':>12}")
    return lines


def run_concurrent(target, drafter, arms: list[str], prompts: list[list[int]], levels: list[int], max_tokens: int,
                   stop: list[int], graphs: bool, rounds: int) -> dict[tuple[str, int], tuple[int, float, int]]:
    """(arm, C) -> (output tokens, seconds, verify steps) over `rounds` passes of all prompts."""
    capacity = max(map(len, prompts)) + max_tokens + 64
    engines = {c: Engine(target, drafter, capacity=capacity, graphs=graphs, batch=c) for c in levels}
    totals = {(a, c): (0, 0.0, 0) for a in arms for c in levels}

    def once(arm: str, c: int, ps: list[list[int]]) -> tuple[int, float, int]:
        reqs = [Request(list(p), Sampling(), max_tokens, frozenset(stop)) for p in ps]
        engine = engines[c]
        t0 = engine.clock()
        with torch.inference_mode():
            generate_all(engine, reqs, Plan.parse(arm))
        return sum(len(r.tokens) for r in reqs), engine.clock() - t0, sum(len(r.steps) for r in reqs)

    for a in arms:  # warm-up: allocator, kernels, graph capture at every bucket a round will use
        for c in levels:
            once(a, c, prompts[:c])
    for _ in range(rounds):
        for a in arms:
            for c in levels:
                tokens, seconds, steps = once(a, c, prompts)
                t, s_, n = totals[(a, c)]
                totals[(a, c)] = (t + tokens, s_ + seconds, n + steps)
    return totals


def report_concurrent(totals, arms: list[str], levels: list[int], header: str) -> list[str]:
    lines = [header, f"{'arm':<16}{'C':>4}{'tok/s':>10}{'x C=' + str(levels[0]):>9}{'x ar':>7}{'tau':>7}"]
    for a in arms:
        for c in levels:
            tokens, seconds, steps = totals[(a, c)]
            base = totals[(a, levels[0])]
            ar = totals.get(("ar", c))
            tps = tokens / seconds
            lines.append(f"{a:<16}{c:>4}{tps:>10.1f}{tps / (base[0] / base[1]):>9.2f}"
                         f"{tps / (ar[0] / ar[1]) if ar else float('nan'):>7.2f}{tokens / steps:>7.2f}")
    return lines


def _costs(engine, args) -> tuple[dict, dict]:
    """What --forward-costs and --kernels ask for, printed: each forward's ms, and the kernels (ops on a CPU)."""
    costs = forward_costs(engine) if args.forward_costs else {}
    for name, ms in costs.items():
        print(f"{name}: {ms:.2f} ms")
    kernels = kernel_costs(engine) if args.kernels else {}
    for name, k in kernels.items():
        print(f"{name}: {k['total_us']:.0f} us of {'kernels' if engine.device.type == 'cuda' else 'ops'} "
              f"in {k['kernels']:.0f} calls")
        for r in k["top"]:
            print(f"  {r['us']:>9.1f} us  {r['calls']:>6.1f} x  {r['kernel'][:90]}")
    return costs, kernels


def main(argv=None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    target, drafter, prompts, eos, what = load(args)
    if not args.unfused:  # as the server runs them
        fuse(target)
        fuse(drafter)
    stop = [] if args.ignore_eos else eos
    width = max([Plan.parse(a).budget or Plan.parse(a).block_size or 1 for a in arms]) + 1
    setting = (f"max_tokens {args.max_tokens}, T=0, {args.device} {target.dtype}, graphs "
               f"{'on' if args.graphs else 'off'}, {'un' if args.unfused else ''}fused, "
               f"{torch.get_num_threads()} threads, "
               f"{platform.processor() or platform.machine()}")
    if args.concurrency:
        levels = [int(c) for c in args.concurrency.split(",")]
        totals = run_concurrent(target, drafter, arms, prompts, levels, args.max_tokens, stop, args.graphs,
                                args.rounds)
        header = f"refengine.bench: {what}; {setting}; {args.rounds} rounds, continuous batching"
        print("\n".join(report_concurrent(totals, arms, levels, header)))
        if args.json:
            rows = [{"arm": a, "concurrency": c, "tokens": t, "seconds": s, "steps": n, "tps": t / s}
                    for (a, c), (t, s, n) in totals.items()]
            args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=2) + "\n")
        return 0
    engine = Engine(target, drafter, capacity=max(map(len, prompts)) + args.max_tokens + width, graphs=args.graphs)
    results, outputs = run(engine, arms, prompts, args.max_tokens, stop)
    header = f"refengine.bench: {what}; C=1, {setting}"
    print("\n".join(report(results, outputs, header)))
    costs, kernels = _costs(engine, args)
    parts = profile_parts(engine, arms, prompts, args.max_tokens, stop) if args.profile else {}
    if parts:
        print("bookkeeping parts, host us per step under torch.profiler: " + "  ".join(PARTS))
        for a, row in parts.items():
            print(f"{a:<16} " + "  ".join(f"{row[p]:>{len(p)}.1f}" for p in PARTS))
    if args.json:
        rows = [{**asdict(r), "decode_tps": r.decode_tps, "e2e_tps": r.e2e_tps, "tau": r.tau} for r in results.values()]
        args.json.write_text(json.dumps({"header": header, "arms": rows, "forward_ms": costs,
                                         "kernels": kernels, "bookkeeping_us": parts}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
