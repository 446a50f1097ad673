"""From an arm of a profile to a container spec: everything `docker run` needs, and nothing secret.

The command comes from containers.launch.server_command (one function per backend, SGLang's flag
names for both); the spec adds what a container needs around it: GPUs from the placement,
shared memory, a port bound to 127.0.0.1, volumes for the model and the results, labels that
let `down` find every ddbench container, and the environment passed through by name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from containers.launch import DEFAULT_PORT, server_command
from ddbench.core.profile import REPO_ROOT, Arm, Profile

LABEL = "ddbench"
# inside the image the repository's code lives here (containers/refengine/Dockerfile)
WORKDIR = "/opt/ddbench"
RESULTS_MOUNT = "/results"
HF_CACHE_MOUNT = "/hf-cache"
# passed into the container when set on the host; values never reach a file we write
PASSTHROUGH = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER")


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    image: str
    command: list[str]
    env: dict[str, str]
    port: int  # the server's port inside the container
    host_port: int
    bind: str = "127.0.0.1"
    gpus: list[int] = field(default_factory=list)
    shm_size: str | None = "2g"
    ipc_mode: str | None = None
    mounts: list[Mount] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    cpuset: str | None = None  # placement.cpus: the CPUs the container may run on
    notes: list[str] = field(default_factory=list)

    def public(self) -> dict:
        """What may be recorded: the env's names only, since values may be secrets."""
        return {"name": self.name, "image": self.image, "command": self.command, "env_names": sorted(self.env),
                "port": self.port, "host_port": self.host_port, "bind": self.bind, "gpus": self.gpus,
                "shm_size": self.shm_size, "ipc_mode": self.ipc_mode, "workdir": self.workdir, "cpuset": self.cpuset,
                "mounts": [m.__dict__ for m in self.mounts], "labels": self.labels}


def container_name(run_id: str, arm_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"ddbench-{run_id}-{arm_id}")


def labels(profile: Profile, arm: Arm, run_id: str, log_path: Path | None) -> dict[str, str]:
    out = {LABEL: "1", "ddbench.profile": profile.name, "ddbench.run": run_id, "ddbench.arm": arm.id}
    if log_path is not None:
        out["ddbench.log"] = str(log_path)
    return out


def _is_local_path(value: str) -> bool:
    """A checkout on this host, not a hub id: both can read owner/name, but a repo-relative
    path starts with a directory of the repository (models/...), even before it is trained."""
    path = Path(value)
    return path.is_absolute() or value.startswith(".") or (REPO_ROOT / path.parts[0]).is_dir()


def model_mounts(profile: Profile) -> tuple[list[Mount], dict[str, str]]:
    """Local checkpoints, read-only at the path the command names; hub ids through the HF cache."""
    mounts, env, hub = [], {}, False
    for value in filter(None, (profile.models.target, profile.models.drafter, profile.models.tokenizer)):
        if not _is_local_path(value):
            hub = True
            continue
        src = Path(value) if Path(value).is_absolute() else REPO_ROOT / value
        target = value if Path(value).is_absolute() else f"{WORKDIR}/{Path(value).as_posix()}"
        mounts.append(Mount(str(src.resolve()), target))
    if hub:
        cache = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
        mounts.append(Mount(str(cache), HF_CACHE_MOUNT, read_only=False))
        env["HF_HOME"] = HF_CACHE_MOUNT
    return mounts, env


def passthrough_env() -> dict[str, str]:
    return {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}


def build_spec(profile: Profile, arm: Arm, *, run_id: str, arm_dir: Path | None = None,
               host_port: int = DEFAULT_PORT, port: int = DEFAULT_PORT, bind: str | None = None,
               command: list[str] | None = None) -> ContainerSpec:
    """The container for one arm. `command` replaces the generated one (a stand-in server in tests)."""
    if not profile.backend.image:
        raise ValueError(f"profile '{profile.name}': backend.image is needed to run arm '{arm.id}' in a container")
    launch = server_command(profile, arm, host="0.0.0.0", port=port)
    mounts, env = model_mounts(profile)
    if arm_dir is not None:
        mounts.append(Mount(str(Path(arm_dir).resolve()), RESULTS_MOUNT, read_only=False))
    cuda = profile.placement.device == "cuda"
    # the container sees only its GPUs, renumbered from 0: CUDA_VISIBLE_DEVICES is the runtime's job
    env = {**passthrough_env(), **env, **{k: v for k, v in launch.env.items() if k != "CUDA_VISIBLE_DEVICES"}}
    return ContainerSpec(
        name=container_name(run_id, arm.id), image=profile.backend.image, command=command or launch.argv,
        env=env, port=port, host_port=host_port, bind=bind or os.environ.get("DDBENCH_BIND", "127.0.0.1"),
        gpus=list(profile.placement.gpus) if cuda else [],
        # NCCL and CUDA IPC between tensor-parallel ranks need the host's IPC namespace
        shm_size=None if cuda else "2g", ipc_mode="host" if cuda else None,
        mounts=mounts, labels=labels(profile, arm, run_id, Path(arm_dir) / "server.log" if arm_dir else None),
        workdir=WORKDIR if profile.backend.kind == "refengine" else None, cpuset=profile.placement.cpus,
        notes=list(launch.notes))


def with_command(spec: ContainerSpec, command: list[str]) -> ContainerSpec:
    return replace(spec, command=command)
