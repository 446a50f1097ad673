"""Labelled diagnostics of an SGLang DDTree build, run on the device beside (never inside) a run's measured arms.

    python -m containers.h200.diagnostics overlay-check RUN_DIR [--profile P] [--arm linear-b16] [--prompts 3]
    python -m containers.h200.diagnostics stage-cost RUN_DIR [--profile P] [--arm tree-b15-k15 ...] [--prompts 8]
    python -m containers.h200.diagnostics steps RUN_DIR [--profile P] --arm chain-b15 [--prune] [--concurrency 4]

Both bring servers up with the project's own bring-up (containers.bringup.up: the profile's
generated command, ports, logs, status.json, stop on exit) and send the run's prompts (the
profile's prompt set, in file order) one at a time, as the load generator's request body
(loadtests.client.chat_body): C = 1, the workload's temperature, max_tokens and ignore_eos.
The profile is RUN_DIR/manifest.json's unless --profile names one (needed when RUN_DIR has no
manifest yet). Everything goes under RUN_DIR/diagnostics/, which no analysis of the measured
cells reads as an arm. The environment must be what `setup.sh harness sglang sglang-ddtree`
exported.

overlay-check: once per DDTree build, the build's DFLASH must take the same verify steps as the stock
SGLang release's DFLASH (the sglang layer's) on the same prompts (on the old pin, the trial of
2026-12-01: 58 and 58 with the upstream rope fix cherry-picked, 170 without it). The arm (default: the
profile's first linear arm with CUDA graphs on) is brought up twice with the same command line, less on
the stock side the flags only the fork knows (--speculative-ddtree-*, which stock SGLang refuses):
"stock", with PYTHONPATH
without the sglang-ddtree site (so `sglang` is the stock layer's), then "fork", with PYTHONPATH as
set up (the fork's `sglang` first). Verify steps are the /metrics counter
sglang:spec_verify_calls_total, scraped before and after each request (so the server's own
warm-up request is not counted; the trial's 58 counted it), and the per-request spec_verify_ct
SGLang returns. Servers are logged under RUN_DIR/diagnostics/overlay-check/<side>/<arm>/.
The result is RUN_DIR/diagnostics/overlay-check.json:

    diagnostic      "overlay-check"
    schema          1
    label           one line saying what this is
    passed          true when both sides served every prompt and their verify-step totals are equal
    same_verify_steps, same_outputs   the two comparisons (outputs: the texts, prompt by prompt)
    steps_from      "metrics" (the /metrics deltas, when both sides have them) or "spec_verify_ct"
    profile         {"name", "digest", "source"} of the profile used
    arm             the linear arm's id;  argv: its command line on the fork
    stock_drops     the fork-only flags (and values) left out of the stock side's command line
    prompts         {"set", "sha256", "ids", "max_tokens", "temperature", "ignore_eos"}
    build           the fork's source as its layer recorded it: repo, branch, commit, cherry_picks
                    [{repo, commit, subject, result}], head, tree, package_tree, label
    sides           {"stock": SIDE, "fork": SIDE}, SIDE =
        pythonpath      the PYTHONPATH entries the server ran with
        sglang          {"site", "layer", "source"}: where `sglang` resolved there (ddbench.core.manifest.sglang_source)
        status          "ok" | "failed";  reason: why, when failed
        ready_s         bring-up time
        verify_steps    sum over prompts of the /metrics delta (null when /metrics had no counter)
        spec_verify_ct  sum over prompts of SGLang's per-request count (null when absent)
        completion_tokens  sum over prompts
        tau             completion_tokens / verify_steps
        requests        per prompt: {"id", "verify_steps", "spec_verify_ct", "completion_tokens",
                        "finish_reason", "error", "text_sha256", "text", "token_ids" (null where the
                        server returns none)}
        server_log      the server log's path, relative to RUN_DIR
    started, ended  ISO times

stage-cost: per arm (default: every tree arm; a linear arm may be named too, this build profiles
DFLASH the same way), one separate labelled cell with the fork's stage profiler on:
`--speculative-ddtree-profile --speculative-ddtree-profile-output PATH` (+ interval and warmup),
PATH = RUN_DIR/diagnostics/stage-cost/<arm>/stages.jsonl (the fork's JSONL: per `interval`
verify rounds, per stage cpu/gpu count, sum, avg, max in ms). Measured cells never carry the flag
(the instrumentation costs time): the arms are brought up again, with the flag appended to their
commands, all at once (bring-up dominates), then serve one at a time. The summary,
RUN_DIR/diagnostics/stage-cost.json: {"diagnostic": "stage-cost",
"schema": 1, "label", "profile", "prompts", "build", "arms": {ARM: {"argv", "status", "reason",
"verify_steps", "completion_tokens", "wall_s" (its prompts' time), "stages_file", "records", "rounds",
"stages": {STAGE: {"cpu_avg_ms", "gpu_avg_ms", "count"}}}}, "ready_all_s", "started", "ended"}.

steps: per arm (chain or tree), one labelled cell with ddbench's per-step statistics on
(`--speculative-ddtree-step-stats`, patch 0004: per verify step and request, nodes, the accepted
depth read from the nodes' positions, the commit length, whether the request finished), and with
`--prune` also the fork's `--is-ddtree-prune` (pruned trees verify narrower than B + 1, the case that
crashed before patch 0002). The prompts go `--concurrency` at a time, so batches of 2 and more are
verified. Every step must commit depth + 1 tokens, except a request's finishing step. The summary,
RUN_DIR/diagnostics/steps[-LABEL].json: {"diagnostic": "steps", "schema", "label", "profile",
"prompts", "build", "prune", "concurrency", "arms": {ARM: {"argv", "status", "reason", "requests_ok",
"steps", "batched_steps" (steps verifying 2+ requests), "widths" (the node counts seen), "narrow_steps"
(steps narrower than the budget), "commit_tokens", "tau", "violations" (first 20: line, request
index, depth, commit), "violation_count", "passed"}}, "passed", "ready_all_s", "started", "ended"}.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import httpx

from containers.bringup import up
from containers.ready import BringUpError
from containers.sweep import up_together
from ddbench.core import prom
from ddbench.core.manifest import bundle_marker, now_iso
from ddbench.core.profile import REPO_ROOT, Arm, Profile, ProfileError, load_profile
from ddbench.core.prompts import Prompt, load_prompt_set, prompt_set_digest
from ddbench.core.results import OVERLAY_CHECK, SERVER_LOG, write_json_atomic

FORK_LAYER = "sglang-ddtree"
SCHEMA = 1
REQUEST_TIMEOUT_S = 600.0


class DiagnosticError(RuntimeError):
    pass


# ---------------------------------------------------------------- inputs


def run_profile(run_dir: Path, name: str | None) -> tuple[Profile, str]:
    if name:
        return load_profile(name), name
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        raise DiagnosticError(f"{manifest} is missing: name the profile with --profile")
    doc = json.loads(manifest.read_text())
    return Profile.model_validate(doc["profile"]), f"{manifest} ({doc.get('profile_source')})"


def first_prompts(profile: Profile, n: int) -> list[Prompt]:
    wl = profile.workload
    return load_prompt_set(wl.prompt_set, wl.categories or None)[:n]


def prompts_record(profile: Profile, prompts: list[Prompt]) -> dict:
    wl = profile.workload
    return {"set": wl.prompt_set, "sha256": prompt_set_digest(wl.prompt_set),
            "ids": [p.id for p in prompts], "max_tokens": wl.max_tokens, "temperature": wl.temperature,
            "ignore_eos": wl.ignore_eos}


def split_pythonpath(pythonpath: str) -> tuple[list[str], list[str]]:
    """(stock, fork) PYTHONPATH entries: stock is the set-up path without the sglang-ddtree site."""
    entries = [e for e in pythonpath.split(os.pathsep) if e]
    fork_sites = [e for e in entries if (bundle_marker(e) or {}).get("layer") == FORK_LAYER]
    if not fork_sites:
        raise DiagnosticError(f"no {FORK_LAYER} site on PYTHONPATH ({pythonpath or 'unset'}): "
                              f"e=$(sh containers/h200/setup.sh harness sglang {FORK_LAYER}) && eval \"$e\"")
    return [e for e in entries if e not in fork_sites], entries


def resolve_sglang(pythonpath: list[str]) -> dict | None:
    """Where `sglang` resolves with this PYTHONPATH (asked of a fresh interpreter, as a server would)."""
    code = "import json; from ddbench.core.manifest import sglang_source; print(json.dumps(sglang_source()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*pythonpath, str(REPO_ROOT)])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


@contextmanager
def pythonpath(entries: list[str]):
    """Servers started inside see this PYTHONPATH (local_runtime passes os.environ on)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(entries)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


