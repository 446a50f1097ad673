"""stage-cost: per arm (default: every tree arm; a linear arm may be named too, this build profiles
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
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from containers.bringup import up_together
from containers.launch import server_command
from ddbench.core.manifest import now_iso
from ddbench.core.profile import Arm, Profile
from ddbench.core.results import write_json_atomic
from ddbench.diagnostics.serving import (
    FORK_LAYER,
    DiagnosticError,
    first_prompts,
    fork_build,
    head,
    measure,
    resolve_sglang,
    with_flags,
)


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
                              f"{FORK_LAYER} layer: e=$(sh containers/offline/setup.sh harness sglang {FORK_LAYER}) "
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
