"""overlay-check: once per DDTree build, the build's DFLASH must take the same verify steps as the stock
SGLang release's DFLASH (the sglang layer's) on the same prompts (on the old pin, the trial of
2026-12-01: 58 and 58 with the upstream rope fix cherry-picked, 170 without it). The arm (default: the
profile's first linear arm with CUDA graphs on) is brought up twice with the same command line, less on
the stock side the flags only the fork knows (--speculative-ddtree-*, which stock SGLang refuses):
"stock", with PYTHONPATH without the sglang-ddtree site (so `sglang` is the stock layer's), then "fork",
with PYTHONPATH as set up (the fork's `sglang` first). Verify steps are the /metrics counter
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
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from containers.launch import server_command
from ddbench.core.manifest import now_iso
from ddbench.core.profile import Arm, Profile
from ddbench.core.results import OVERLAY_CHECK, SERVER_LOG, write_json_atomic
from ddbench.diagnostics.serving import (
    DiagnosticError,
    first_prompts,
    fork_build,
    head,
    pythonpath,
    resolve_sglang,
    serve,
    split_pythonpath,
)


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

