"""Up and down for an arm of a profile, with whichever runtime the profile names.

`up` starts the arm's server (a container from its spec, or a local process), waits until it
answers /v1/models and /health, and writes <arm>/status.json saying whether it came up, with
what image and command (environment by name only). A server that exits or times out is
stopped, and the BringUpError says why in its first line, then the traceback and log tail.
`up_together` brings several arms up side by side, or one at a time where they share a GPU.
"""

from __future__ import annotations

import random
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from containers import docker_runtime, gpu_memory, local_runtime
from containers.launch import DEFAULT_PORT, server_command
from containers.ready import BringUpError, wait_ready
from containers.spec import build_spec, labels
from ddbench.core import cpus as cpus_mod
from ddbench.core.profile import Profile
from ddbench.core.results import SERVER_LOG, STATUS, write_json_atomic

DEFAULT_TIMEOUT_S = {"sglang": 1800.0, "refengine": 600.0}


# SGLang derives more ports from --port and refuses to start when one passes 65535 (its gRPC port
# is port + 10000). A server's port must also stay out of the kernel's ephemeral range: every
# outgoing connection on the host (the sweep's probes, Locust, telemetry) takes a port from there,
# and one did take a cpu-tiny server's port between free_port's check and the server's bind
# ("address already in use", a repetition's cells lost). So ports come from below that range,
# with the derived ones below it too.
DERIVED_SPAN = 10000
LOWEST_PORT = 20000
FALLBACK_RANGE = (LOWEST_PORT, 50000)
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
BIND_RETRIES = 3
_IN_USE = ("address already in use", "port is already allocated")


def ephemeral(path: Path = EPHEMERAL) -> tuple[int, int] | None:
    """The kernel's ephemeral port range (first, last), or None where it cannot be read."""
    try:
        lo, hi = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return None
    return lo, hi


def port_range(path: Path = EPHEMERAL) -> tuple[int, int]:
    """[lo, hi) for servers' ports: below the ephemeral range with room for the derived ports, else above it,
    else (no room either side, or the range unknown) FALLBACK_RANGE, where up() retries a port taken."""
    e = ephemeral(path)
    if e is None:
        return FALLBACK_RANGE
    for lo, hi in ((LOWEST_PORT, e[0] - DERIVED_SPAN), (e[1] + 1, 65536 - DERIVED_SPAN)):
        if hi - lo >= 1000:
            return lo, hi
    return FALLBACK_RANGE


PORT_RANGE = port_range()


def free_port(lo: int = PORT_RANGE[0], hi: int = PORT_RANGE[1], tries: int = 100) -> int:
    pick = random.SystemRandom()
    for _ in range(tries):
        port = pick.randrange(lo, hi)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BringUpError(f"no free port in {lo}..{hi - 1} after {tries} tries")


def port_taken(e: BaseException) -> bool:
    """Whether a bring-up failed because its port was taken after free_port picked it."""
    text = str(e).lower()   # a BringUpError's text carries its log's tail, where the server says why
    return any(s in text for s in _IN_USE)


def _with_port(command: list[str] | None, port: int) -> list[str] | None:
    return [a.replace("{port}", str(port)) for a in command] if command else None


def up(profile: Profile, arm_id: str, run_dir: Path, *, port: int | None = None, timeout_s: float | None = None,
       command: list[str] | None = None, detach: bool = False, note: str | None = None):
    """Bring an arm up and return its server handle (.url, .exited(), .logs(), .stop()).

    `command` replaces the generated server command (a stand-in server); "{port}" in it becomes
    the port the server must listen on (inside the container, for Docker). A port picked here that
    another process takes before the server binds it is picked again, BIND_RETRIES times in all.
    `note` joins the arm's notes in status.json (how its memory share was sized)."""
    if port is not None:
        return _up(profile, arm_id, run_dir, port, timeout_s, command, detach, note)
    for attempt in range(1, BIND_RETRIES + 1):
        try:
            return _up(profile, arm_id, run_dir, free_port(), timeout_s, command, detach, note)
        except Exception as e:
            if attempt == BIND_RETRIES or not port_taken(e):
                raise
            print(f"arm '{arm_id}': its port was taken before the server bound it; trying another "
                  f"({attempt + 1} of {BIND_RETRIES})", file=sys.stderr)


