"""From an arm of a profile to the server's command line: one function per backend.

Both backends take SGLang's flag names, so the reference engine is a drop-in stand-in.
Each arm runs as it would be deployed: the settings a build forces on some arms (overlap
scheduler, page size, attention backend) go to those arms only, and every arm's values and
reasons come from one table (ddbench/core/settings.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ddbench.core import settings
from ddbench.core.profile import Arm, Profile, repo_path

DEFAULT_PORT = 30000


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def shell(self) -> str:
        import shlex

        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.argv)


def max_running_requests(profile: Profile) -> int:
    return profile.runtime.max_running_requests or max(profile.load.concurrency)


def sglang_effective_topk(arm: Arm, max_topk: int, vocab: int | None = None) -> int:
    """Top-k of the retired DDTree PR (#29907; no build ddbench ships serves it, recorded runs of it still
    load): min(max(B // L + 1, 2), vocab, MAX_TOPK)."""
    depth = arm.block_size - 1
    k = max(arm.tree_budget // depth + 1, 2)
    return min(k, max_topk, vocab) if vocab else min(k, max_topk)


def target_vocab(profile: Profile) -> int | None:
    """The target's vocab_size when it is a local checkpoint directory (a hub id: unknown here)."""
    try:
        return int(json.loads((repo_path(profile.models.target) / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def fork_notes(profile: Profile, arm: Arm) -> list[str]:
    """The effective DDTree values on the pinned fork (backend.ddtree 'fork'), for `just check`."""
    from containers.sglang_pin import pin

    p = pin()
    notes = [f"build: DDTree fork {p.label} on sglang {p.sglang} wheels (containers/sglang/pin.toml), every arm"]
    if arm.kind in ("chain", "tree"):
        vocab = target_vocab(profile)
        k = min(arm.tree_budget, arm.tree_topk, vocab or arm.tree_topk)
        notes.append(f"effective DDTree: block {arm.block_size}, budget {arm.tree_budget}, top-k min(B, vocab "
                     f"{vocab or '?'}, K {arm.tree_topk}) = {k}, verify width {arm.verify_width} tokens per request"
                     + (" (a chain: it must take the linear arm's verify steps)" if k == 1 else ""))
    elif arm.kind == "linear":
        notes.append(f"effective DFLASH: block {arm.block_size}, a chain of {arm.block_size - 1} drafted tokens")
    return notes


def _spec_args(arm: Arm, drafter: str | None, block_flag: str,
               topk_env: bool = True) -> tuple[list[str], dict[str, str]]:
    """topk_env: the server reads the arm's top-k from SGLANG_DDTREE_MAX_TOPK (the reference engine, and
    the retired PR's interface); the pinned fork takes it as --speculative-ddtree-topk (ddbench patch 0001)."""
    if arm.kind == "ar":
        return [], {}
    if arm.kind == "linear":
        return ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", drafter,
                block_flag, str(arm.block_size)], {}
    argv = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", drafter,
            block_flag, str(arm.block_size), "--speculative-ddtree-budget", str(arm.tree_budget)]
    if topk_env:
        return argv, {"SGLANG_DDTREE_MAX_TOPK": str(arm.tree_topk)}
    return argv + ["--speculative-ddtree-topk", str(arm.tree_topk)], {}


def _gpu_env(profile: Profile) -> dict[str, str]:
    if profile.placement.device == "cuda" and profile.backend.runtime == "local":
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, profile.placement.gpus))}
    return {}


def _common(profile: Profile, module: str, host: str, port: int, python: str) -> list[str]:
    """The flags both servers share, by SGLang's names."""
    rt = profile.runtime
    argv = [python, "-m", module, "--model-path", profile.models.target, "--host", host, "--port", str(port),
            "--enable-metrics", "--decode-log-interval", str(rt.decode_log_interval),
            "--max-running-requests", str(max_running_requests(profile))]
    if profile.models.tokenizer:
        argv += ["--tokenizer-path", profile.models.tokenizer]
    if rt.dtype != "auto":
        argv += ["--dtype", rt.dtype]
    return argv


def sglang_command(profile: Profile, arm: Arm, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                   python: str = "python3") -> Launch:
    rt = profile.runtime
    argv = _common(profile, "sglang.launch_server", host, port, python)
    argv += ["--tp-size", str(profile.placement.tp_size)]
    attention, page, overlap = (f(profile, arm) for f in (settings.attention, settings.page_size, settings.overlap))
    if attention.value != settings.DEFAULT:
        argv += ["--attention-backend", attention.value]
    if page.value != settings.DEFAULT:
        argv += ["--page-size", page.value]
    if overlap.value == "off":
        argv += ["--disable-overlap-schedule"]
    notes = [f"{s.name} {s.value}: {s.reason}" for s in (attention, page, overlap)]
    if not profile.cuda_graphs(arm):
        argv += ["--disable-cuda-graph"]
    if rt.mem_fraction_static is not None:
        argv += ["--mem-fraction-static", str(rt.mem_fraction_static)]
    fork = profile.backend.ddtree == "fork"
    spec, env = _spec_args(arm, profile.models.drafter, "--speculative-num-draft-tokens", topk_env=not fork)
    argv += spec + rt.extra_args + arm.extra_args
    if fork:
        notes += fork_notes(profile, arm)
    elif arm.kind == "tree":
        k = sglang_effective_topk(arm, arm.tree_topk)
        if k != arm.tree_topk:
            notes.append(f"SGLang's DDTree uses top-k min(max(B//L+1, 2), MAX_TOPK) = {k}, "
                         f"not {arm.tree_topk}, for budget {arm.tree_budget} and depth {arm.block_size - 1}")
    return Launch(argv, {**_gpu_env(profile), **rt.env, **env, **arm.env}, notes)


def refengine_command(profile: Profile, arm: Arm, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                      python: str = "python3") -> Launch:
    rt = profile.runtime
    argv = _common(profile, "refengine.serve", host, port, python) + ["--device", profile.placement.device]
    if not profile.cuda_graphs(arm):
        argv += ["--disable-cuda-graph"]
    spec, env = _spec_args(arm, profile.models.drafter, "--speculative-dflash-block-size")
    argv += spec + rt.extra_args + arm.extra_args
    return Launch(argv, {**_gpu_env(profile), **rt.env, **env, **arm.env})


def server_command(profile: Profile, arm: Arm, **kw) -> Launch:
    if profile.backend.kind == "external":   # the user's server: no command of ours, only where it answers
        return Launch([], {}, [f"external server at {arm.url}: ddbench starts and stops nothing"])
    build = {"sglang": sglang_command, "refengine": refengine_command}[profile.backend.kind]
    return build(profile, arm, **kw)