# ---------------------------------------------------------------- talking to a server


def counter(text: str, name: str = prom.VERIFY_CALLS) -> float | None:
    """The sum over labels of a Prometheus counter in /metrics text (ddbench.core.prom); None when absent or the
    text is not Prometheus exposition."""
    try:
        return prom.parse(text).get(name)
    except prom.PromError:
        return None


def scrape(url: str) -> float | None:
    try:
        r = httpx.get(url + "/metrics", timeout=10)
    except httpx.HTTPError:
        return None
    return counter(r.text) if r.status_code == 200 else None


def chat(url: str, model: str, prompt: Prompt, profile: Profile, token_ids: bool = True) -> dict:
    """One streamed chat completion, the load generator's body and client; text, usage and SGLang's spec details
    (token_ids=False: the body asks for no token ids)."""
    from loadtests.client import chat_body, stream

    wl = profile.workload
    body = chat_body(prompt, model=model, max_tokens=wl.max_tokens, temperature=wl.temperature, top_p=wl.top_p,
                     top_k=wl.top_k, ignore_eos=wl.ignore_eos, token_ids=token_ids)
    with httpx.Client(base_url=url) as client:
        return stream(client, body, f"check-{prompt.id}", timeout_s=REQUEST_TIMEOUT_S)


def send_all(url: str, prompts: list[Prompt], profile: Profile, token_ids: bool = True) -> list[dict]:
    """The prompts one at a time (C = 1); per request the /metrics verify-step delta and the outputs."""
    from loadtests.cell import probe

    model = probe(url)
    rows = []
    for prompt in prompts:
        before = scrape(url)
        got = chat(url, model, prompt, profile, token_ids)
        after = scrape(url)
        text = "".join(c.text for c in got["chunks"])
        usage = got["usage"] or {}
        rows.append({"id": prompt.id,
                     "verify_steps": after - before if before is not None and after is not None else None,
                     "spec_verify_ct": (got["spec"] or {}).get("spec_verify_ct"),
                     "completion_tokens": usage.get("completion_tokens"), "finish_reason": got["finish_reason"],
                     "error": got["error"], "text_sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text,
                     "token_ids": got.get("output_token_ids")})
    return rows


