"""Run an arm's cells against its server, so that a dying server fails its cell, not the sweep.

    run_arms(profile, run_dir, cell=loadtests.cell.run_cell)

Each arm comes up once (arm-major order, as Profile.cells() lists), its cells run with
telemetry, and it goes down before the next arm. An arm that does not come up, or a server
that exits before or during a cell, leaves every affected cell with a failed status.json
that says why; the sweep goes on with the next arm. The cell runner is passed in (the load
generator's run_cell), so this module knows servers, not traffic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from containers import bringup
from containers.ready import BringUpError
from containers.telemetry import TELEMETRY, Telemetry
from ddbench.profile import Profile
from ddbench.records import CellStatus
from ddbench.results import STATUS, cell_name, write_json_atomic

# cell(workload, load, *, url, cell_dir, arm, concurrency, repetition) -> CellStatus
CellRunner = Callable[..., CellStatus]


def _failed(arm: str, c: int, r: int, cell_dir: Path, reason: str) -> CellStatus:
    status = CellStatus(arm=arm, concurrency=c, repetition=r, status="failed", reason=reason,
                        started_unix=time.time(), ended_unix=time.time())
    write_json_atomic(cell_dir / STATUS, status.model_dump(mode="json"))
    return status


def run_arm(profile: Profile, arm_id: str, run_dir: Path, cell: CellRunner, *, command: list[str] | None = None,
            timeout_s: float | None = None, telemetry_interval_s: float = 1.0) -> list[CellStatus]:
    cells = [(c, r) for a, c, r in profile.cells() if a == arm_id]
    cell_dir = lambda c, r: Path(run_dir) / arm_id / cell_name(c, r)  # noqa: E731
    try:
        server = bringup.up(profile, arm_id, run_dir, command=command, timeout_s=timeout_s)
    except (BringUpError, RuntimeError) as e:
        summary = getattr(e, "summary", str(e).splitlines()[0])
        return [_failed(arm_id, c, r, cell_dir(c, r), f"the arm did not come up: {summary}") for c, r in cells]
    out = []
    try:
        for c, r in cells:
            gone = server.exited()
            if gone is not None:
                out.append(_failed(arm_id, c, r, cell_dir(c, r), f"the server {gone} before this cell"))
                continue
            with Telemetry(cell_dir(c, r) / TELEMETRY, gpus=profile.placement.gpus or None,
                           interval_s=telemetry_interval_s):
                status = cell(profile.workload, profile.load, url=server.url, cell_dir=cell_dir(c, r), arm=arm_id,
                              concurrency=c, repetition=r)
            gone = server.exited()
            if gone is not None:
                why = f"the server {gone} during the cell" + (f"; {status.reason}" if status.reason else "")
                status = status.model_copy(update={"status": "failed", "reason": why})
                write_json_atomic(cell_dir(c, r) / STATUS, status.model_dump(mode="json"))
            out.append(status)
    finally:
        server.stop()
    return out


def run_arms(profile: Profile, run_dir: Path, cell: CellRunner, *, arms: list[str] | None = None,
             **kw) -> dict[str, list[CellStatus]]:
    return {a.id: run_arm(profile, a.id, run_dir, cell, **kw) for a in profile.arms if not arms or a.id in arms}
