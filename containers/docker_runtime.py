"""Run a ContainerSpec through the Docker SDK: start, stream its log, stop, remove.

The SDK reads DOCKER_HOST (unix, tcp or ssh://user@host), so the same code drives a remote GPU
server; the server's URL then names that host (DDBENCH_SERVER_HOST overrides it, e.g. when
the port comes through an SSH tunnel). Containers carry the label ddbench=1, and `down`
removes those and nothing else.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlparse

from containers import cleanup
from containers.spec import LABEL, ContainerSpec
from ddbench.core.results import redact, write_text_atomic

STOP_TIMEOUT_S = 10


def client():
    import docker

    return docker.from_env()


def server_host() -> str:
    """Where the client reaches a port the daemon published."""
    if os.environ.get("DDBENCH_SERVER_HOST"):
        return os.environ["DDBENCH_SERVER_HOST"]
    url = urlparse(os.environ.get("DOCKER_HOST", ""))
    if url.scheme in ("tcp", "ssh", "http", "https") and url.hostname:
        return url.hostname
    return "127.0.0.1"


def run_kwargs(spec: ContainerSpec) -> dict:
    """docker run's arguments for a spec, as the SDK takes them."""
    from docker.types import DeviceRequest, Mount

    kw = dict(image=spec.image, command=spec.command, name=spec.name, environment=spec.env, labels=spec.labels,
              ports={f"{spec.port}/tcp": (spec.bind, spec.host_port)}, detach=True,
              mounts=[Mount(m.target, m.source, type="bind", read_only=m.read_only) for m in spec.mounts])
    if spec.workdir:
        kw["working_dir"] = spec.workdir
    if spec.gpus:
        kw["device_requests"] = [DeviceRequest(device_ids=[str(g) for g in spec.gpus], capabilities=[["gpu"]])]
    if spec.shm_size:
        kw["shm_size"] = spec.shm_size
    if spec.ipc_mode:
        kw["ipc_mode"] = spec.ipc_mode
    if spec.cpuset:
        kw["cpuset_cpus"] = spec.cpuset
    return kw


class DockerServer:
    """A started container: the runtime-neutral handle bring-up and sweeps use."""

    def __init__(self, container, spec: ContainerSpec, log_path: Path | None):
        self.container = container
        self.spec = spec
        self.log_path = log_path
        self.url = f"http://{server_host()}:{spec.host_port}"
        self._pump = None
        if log_path is not None:
            self._pump = threading.Thread(target=self._stream, name=f"log-{spec.name}", daemon=True)
            self._pump.start()

    @property
    def ident(self) -> str:
        return self.container.id

    def image_id(self) -> str:
        return self.container.image.id

    def _stream(self) -> None:
        """Append the log as it comes, line by line so no secret is split across two redactions."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        pending = ""
        try:
            with open(self.log_path, "a", buffering=1) as f:
                for chunk in self.container.logs(stream=True, follow=True):
                    pending += chunk.decode("utf-8", errors="replace")
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        f.write(redact(line) + "\n")
                if pending:
                    f.write(redact(pending))
        except Exception:  # the container went away under us; stop() writes the whole log anyway
            pass

    def exited(self) -> str | None:
        import docker.errors

        try:
            self.container.reload()
        except docker.errors.NotFound:
            return "was removed"
        state = self.container.attrs.get("State", {})
        if state.get("Status") in ("exited", "dead"):
            reason = " (killed: out of memory)" if state.get("OOMKilled") else ""
            return f"exited with code {state.get('ExitCode')}{reason}"
        return None

    def logs(self) -> str:
        import docker.errors

        try:
            return redact(self.container.logs().decode("utf-8", errors="replace"))
        except docker.errors.NotFound:
            return self.log_path.read_text() if self.log_path and self.log_path.is_file() else ""

    def stop(self) -> None:
        cleanup.disown(self)
        remove(self.container)
        if self._pump is not None:
            self._pump.join(timeout=5)


def remove(container) -> None:
    """Stop, keep the whole log in the file its label names, remove."""
    import docker.errors

    try:
        container.stop(timeout=STOP_TIMEOUT_S)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError:
        pass
    log = container.labels.get("ddbench.log")
    if log:
        try:
            write_text_atomic(Path(log), container.logs().decode("utf-8", errors="replace"))
        except (docker.errors.APIError, OSError):
            pass
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass


def start(spec: ContainerSpec, log_path: Path | None = None, detach: bool = False) -> DockerServer:
    """Start a spec's container; a leftover container of the same name (same run and arm) is replaced.

    Unless detached, the container is removed when this process ends, Ctrl-C and SIGTERM included."""
    import docker.errors

    c = client()
    try:
        old = c.containers.get(spec.name)
    except docker.errors.NotFound:
        old = None
    if old is not None:
        if old.labels.get(LABEL) != "1":
            raise RuntimeError(f"a container named {spec.name} exists and is not ddbench's; not touching it")
        remove(old)
    try:
        container = c.containers.run(**run_kwargs(spec))
    except docker.errors.ImageNotFound:
        raise RuntimeError(f"image {spec.image} is not on the Docker host; build it first "
                           f"(python -m containers.images build ...)") from None
    server = DockerServer(container, spec, log_path)
    if not detach:
        cleanup.own(server)
    return server


def down(filters: dict[str, str] | None = None) -> list[str]:
    """Remove every ddbench-labelled container (narrowed by extra label filters); their names."""
    labels = [f"{LABEL}=1"] + [f"{k}={v}" for k, v in (filters or {}).items()]
    removed = []
    for container in client().containers.list(all=True, filters={"label": labels}):
        remove(container)
        removed.append(container.name)
    # handles this process holds for them have nothing left to stop at exit
    cleanup.disown_where(lambda s: getattr(getattr(s, "container", None), "name", None) in removed)
    return removed