def _total(rows: list[dict], key: str):
    values = [r[key] for r in rows]
    return None if any(v is None for v in values) else sum(values)


def serve(profile: Profile, arm_id: str, run_dir: Path, prompts: list[Prompt], timeout_s: float | None,
          command: list[str] | None = None, token_ids: bool = True) -> dict:
    """Bring the arm up in run_dir (its own arm dir there), send the prompts, stop it.
    `command` replaces the server command (bringup.up's stand-in), for tests."""
    t0 = time.time()
    try:
        server = up(profile, arm_id, run_dir, timeout_s=timeout_s, command=command)
    except BringUpError as e:
        return {"status": "failed", "reason": e.summary, "requests": []}
    try:
        return measure(server, prompts, profile, t0, token_ids)
    finally:
        server.stop()


def measure(server, prompts: list[Prompt], profile: Profile, t0: float, token_ids: bool = True) -> dict:
    """The prompts through a server that is up (since t0); totals and per-request rows."""
    ready_s = time.time() - t0
    rows = send_all(server.url, prompts, profile, token_ids)
    steps, tokens = _total(rows, "verify_steps"), _total(rows, "completion_tokens")
    failed = [r for r in rows if r["error"]]
    why = f"requests failed: {[r['id'] for r in failed]}; the first: {failed[0]['error']}" if failed else None
    return {"status": "failed" if failed else "ok", "reason": why,
            "ready_s": round(ready_s, 1), "wall_s": round(time.time() - t0, 1), "verify_steps": steps,
            "spec_verify_ct": _total(rows, "spec_verify_ct"), "completion_tokens": tokens,
            "tau": round(tokens / steps, 4) if steps and tokens else None, "requests": rows}


