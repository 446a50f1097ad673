"""A synthetic run written by hand, file by file, in ddbench.core.results' layout.

Tests and benchmarks need results directories long before real servers produce them, and
they need to know the truth behind the numbers. This module simulates closed-loop users
against a server whose per-arm step time and acceptance are set here, then writes what the
load generator and the servers would write: request records, server.log with SGLang's
`Decode batch` lines and our `DDTree window` lines, /metrics scrapes, telemetry and statuses.

    python -m analysis.synth OUT_DIR [--requests 40] [--concurrency 1 4] [--reps 2]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ddbench.core import schedule
from ddbench.core.manifest import planned_schedule
from ddbench.core.profile import Profile
from ddbench.core.records import CellStatus
from ddbench.core.results import cell_name, write_json_atomic, write_text_atomic

DEFAULT_ARMS = [
    {"id": "ar", "kind": "ar"},
    {"id": "linear-b16", "kind": "linear", "block_size": 16},
    {"id": "chain-b16", "kind": "chain", "block_size": 16},
    {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8},
]
CATEGORIES = {"code": 0.80, "math": 0.75, "chat": 0.55}
WORDS = ("the", "tree", "drafts", "tokens", "and", "verifies", "them", "in", "one", "step", "while",
         "chain", "accepts", "fewer", "per", "forward", "so", "speed", "depends", "on", "both")
MODEL = "tiny-target"
SGLANG = {"kind": "sglang", "runtime": "docker", "image": "lmsysorg/sglang:v0.5.23", "version": "0.5.23"}
REFENGINE = {"kind": "refengine", "runtime": "local"}
DDTREE_LOG = ("DDTree window, steps: {steps}, avg tree nodes: {nodes:.2f}, "
              "avg accepted depth: {depth:.2f}, avg commit length: {commit:.2f}")


@dataclass
class Plan:
    """What to simulate; the truth a test can check the analysis against."""

    arms: list[dict] = field(default_factory=lambda: [dict(a) for a in DEFAULT_ARMS])
    concurrency: list[int] = field(default_factory=lambda: [1, 4])
    repetitions: int = 2
    requests_per_user: int = 40
    warmup_requests: int = 2
    max_tokens: int = 64
    temperature: float = 0.0
    # several sampling settings (profile workload.sampling), e.g. [{"temperature": 0}, {"temperature": 0.7}]:
    # every arm is then simulated under each; a draft is accepted less often the hotter the setting
    sampling: list[dict] | None = None
    prompts: int = 12
    seed: int = 0
    step_ms: float = 20.0           # one AR decode step at C=1
    prefill_ms: float = 60.0
    failed_cell: tuple[str, int, int] | None = ("tree-b15-k8", 4, 2)
    commit_violation: str | None = None   # an arm whose server breaks commit = depth + 1
    lossy_arm: str | None = None          # an arm whose outputs diverge from ar
    prompt_ids: list[str] | None = None   # to plant hostile ids
    profile_name: str = "synth-tiny"
    dtype: str = "bfloat16"
    gpus: int = 1
    backend: dict = field(default_factory=lambda: dict(SGLANG))   # e.g. REFENGINE for the other side
    compare_with: str | None = None       # profile field: the run to cross-check against
    acceptance_shift: float = 0.0         # added to every category's draft acceptance (a τ gap)
    schedule: str = "interleaved"         # the cell order (ddbench.core.schedule), written into the profile
    drift_per_min: float = 0.0            # the host slows down: every step costs (1 + this)^minutes more
    # one arm slows down partway (a server degrading): from repetition slow_from on (default: the second half of
    # the repetitions), every step of slow_arm's cells takes 1 / (1 - slow_by) as long, its decode rate slow_by lower
    slow_arm: str | None = None
    slow_by: float = 0.10
    slow_from: int | None = None


def write_run(root: Path, plan: Plan | None = None, run_id: str = "20261129T080000Z-synth0") -> Path:
    plan = plan or Plan()
    run = Path(root) / plan.profile_name / run_id
    run.mkdir(parents=True, exist_ok=False)
    rng = np.random.default_rng(plan.seed)
    profile = _profile(plan)
    prompts = _prompts(plan)
    clock = _Clock()
    arms = {a.id: {**a.model_dump(), "temperature": profile.sampling_for(a.id).temperature}
            for a in profile.measured_arms()}
    server = {a.id: a.server for a in profile.measured_arms()}
    logs = {a.id: [] for a in profile.arms}
    counters = {a.id: {"gen": 0, "prompt": 0, "verify": 0, "requests": 0} for a in profile.arms}
    top1: dict = {}     # each request's linear depths, which its chain takes too
    for block in schedule.blocks(profile):
        for a in block.arms:
            logs[a] += [f"[{_ts(clock.unix(clock.ns))}] server_args=ServerArgs(model_path='models/tiny-target', ...)",
                        f"[{_ts(clock.unix(clock.ns) + 3)}] The server is fired up and ready to roll!"]
            clock.ns += 5_000_000_000
        for a, c, r in block.cells:
            s = server[a]
            logs[s].append(f"[{_ts(clock.unix(clock.ns))}] Cache flushed successfully!")
            clock.ns += 200_000_000
            _write_cell(run / a / cell_name(c, r), plan, arms[a], c, r, prompts, rng, clock, counters[s], logs[s],
                        top1)
            clock.ns += 2_000_000_000
    for a in logs:
        write_text_atomic(run / a / "server.log", "\n".join(logs[a]) + "\n")
        write_json_atomic(run / a / "status.json", {"arm": a, "status": "ok", "reason": None})
    _write_manifest(run, plan, profile, clock)
    return run


def _profile(plan: Plan) -> Profile:
    spec = any(a["kind"] != "ar" for a in plan.arms)
    extra = {"compare_with": plan.compare_with} if plan.compare_with else {}
    return Profile.model_validate({
        **extra,
        "name": plan.profile_name,
        "description": "synthetic run for tests: every number is simulated",
        "backend": plan.backend,
        "models": {"target": "models/tiny-target", "drafter": "models/tiny-drafter" if spec else None},
        "placement": {"device": "cuda", "gpus": list(range(plan.gpus)), "tp_size": plan.gpus},
        "runtime": {"dtype": plan.dtype, "overlap_scheduler": False, "max_running_requests": max(plan.concurrency)},
        "arms": plan.arms,
        "workload": {"prompt_set": "loadtests/prompts/synth.jsonl", "max_tokens": plan.max_tokens,
                     **({"sampling": plan.sampling} if plan.sampling else {"temperature": plan.temperature})},
        "load": {"concurrency": plan.concurrency, "requests_per_user": plan.requests_per_user,
                 "warmup_requests": plan.warmup_requests, "repetitions": plan.repetitions, "seed": plan.seed,
                 "schedule": plan.schedule},
    })


def _prompts(plan: Plan) -> list[tuple[str, str, list[str]]]:
    """(id, category, the target's greedy output as words): identical for every lossless arm."""
    cats = list(CATEGORIES)
    ids = plan.prompt_ids or [f"{cats[i % len(cats)]}-{i:03d}" for i in range(plan.prompts)]
    out = []
    for i, pid in enumerate(ids):
        words = [WORDS[(i * 7 + j * j + j) % len(WORDS)] for j in range(plan.max_tokens)]
        out.append((pid, cats[i % len(cats)], words))
    return out


class _Clock:
    """perf_counter_ns and wall clock of the simulated host, moving forward cell by cell."""

    def __init__(self):
        self.ns = 5_000_000_000_000
        self.unix0 = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC).timestamp()
        self.ns0 = self.ns
        self.start_unix = self.unix0

    def unix(self, ns: int) -> float:
        return self.unix0 + (ns - self.ns0) / 1e9