def _up(profile: Profile, arm_id: str, run_dir: Path, port: int, timeout_s: float | None,
        command: list[str] | None, detach: bool, note: str | None = None):
    arm = profile.arm(arm_id)
    run_id = Path(run_dir).name
    arm_dir = Path(run_dir) / arm.id
    arm_dir.mkdir(parents=True, exist_ok=True)
    log_path = arm_dir / SERVER_LOG
    timeout_s = timeout_s or DEFAULT_TIMEOUT_S[profile.backend.kind]
    started = time.time()
    status = {"arm": arm.id, "profile": profile.name, "backend": profile.backend.kind,
              "runtime": profile.backend.runtime, "started_unix": started}
    if profile.backend.runtime == "docker":
        spec = build_spec(profile, arm, run_id=run_id, arm_dir=arm_dir, host_port=port,
                          command=_with_port(command, DEFAULT_PORT))
        status.update(image=spec.image, container=spec.public(), notes=spec.notes)
        server = docker_runtime.start(spec, log_path, detach=detach)
        status["image_id"] = server.image_id()
    else:
        launch = server_command(profile, arm, host="127.0.0.1", port=port, python=sys.executable)
        argv = _with_port(command, port) or launch.argv
        status.update(command=argv, env_names=sorted(launch.env), notes=launch.notes)
        try:
            cpus = cpus_mod.usable(profile.placement.cpus, "placement.cpus") if profile.placement.cpus else None
        except ValueError as e:
            write_json_atomic(arm_dir / STATUS, {**status, "status": "failed", "reason": str(e),
                                                 "ended_unix": time.time()})
            raise BringUpError(f"arm '{arm.id}': {e}") from None
        if cpus:
            status["cpus"] = sorted(cpus)
        server = local_runtime.start(argv, env=launch.env, url=f"http://127.0.0.1:{port}", log_path=log_path,
                                     labels=labels(profile, arm, run_id, log_path), detach=detach, cpus=cpus)
    status["url"] = server.url
    if note:
        status["notes"] = [*status.get("notes", []), note]
    try:
        ready_s = wait_ready(server.url, exited=server.exited, logs=server.logs, timeout_s=timeout_s,
                             what=f"arm '{arm.id}' ({profile.backend.kind}, {server.ident})")
    except BringUpError as e:
        server.stop()
        e.naming(log_path)
        write_json_atomic(arm_dir / STATUS, {**status, "status": "failed", "reason": e.summary,
                                             "ended_unix": time.time()})
        raise
    except BaseException:  # Ctrl-C while waiting: leave nothing running
        server.stop()
        raise
    write_json_atomic(arm_dir / STATUS, {**status, "status": "up", "ready_s": round(ready_s, 3)})
    return server


def down(run_id: str | None = None, arm: str | None = None) -> list[str]:
    """Stop every ddbench server (containers labelled ddbench=1, local processes started here)."""
    filters = {k: v for k, v in (("ddbench.run", run_id), ("ddbench.arm", arm)) if v}
    stopped = [f"local {s}" for s in local_runtime.down(filters)]
    try:
        stopped += [f"container {n}" for n in docker_runtime.down(filters)]
    except Exception as e:  # no daemon: nothing of ours can run there
        if "docker" not in type(e).__module__:
            raise
    return stopped


def up_together(profile: Profile, arms: list[str], run_dir: Path, **kw) -> tuple[dict, dict[str, str]]:
    """Bring arms up: the first alone, the rest in parallel, then any that failed alone once more;
    SGLang servers sharing a GPU one at a time, each sized to its share (containers/gpu_memory.py).
    Returns (servers, why each other arm is not up)."""
    servers, down = {}, {}

    def one(arm: str, sized: bool = False):
        try:
            mine, note = (gpu_memory.fitted_now(profile) if sized
                          else (profile, None))
            servers[arm] = up(mine, arm, run_dir, note=note, **kw)
        except (BringUpError, RuntimeError) as e:
            down[arm] = getattr(e, "summary", str(e).splitlines()[0])

    try:
        if gpu_memory.shares_gpu(profile) and len(arms) > 1:
            for arm in arms:
                one(arm, sized=True)
            return servers, down
        if arms:
            one(arms[0])
        with ThreadPoolExecutor(max_workers=max(1, len(arms) - 1)) as pool:
            list(pool.map(one, arms[1:]))
        # a server that failed beside others (a port, a compile cache) gets one more try alone;
        # the log keeps both
        for arm in [a for a in arms[1:] if a in down]:
            first = down.pop(arm)
            one(arm)
            if arm in down:
                down[arm] = f"{down[arm]} (twice: first beside the other arms, then alone; first: {first})"
    except BaseException:  # Ctrl-C during bring-up: leave nothing running
        for s in servers.values():
            s.stop()
        raise
    return servers, down