def fork_build(entries: list[str]) -> dict | None:
    for e in entries:
        m = bundle_marker(e)
        if m and m.get("layer") == FORK_LAYER:
            return m.get("source")
    return None


# ---------------------------------------------------------------- the two diagnostics


def head(diagnostic: str, label: str, profile: Profile, source: str, prompts: list[Prompt]) -> dict:
    """What every diagnostic record starts with: what it is, from which profile, on which prompts, when."""
    return {"diagnostic": diagnostic, "schema": SCHEMA, "label": label,
            "profile": {"name": profile.name, "digest": profile.digest(), "source": source},
            "prompts": prompts_record(profile, prompts), "started": now_iso()}


def pick_linear(profile: Profile, arm_id: str | None) -> Arm:
    if arm_id:
        arm = profile.arm(arm_id)
        if arm.kind != "linear":
            raise DiagnosticError(f"the overlay check runs DFLASH: arm '{arm_id}' is a '{arm.kind}' arm")
        return arm
    for arm in profile.arms:
        if arm.kind == "linear" and profile.cuda_graphs(arm):
            return arm
    raise DiagnosticError(f"profile '{profile.name}' has no linear (DFLASH) arm with CUDA graphs on: "
                          "name one with --arm")


FORK_FLAG_PREFIX = "--speculative-ddtree-"


def without_fork_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """args less every flag only the DDTree fork knows (the fork's and ddbench's patches name them
    --speculative-ddtree-*), each with its value; and what was dropped. Stock SGLang refuses them."""
    kept, dropped, i = [], [], 0
    while i < len(args):
        if args[i].startswith(FORK_FLAG_PREFIX):
            takes_value = "=" not in args[i] and i + 1 < len(args) and not args[i + 1].startswith("--")
            n = 2 if takes_value else 1
            dropped += args[i:i + n]
            i += n
        else:
            kept.append(args[i])
            i += 1
    return kept, dropped


def for_stock(profile: Profile, arm: Arm) -> tuple[Profile, list[str]]:
    """The profile as stock SGLang can serve the arm: the fork-only flags dropped (the DFLASH path ignores
    them on the fork too); and the flags dropped."""
    rt_args, dropped = without_fork_flags(profile.runtime.extra_args)
    arm_args, arm_dropped = without_fork_flags(arm.extra_args)
    runtime = profile.runtime.model_copy(update={"extra_args": rt_args})
    changed = arm.model_copy(update={"extra_args": arm_args})
    stock = profile.model_copy(update={"runtime": runtime,
                                       "arms": [changed if a.id == arm.id else a for a in profile.arms]})
    return stock, dropped + arm_dropped


