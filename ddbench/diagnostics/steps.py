"""steps: per arm (chain or tree), one labelled cell with ddbench's per-step statistics on
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

import ast
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from containers.bringup import up_together
from containers.launch import max_running_requests, server_command
from ddbench.core.manifest import now_iso
from ddbench.core.profile import Profile
from ddbench.core.results import SERVER_LOG, write_json_atomic
from ddbench.diagnostics.serving import DiagnosticError, chat, first_prompts, fork_build, head, probe, with_flags

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


def steps_check(run_dir: Path, profile: Profile, source: str, arm_ids: list[str], n: int, concurrency: int,
                prune: bool, label: str | None = None, timeout_s: float | None = None,
                command: list[str] | None = None) -> dict:
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

