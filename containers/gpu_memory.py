"""SGLang servers that share a GPU: each one's --mem-fraction-static, from its share of the whole GPU.

SGLang sizes a server's static memory from what is free when it starts: its KV pool is
f x free_at_start - weights (model_runner: post-load free - pre-load free x (1 - f)). Two things
follow for servers that share a GPU:
- they cannot start together: another server loading its weights between one server's two
  readings leaves that one a negative pool ("Not enough memory");
- they cannot all take the same f: the k-th server to start sees less free memory than the first.

So ddbench reads runtime.mem_fraction_static as a share of the whole GPU, starts co-resident SGLang
servers one at a time, and gives each f = share x total / free, read just before its start. A server
alone on its GPU keeps SGLang's own reading (f of what is free), as it always had.
"""

from __future__ import annotations

import shutil
import subprocess

from ddbench.core.profile import Profile

MIB = 2 ** 20
# SGLang refuses f > 1; above this the server would have no room for its CUDA context and graphs
MAX_FRACTION = 0.95


class GpuMemoryError(RuntimeError):
    pass


def shares_gpu(profile: Profile) -> bool:
    """SGLang on CUDA with a static share set: the servers of a block must start one at a time."""
    return (profile.backend.kind == "sglang" and profile.placement.device == "cuda"
            and profile.runtime.mem_fraction_static is not None)


def parse_memory(csv_text: str) -> tuple[int, int]:
    """nvidia-smi --query-gpu=memory.free,memory.total --format=csv,noheader,nounits (one line per GPU,
    MiB) -> (free, total) bytes of the tightest GPU: a tensor-parallel server needs its share on each."""
    rows = []
    for line in csv_text.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        try:
            rows.append((int(cols[0]) * MIB, int(cols[1]) * MIB))
        except (ValueError, IndexError):
            raise GpuMemoryError(f"nvidia-smi memory line not understood: {line!r}") from None
    if not rows:
        raise GpuMemoryError("nvidia-smi listed no GPU memory")
    return min(rows)


def read_memory(gpus: list[int]) -> tuple[int, int] | None:
    """(free, total) bytes on the tightest of gpus; None where there is no nvidia-smi (no GPU to share)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    argv = [exe, "--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits"]
    if gpus:
        argv.append("--id=" + ",".join(map(str, gpus)))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise GpuMemoryError(f"nvidia-smi failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return parse_memory(proc.stdout)


def count_gpus() -> int | None:
    """How many NVIDIA GPUs this machine has; None without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    proc = subprocess.run([exe, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True,
                          timeout=30)
    return len(proc.stdout.split()) if proc.returncode == 0 else 0


def missing_gpus(gpus: list[int], count: int | None) -> str | None:
    """Why placement.gpus cannot be served here, or None when every id exists."""
    if count is None:
        return f"placement.gpus {gpus}: no NVIDIA GPU here (nvidia-smi not found)"
    absent = [g for g in gpus if g >= count]
    if absent:
        have = "none" if count == 0 else f"ids 0-{count - 1}"
        return f"placement.gpus {gpus}: this machine has {count} GPU(s) ({have}); {absent} do not exist"
    return None


def fraction(share: float, free: int, total: int) -> float:
    """The --mem-fraction-static that gives a server share x total bytes when free bytes are free at its start."""
    want = share * total
    f = want / free
    if f > MAX_FRACTION:
        raise GpuMemoryError(
            f"runtime.mem_fraction_static {share:g} asks {want / 2**30:.1f} GiB of the GPU's {total / 2**30:.1f} GiB, "
            f"but only {free / 2**30:.1f} GiB are free at this server's start: lower the share, or run fewer "
            f"servers at once (load.schedule per-repetition)")
    return round(f, 4)


def fitted(profile: Profile, memory: tuple[int, int] | None) -> tuple[Profile, str | None]:
    """The profile with this server's fraction, and a note saying how it was reached (None: unchanged)."""
    share = profile.runtime.mem_fraction_static
    if not shares_gpu(profile) or memory is None:
        return profile, None
    free, total = memory
    f = fraction(share, free, total)
    note = (f"memory: share {share:g} of the GPU ({share * total / 2**30:.1f} of {total / 2**30:.1f} GiB) "
            f"= --mem-fraction-static {f:g} of the {free / 2**30:.1f} GiB free at start")
    runtime = profile.runtime.model_copy(update={"mem_fraction_static": f})
    return profile.model_copy(update={"runtime": runtime}), note


def fitted_now(profile: Profile) -> tuple[Profile, str | None]:
    """fitted() against the memory free on the profile's GPUs now, just before a server's start."""
    return fitted(profile, read_memory(profile.placement.gpus))