def overlay_check(run_dir: Path, profile: Profile, source: str, arm_id: str | None, n: int,
                  timeout_s: float | None = None, command: list[str] | None = None) -> dict:
    from containers.launch import server_command

    arm = pick_linear(profile, arm_id)
    stock, fork = split_pythonpath(os.environ.get("PYTHONPATH", ""))
    prompts = first_prompts(profile, n)
    out_dir = run_dir / "diagnostics"
    doc = {**head("overlay-check", f"overlay check: {arm.id} (DFLASH) on the DDTree build vs stock SGLang, C=1, "
                                   f"T={profile.workload.temperature:g}, {len(prompts)} prompts; not a measured cell",
                  profile, source, prompts),
           "arm": arm.id, "argv": server_command(profile, arm).argv, "build": fork_build(fork), "sides": {}}
    stock_profile, doc["stock_drops"] = for_stock(profile, arm)
    for side, entries, prof in (("stock", stock, stock_profile), ("fork", fork, profile)):
        with pythonpath(entries):
            # no token ids asked of either side: stock 0.5.17 (#30917 without #37365) answers HTTP 400 to a chat
            # stream that asks for them, and the check compares verify steps and texts
            result = serve(prof, arm.id, out_dir / "overlay-check" / side, prompts, timeout_s, command,
                           token_ids=False)
        log = out_dir / "overlay-check" / side / arm.id / SERVER_LOG
        doc["sides"][side] = {"pythonpath": entries, "sglang": resolve_sglang(entries), **result,
                              "server_log": log.relative_to(run_dir).as_posix()}
        print(f"overlay check: {side}: {result['status']}, verify steps {result.get('verify_steps')}, "
              f"tokens {result.get('completion_tokens')}" + (f" ({result['reason']})" if result.get("reason") else ""),
              file=sys.stderr, flush=True)
    a, b = doc["sides"]["stock"], doc["sides"]["fork"]
    both_ok = a["status"] == b["status"] == "ok"
    # the /metrics counter where both have it, else SGLang's per-request count
    key = "verify_steps" if both_ok and None not in (a["verify_steps"], b["verify_steps"]) else "spec_verify_ct"
    doc["steps_from"] = {"verify_steps": "metrics", "spec_verify_ct": "spec_verify_ct"}[key]
    doc["same_verify_steps"] = both_ok and a.get(key) is not None and a.get(key) == b.get(key)
    doc["same_outputs"] = both_ok and [r["text"] for r in a["requests"]] == [r["text"] for r in b["requests"]]
    doc["passed"] = doc["same_verify_steps"]
    doc["ended"] = now_iso()
    write_json_atomic(run_dir / OVERLAY_CHECK, doc)
    return doc


def with_stage_profiler(profile: Profile, arm: Arm, output: Path, interval: int, warmup: int) -> Profile:
    """The profile with one arm's command extended by the fork's stage-profiler flags (nothing else changes)."""
    return with_flags(profile, arm, ["--speculative-ddtree-profile", "--speculative-ddtree-profile-output",
                                     str(output), "--speculative-ddtree-profile-interval", str(interval),
                                     "--speculative-ddtree-profile-warmup", str(warmup)])


