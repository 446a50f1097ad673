"""What must hold before a run starts, found without starting anything. `ddbench check` and `reproduce` ask
the same questions: check fails on what is wrong in the profile for this user (a prompt set, a build that
cannot serve an arm, an API key's variable unset, a server at an arm's url that does not answer), and
lists what this host lacks (a GPU, TeX, an image) without failing, so that any shipped profile checks
anywhere; reproduce refuses to start on either."""

from __future__ import annotations

import os
import shutil

from ddbench.core import builds
from ddbench.core.profile import Profile, is_hub_id, repo_path
from ddbench.core.prompts import PromptSetError, load_prompt_set
from loadtests import random_prompts


def problems(profile: Profile, report: bool = True) -> list[str]:
    """Everything that stops a run here: the profile's problems, then the host's."""
    return profile_problems(profile) + host_problems(profile, report)


def profile_problems(profile: Profile) -> list[str]:
    """What is wrong in the profile, for this user, wherever it runs."""
    out = builds.unservable(profile)
    try:
        load_prompt_set(profile.workload.prompt_set, profile.workload.categories or None,
                        random=random_prompts.for_profile(profile))   # random ones: is the tokenizer here?
    except PromptSetError as e:
        out.append(f"workload.prompt_set: {e}")
    for i, arm in enumerate(profile.arms):
        if arm.api_key_env and not os.environ.get(arm.api_key_env):
            out.append(f"arms[{i}].api_key_env (arm '{arm.id}'): environment variable {arm.api_key_env} is not set")
    return out


def host_problems(profile: Profile, report: bool = True) -> list[str]:
    """What this host lacks for the profile: checkpoints, GPUs, TeX, an image."""
    out = []
    for role in ("target", "drafter"):
        ref = getattr(profile.models, role)
        if not ref or is_hub_id(ref) or profile.backend.kind == "external":   # external: the server's own files
            continue  # the server reads it from the Hugging Face cache
        if not (repo_path(ref) / "config.json").is_file():
            out.append(f"models.{role}: {repo_path(ref)} holds no config.json")
    if profile.placement.device == "cuda" and profile.backend.runtime == "local":
        from containers import gpu_memory

        why = gpu_memory.missing_gpus(profile.placement.gpus, gpu_memory.count_gpus())
        if why:
            out.append(why)
    if report and not shutil.which("latexmk"):
        out.append("latexmk is not installed: the report needs TeX (run ./setup)")
    if profile.backend.runtime == "docker":
        try:
            import docker

            docker.from_env().images.get(profile.backend.image)
        except Exception as e:  # no daemon, or no image: both stop the run before it starts
            out.append(f"backend.image {profile.backend.image}: not available ({type(e).__name__}: {e})")
    return out


def unanswered(profile: Profile) -> list[str]:
    """Each arm with a URL whose server does not answer /v1/models, and why (check skips it with --no-probe)."""
    from containers.external import headers, unreachable

    return [f"arms[{i}].url (arm '{arm.id}'): {why}" for i, arm in enumerate(profile.arms)
            if arm.url and (why := unreachable(arm.url.rstrip("/"), headers(arm.api_key_env)))]