def _acceptance(arm: dict, category: str, shift: float = 0.0) -> float:
    """Chance a drafted token is accepted: a tree of more nodes accepts more."""
    p = CATEGORIES[category] + shift
    if arm["kind"] == "tree":
        return min(0.93, p + 0.04 * math.log2(arm["topk"]))
    return p


def _step_ms(plan: Plan, arm: dict, c: int) -> float:
    """Cost of one verify step: drafting, more nodes to verify, a bigger batch."""
    nodes = {"ar": 0, "linear": (arm.get("block_size") or 1) - 1, "chain": (arm.get("block_size") or 1) - 1,
             "tree": arm.get("budget") or 0}[arm["kind"]]
    draft = 0.0 if arm["kind"] == "ar" else 0.35
    return plan.step_ms * (1 + draft + 0.02 * nodes) * (1 + 0.08 * (c - 1))


def _sample_depth(rng, p: float, cap: int, n: int) -> np.ndarray:
    """Accepted depth per step: geometric in the acceptance, capped by the draft depth."""
    return np.minimum(rng.geometric(1 - p, size=n) - 1, cap)


def _write_cell(cdir: Path, plan: Plan, arm: dict, c: int, r: int, prompts, rng, clock: _Clock,
                counters: dict, log: list[str], top1: dict) -> None:
    kind, t0 = arm["kind"], clock.ns
    failed = plan.failed_cell == (arm["id"], c, r)
    depth_cap = (arm.get("block_size") or 1) - 1
    step_ns = _step_ms(plan, arm, c) * 1e6 * (1 + plan.drift_per_min) ** ((t0 - clock.ns0) / 60e9)
    if arm["id"] == plan.slow_arm and r >= (plan.slow_from or plan.repetitions // 2 + 1):
        step_ns /= 1 - plan.slow_by
    nodes = depth_cap if kind in ("linear", "chain") else (arm.get("budget") or 0)
    before = _prom(counters, kind)
    records, steps = [], []      # steps: (t_ns, commit, depth)
    warm_end, n_per_user = t0, plan.warmup_requests + plan.requests_per_user
    if failed:
        n_per_user = plan.warmup_requests + max(1, plan.requests_per_user // 8)
    for user in range(c):
        t = t0 + user * 1_000_000
        for k in range(n_per_user):
            pid, cat, words = prompts[(user * 31 + k * 7 + r) % len(prompts)]
            warm = k < plan.warmup_requests
            rec, rsteps, t_end = _request(plan, arm, c, r, user, k, pid, cat, words, t, step_ns, depth_cap,
                                          nodes, rng, warm, top1)
            rec["send_unix_ns"] = int(clock.unix(t) * 1e9)
            if failed and not warm and k == n_per_user - 1:
                rec.update(status=None, error="connection reset by peer: the server exited (code -9)",
                           end_ns=t + 5_000_000, chunks=rec["chunks"][:2], usage=None, spec=None,
                           finish_reason=None)
                t_end, rsteps = t + 5_000_000, []
            records.append(rec)
            steps.extend(rsteps)
            if warm:
                warm_end = max(warm_end, t_end)
            t = t_end + int(rng.integers(100_000, 500_000))
    measured = [x for x in records if not x["warmup"]]
    w_end = max(x["end_ns"] for x in measured)
    cdir.mkdir(parents=True)
    lines = [json.dumps(x, separators=(",", ":")) for x in records]
    half = len(lines) // 2    # two Locust processes, one file each
    write_text_atomic(cdir / "requests-host-101.jsonl", "\n".join(lines[:half]) + "\n")
    write_text_atomic(cdir / "requests-host-102.jsonl", "\n".join(lines[half:]) + "\n")
    ok = [x for x in records if x["usage"]]
    counters["gen"] += sum(x["usage"]["completion_tokens"] for x in ok)
    counters["prompt"] += sum(x["usage"]["prompt_tokens"] for x in ok)
    counters["verify"] += sum(x["spec"]["spec_verify_ct"] for x in ok if x["spec"])
    counters["requests"] += len(ok)
    write_text_atomic(cdir / "metrics-before.prom", before)
    write_text_atomic(cdir / "metrics-after.prom", _prom(counters, kind))
    _log_windows(plan, arm, c, steps, clock, log)
    _write_telemetry(cdir / "telemetry.jsonl", plan, t0, w_end, clock, rng)
    errors = sum(1 for x in measured if x["error"])
    status = CellStatus(
        arm=arm["id"], concurrency=c, repetition=r, status="failed" if failed else "ok",
        reason="server exited with code -9 (out of memory) during the cell" if failed else None,
        started_unix=clock.unix(t0), ended_unix=clock.unix(w_end),
        window_start_ns=warm_end, window_end_ns=w_end, requests=len(measured), errors=errors,
        client_cpu_max=float(round(35 + 4 * c + rng.uniform(0, 5), 1)))
    write_json_atomic(cdir / "status.json", status.model_dump(mode="json"))
    clock.ns = w_end


def _request(plan, arm, c, r, user, k, pid, cat, words, t, step_ns, depth_cap, nodes, rng, warm, top1):
    kind, n_max = arm["kind"], plan.max_tokens
    send = t
    ttft = int(plan.prefill_ms * 1e6 * (1 + 0.05 * (c - 1)) * rng.lognormal(0, 0.1))
    out_words = list(words)
    if plan.lossy_arm == arm["id"] and k % 3 == 0:
        out_words[n_max // 2:] = ["diverged"] * (n_max - n_max // 2)
    chunks = [{"t_ns": send + ttft, "text": out_words[0], "tokens": 1}]
    tnow, done, steps = send + ttft, 1, []
    p = _acceptance(arm, cat, plan.acceptance_shift - 0.1 * arm["temperature"])
    depths = (np.zeros(n_max, dtype=int) if kind == "ar" else _sample_depth(rng, p, depth_cap, n_max))
    if kind in ("linear", "chain"):
        # a chain verifies what linear verifies (the drafter's top-1 path): the same request takes the
        # same steps in both, whichever of the two ran first
        depths = top1.setdefault((pid, r, user, k, warm, depth_cap, p, arm["temperature"]), depths)
    gaps = rng.lognormal(0, 0.08, size=n_max) * step_ns
    hist_depth = [0] * (depth_cap + 1)
    hist_commit = [0] * (depth_cap + 2)
    i = 0
    while done < n_max:
        d = int(depths[i])
        commit = min(d + 1, n_max - done)
        tnow += int(gaps[i])
        chunks.append({"t_ns": tnow, "text": " " + " ".join(out_words[done:done + commit]), "tokens": commit})
        steps.append((tnow, commit, commit - 1))
        hist_depth[commit - 1] += 1
        hist_commit[commit] += 1
        done += commit
        i += 1
    end = tnow + 300_000
    spec = None
    if kind != "ar":
        accepted = sum(j * n for j, n in enumerate(hist_depth))
        spec = {"spec_verify_ct": i, "spec_accept_length": n_max / i,
                "spec_accept_rate": accepted / (i * depth_cap), "spec_num_correct_drafts": accepted,
                "spec_num_proposed_drafts": i * depth_cap, "spec_correct_drafts_histogram": hist_depth}
        if kind in ("chain", "tree"):
            commit_hist = hist_commit
            if plan.commit_violation == arm["id"] and k % 4 == 0:
                commit_hist = [0] + hist_commit[:-1]   # a server that counts the bonus token twice
            spec.update(spec_accepted_depth_histogram=hist_depth, spec_commit_length_histogram=commit_hist,
                        spec_avg_tree_nodes=float(nodes))
    rec = {"v": 1, "request_id": f"{arm['id']}-c{c}-r{r}-u{user}-{k}", "arm": arm["id"], "concurrency": c,
           "repetition": r, "warmup": warm, "prompt_id": pid, "category": cat,
           "worker": f"host:{101 + user % 2}", "user": user, "max_tokens": n_max,
           "temperature": arm["temperature"], "intended_send_ns": None, "send_ns": send,
           "send_unix_ns": 0, "headers_ns": send + 2_000_000, "chunks": chunks, "end_ns": end,
           "status": 200, "error": None, "finish_reason": "length",
           "usage": {"prompt_tokens": 40 + len(pid), "completion_tokens": n_max}, "spec": spec}
    return rec, steps, end


def _log_windows(plan: Plan, arm: dict, c: int, steps, clock: _Clock, log: list[str]) -> None:
    """SGLang logs every decode_log_interval batches; here: every 40 steps of the cell's users."""
    if not steps:
        return
    steps.sort()
    kind, every = arm["kind"], 40 * c
    b = (arm.get("block_size") or 1) - 1
    for i in range(0, len(steps), every):
        win = steps[i:i + every]
        t_ns = win[-1][0]
        span = max(win[-1][0] - win[0][0], 1) / 1e9
        tokens = sum(s[1] for s in win)
        head = (f"[{_ts(clock.unix(t_ns))}] Decode batch, #running-req: {c}, #token: {c * 100 + i % 997}, "
                f"token usage: {0.01 * c:.2f}, ")
        spec = ""
        if kind != "ar":
            spec = f"accept len: {tokens / len(win):.2f}, accept rate: {(tokens - len(win)) / (len(win) * b):.2f}, "
        log.append(head + spec + f"cuda graph: True, gen throughput (token/s): {tokens / span:.2f}, #queue-req: 0")
        if kind in ("chain", "tree"):
            depth = sum(s[2] for s in win) / len(win)
            commit = tokens / len(win) + (0.5 if plan.commit_violation == arm["id"] else 0.0)
            nodes = b if kind == "chain" else arm["budget"]
            log.append(f"[{_ts(clock.unix(t_ns))}] " + DDTREE_LOG.format(
                steps=len(win), nodes=nodes, depth=depth, commit=commit))


def _prom(counters: dict, kind: str) -> str:
    lab = f'{{model_name="{MODEL}"}}'
    out = ["# HELP sglang:generation_tokens_total Number of generation tokens processed.",
           "# TYPE sglang:generation_tokens_total counter",
           f"sglang:generation_tokens_total{lab} {float(counters['gen'])}",
           "# TYPE sglang:prompt_tokens_total counter",
           f"sglang:prompt_tokens_total{lab} {float(counters['prompt'])}",
           "# TYPE sglang:num_requests_total counter",
           f"sglang:num_requests_total{lab} {float(counters['requests'])}"]
    if kind != "ar":
        out += ["# TYPE sglang:spec_verify_calls_total counter",
                f"sglang:spec_verify_calls_total{lab} {float(counters['verify'])}",
                "# TYPE sglang:spec_accept_length gauge",
                f"sglang:spec_accept_length{lab} {counters['gen'] / max(counters['verify'], 1):.4f}"]
    return "\n".join(out) + "\n"


def _write_telemetry(path: Path, plan: Plan, t0: int, t1: int, clock: _Clock, rng) -> None:
    """containers/telemetry.py's format: a source line, then one sample per second."""
    lines, t = [json.dumps({"kind": "source", "gpu": "nvml", "t_unix": clock.unix(t0)})], t0
    while t <= t1:
        gpus = [{"index": g, "sm_clock_mhz": int(1980 - rng.integers(0, 15)), "mem_clock_mhz": 3201,
                 "temperature_c": int(55 + rng.integers(0, 4)), "power_w": round(420 + rng.uniform(0, 40), 1),
                 "utilization_gpu_pct": int(rng.integers(85, 100)), "utilization_mem_pct": 60,
                 "memory_used_bytes": 120 * 2**30, "throttle_mask": 0, "throttle": []} for g in range(plan.gpus)]
        lines.append(json.dumps({"kind": "sample", "t_unix": clock.unix(t), "t_ns": t,
                                 "host": {"cpu_pct": round(rng.uniform(20, 40), 1), "mem_used_bytes": 2**34,
                                          "load1": 1.5}, "gpus": gpus}))
        t += 1_000_000_000
    write_text_atomic(path, "\n".join(lines) + "\n")


def _write_manifest(run: Path, plan: Plan, profile: Profile, clock: _Clock) -> None:
    write_json_atomic(run / "manifest.json", {
        "profile": profile.model_dump(mode="json"), "profile_digest": profile.digest(),
        "git": {"sha": "0" * 40, "dirty": False},
        "host": {"cpu": "Synthetic CPU @ 2.0GHz", "cores": 16, "memory_bytes": 128 * 2**30,
                 "os": "Linux 6.8 (synthetic)", "gpus": [{"name": "NVIDIA H200", "memory_bytes": 141 * 10**9}]
                 * plan.gpus, "driver": "580.00"},
        "packages": {"ddbench": "0.1.0", "torch": "2.14.1", "locust": "2.47.0",
                     **({"sglang": profile.backend.version} if profile.backend.kind == "sglang" else {})},
        "seeds": {"load": plan.seed},
        "schedule": planned_schedule(profile),
        "started": datetime.fromtimestamp(clock.start_unix, UTC).isoformat(),
        "ended": datetime.fromtimestamp(clock.unix(clock.ns), UTC).isoformat(),
        "images": ({"sglang": f"{profile.backend.image}@sha256:" + "ab" * 32} if profile.backend.image else {}),
        "prompt_set_digest": "cd" * 32,
        "synthetic": True,
    })


def _ts(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m analysis.synth", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--requests", type=int, default=40, help="measured requests per user")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(write_run(a.out, Plan(requests_per_user=a.requests, concurrency=a.concurrency, repetitions=a.reps,
                                seed=a.seed, failed_cell=("tree-b15-k8", max(a.concurrency), a.reps))))


if __name__ == "__main__":
    main()