def summarize_stages(path: Path) -> dict:
    """The fork's JSONL records folded into per-stage averages over every profiled round."""
    records, rounds, acc = 0, 0, {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            records += 1
            rounds += int(rec.get("profiled_rounds") or 0)
            for stage, e in (rec.get("stages") or {}).items():
                s = acc.setdefault(stage, {"cpu_sum": 0.0, "cpu_n": 0, "gpu_sum": 0.0, "gpu_n": 0})
                s["cpu_sum"] += e.get("cpu_sum_ms", 0.0)
                s["cpu_n"] += e.get("cpu_count", 0)
                s["gpu_sum"] += e.get("gpu_sum_ms", 0.0)
                s["gpu_n"] += e.get("gpu_count", 0)
    stages = {k: {"cpu_avg_ms": round(v["cpu_sum"] / v["cpu_n"], 4) if v["cpu_n"] else None,
                  "gpu_avg_ms": round(v["gpu_sum"] / v["gpu_n"], 4) if v["gpu_n"] else None,
                  "count": max(v["cpu_n"], v["gpu_n"])} for k, v in sorted(acc.items())}
    return {"records": records, "rounds": rounds, "stages": stages}


def stage_cost(run_dir: Path, profile: Profile, source: str, arm_ids: list[str], n: int, interval: int,
               warmup: int, timeout_s: float | None = None, command: list[str] | None = None) -> dict:
    from containers.launch import server_command

    if profile.backend.ddtree != "fork":
        raise DiagnosticError(f"profile '{profile.name}' is not on the DDTree fork (backend.ddtree 'fork'): "
                              f"its stage profiler is the fork's")
    arms = [profile.arm(a) for a in arm_ids] if arm_ids else [a for a in profile.arms if a.kind == "tree"]
    if not arms:
        raise DiagnosticError(f"profile '{profile.name}' has no tree arm: name arms with --arm")
    for arm in arms:
        if arm.kind not in ("linear", "tree"):
            raise DiagnosticError(f"arm '{arm.id}' is '{arm.kind}': the stage profiler times DFLASH and DDTREE")
    here = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    served = resolve_sglang(here) or {}
    if served.get("layer") != FORK_LAYER:
        raise DiagnosticError(f"`sglang` resolves to {served.get('site')} ({served.get('layer')}), not the "
                              f"{FORK_LAYER} layer: e=$(sh containers/h200/setup.sh harness sglang {FORK_LAYER}) "
                              f"&& eval \"$e\"")
    prompts = first_prompts(profile, n)
    out_dir = run_dir / "diagnostics"
    doc = {**head("stage-cost", f"stage cost: the fork's --speculative-ddtree-profile, C=1, {len(prompts)} prompts; "
                                f"not a measured cell (the instrumentation costs time)", profile, source, prompts),
           "build": fork_build(here), "sglang": served, "arms": {}}
    # every arm up at once (bring-up dominates a diagnostic's time), then one arm at a time serves
    cell = out_dir / "stage-cost"
    files, labelled = {}, profile
    for arm in arms:
        files[arm.id] = (cell / arm.id / "stages.jsonl").resolve()
        files[arm.id].parent.mkdir(parents=True, exist_ok=True)
        files[arm.id].unlink(missing_ok=True)  # the profiler appends
        labelled = with_stage_profiler(labelled, arm, files[arm.id], interval, warmup)
    t0 = time.time()
    servers, down = up_together(labelled, [a.id for a in arms], cell, timeout_s=timeout_s, command=command)
    doc["ready_all_s"] = round(time.time() - t0, 1)
    try:
        for arm in arms:
            result = ({"status": "failed", "reason": down[arm.id]} if arm.id in down else
                      measure(servers[arm.id], prompts, labelled, time.time()))
            result.pop("requests", None)
            result.pop("ready_s", None)      # brought up together: see "ready_all_s"
            doc["arms"][arm.id] = {"argv": server_command(labelled, labelled.arm(arm.id)).argv, **result,
                                   "stages_file": files[arm.id].relative_to(run_dir.resolve()).as_posix(),
                                   **summarize_stages(files[arm.id])}
            print(f"stage cost: {arm.id}: {result['status']}, {doc['arms'][arm.id]['records']} profiler records",
                  file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    doc["ended"] = now_iso()
    write_json_atomic(out_dir / "stage-cost.json", doc)
    return doc


STEP_LINE = re.compile(r"DDTREE step: nodes=(\[[^\]]*\]) depth=(\[[^\]]*\]) commit=(\[[^\]]*\]) "
                       r"done=(\[[^\]]*\])")


def parse_steps(log_text: str) -> list[dict]:
    """The per-step lines of ddbench patch 0004 in a server log, in order."""
    out = []
    for n, line in enumerate(log_text.splitlines(), 1):
        m = STEP_LINE.search(line)
        if m:
            nodes, depth, commit, done = (ast.literal_eval(g) for g in m.groups())
            out.append({"line": n, "nodes": nodes, "depth": depth, "commit": commit, "done": done})
    return out


def judge_steps(steps: list[dict], budget: int) -> dict:
    """Commit = depth + 1 on every step of every request that did not finish on it; the shapes seen."""
    bad = [{"line": s["line"], "request": i, "depth": d, "commit": c}
           for s in steps for i, (d, c, f) in enumerate(zip(s["depth"], s["commit"], s["done"], strict=False))
           if not f and c != d + 1]
    widths = sorted({w for s in steps for w in s["nodes"]})
    commits = sum(sum(s["commit"]) for s in steps)
    per_request = sum(len(s["commit"]) for s in steps)
    return {"steps": len(steps), "batched_steps": sum(len(s["nodes"]) >= 2 for s in steps), "widths": widths,
            "narrow_steps": sum(any(w < budget for w in s["nodes"]) for s in steps), "commit_tokens": commits,
            "tau": round(commits / per_request, 4) if per_request else None,
            "violations": bad[:20], "violation_count": len(bad)}


def with_flags(profile: Profile, arm: Arm, flags: list[str]) -> Profile:
    """The profile with one arm's command extended by flags (nothing else changes)."""
    changed = arm.model_copy(update={"extra_args": [*arm.extra_args, *flags]})
    return profile.model_copy(update={"arms": [changed if a.id == arm.id else a for a in profile.arms]})


def steps_check(run_dir: Path, profile: Profile, source: str, arm_ids: list[str], n: int, concurrency: int,
                prune: bool, label: str | None = None, timeout_s: float | None = None,
                command: list[str] | None = None) -> dict:
    from containers.launch import max_running_requests, server_command

    if profile.backend.ddtree != "fork":
        raise DiagnosticError(f"profile '{profile.name}' is not on the DDTree fork (backend.ddtree 'fork')")
    arms = [profile.arm(a) for a in arm_ids]
    if not arms or any(a.kind not in ("chain", "tree") for a in arms):
        raise DiagnosticError("steps needs chain or tree arms: name them with --arm")
    prompts = first_prompts(profile, n)
    name = "steps" + (f"-{label}" if label else "")
    out_dir = run_dir / "diagnostics"
    # the server must batch what the diagnostic sends at once, whatever the profile's own concurrency
    flags = ["--speculative-ddtree-step-stats", *(["--is-ddtree-prune"] if prune else []),
             "--max-running-requests", str(max(concurrency, max_running_requests(profile)))]
    labelled = profile
    for arm in arms:
        labelled = with_flags(labelled, arm, flags)
    doc = {**head("steps", f"per-step statistics{' of pruned trees' if prune else ''}: {len(prompts)} prompts, "
                           f"{concurrency} at a time; not a measured cell (the statistics cost a sync per step)",
                  profile, source, prompts),
           "build": fork_build(os.environ.get("PYTHONPATH", "").split(os.pathsep)), "prune": prune,
           "concurrency": concurrency, "arms": {}}
    cell = out_dir / name
    t0 = time.time()
    servers, down = up_together(labelled, [a.id for a in arms], cell, timeout_s=timeout_s, command=command)
    doc["ready_all_s"] = round(time.time() - t0, 1)
    try:
        for arm in arms:
            argv = server_command(labelled, labelled.arm(arm.id)).argv
            if arm.id in down:
                doc["arms"][arm.id] = {"argv": argv, "status": "failed", "reason": down[arm.id], "passed": False}
                continue
            url = servers[arm.id].url
            from loadtests.cell import probe

            model = probe(url)
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                rows = list(pool.map(partial(chat, url, model, profile=profile), prompts))
            servers[arm.id].stop()
            failed = [q.id for q, r in zip(prompts, rows, strict=True) if r["error"]]
            log = (cell / arm.id / SERVER_LOG)
            got = judge_steps(parse_steps(log.read_text(errors="replace") if log.is_file() else ""), arm.tree_budget)
            ok = not failed and got["steps"] > 0 and got["violation_count"] == 0
            if prune:  # the point of --prune: narrow verifies at batch >= 2 ran
                ok = ok and got["batched_steps"] > 0 and got["narrow_steps"] > 0
            doc["arms"][arm.id] = {"argv": argv, "status": "failed" if failed else "ok",
                                   "reason": f"requests failed: {failed}" if failed else None,
                                   "requests_ok": len(rows) - len(failed), **got, "passed": ok}
            print(f"steps: {arm.id}: {len(rows) - len(failed)}/{len(rows)} requests, {got['steps']} steps "
                  f"({got['batched_steps']} batched, widths {got['widths']}), {got['violation_count']} commit != "
                  f"depth + 1", file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    doc["passed"] = bool(doc["arms"]) and all(v["passed"] for v in doc["arms"].values())
    doc["ended"] = now_iso()
    write_json_atomic(out_dir / f"{name}.json", doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.h200.diagnostics", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    o = sub.add_parser("overlay-check", help="the build's DFLASH vs stock's: verify steps on the run's prompts")
    s = sub.add_parser("stage-cost", help="per tree arm, one labelled cell with the fork's stage profiler")
    t = sub.add_parser("steps", help="per chain/tree arm, one labelled cell with per-step statistics")
    for p in (o, s, t):
        p.add_argument("run_dir", type=Path)
        p.add_argument("--profile", help="default: RUN_DIR/manifest.json's")
        p.add_argument("--timeout", type=float, help="bring-up timeout in s (default bringup's)")
    o.add_argument("--arm", help="a linear arm (default: the first with CUDA graphs on)")
    o.add_argument("--prompts", type=int, default=3, help="the first N prompts of the set (default 3, as the trial)")
    s.add_argument("--arm", action="append", default=[], help="repeatable (default: every tree arm)")
    s.add_argument("--prompts", type=int, default=8)
    s.add_argument("--interval", type=int, default=10, help="verify rounds per profiler record")
    s.add_argument("--warmup", type=int, default=0, help="verify rounds skipped before profiling")
    t.add_argument("--arm", action="append", default=[], required=True, help="a chain or tree arm (repeatable)")
    t.add_argument("--prompts", type=int, default=16)
    t.add_argument("--concurrency", type=int, default=1)
    t.add_argument("--prune", action="store_true", help="also --is-ddtree-prune")
    t.add_argument("--label", help="the summary is diagnostics/steps-LABEL.json")
    a = ap.parse_args(argv)
    run_dir = a.run_dir.resolve()
    try:
        profile, source = run_profile(run_dir, a.profile)
        if a.verb == "overlay-check":
            doc = overlay_check(run_dir, profile, source, a.arm, a.prompts, a.timeout)
            print(f"overlay check {'passed' if doc['passed'] else 'FAILED'}: verify steps stock "
                  f"{doc['sides']['stock'].get('verify_steps')}, fork {doc['sides']['fork'].get('verify_steps')}; "
                  f"outputs {'identical' if doc['same_outputs'] else 'differ'} "
                  f"-> {run_dir}/diagnostics/overlay-check.json")
            return 0 if doc["passed"] else 3
        if a.verb == "steps":
            doc = steps_check(run_dir, profile, source, a.arm, a.prompts, a.concurrency, a.prune, a.label,
                              a.timeout)
            print(f"steps {'passed' if doc['passed'] else 'FAILED'} -> {run_dir}/diagnostics/"
                  f"steps{'-' + a.label if a.label else ''}.json")
            return 0 if doc["passed"] else 3
        doc = stage_cost(run_dir, profile, source, a.arm, a.prompts, a.interval, a.warmup, a.timeout)
        states = ", ".join(f"{k} {v['status']}" for k, v in doc["arms"].items())
        print(f"stage cost: {states} -> {run_dir}/diagnostics/stage-cost.json")
        return 0 if all(v["status"] == "ok" for v in doc["arms"].values()) else 3
    except (DiagnosticError, ProfileError) as e:
        print(f"diagnostics: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
