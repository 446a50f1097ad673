"""A web UI session as a run: each setting of arm and user count is a phase, and a phase analyses as a cell
(the arm, C = the user count, repetition = the phase's index).

    Phases(records_dir).begin(arm, users) / .end()   the master's log, phases.json, written atomically
    materialize(records_dir) -> RunDir                the cells from the phases and the flat records

While the UI runs, every Locust process appends its records to records_dir/requests-<worker>.jsonl as
always; the phases say which requests belong where, by send time. `materialize` (run when the UI
quits, and by `ddbench analyze` on a directory that has phases.json) writes <arm>/c<C>-r<k>/ with the
requests sent inside phase k and a status.json whose measured window is the phase, so that `just
analyze` / `just report` read the session like any run.
"""

from __future__ import annotations

import time
from pathlib import Path

from ddbench.core.records import CellStatus
from ddbench.core.results import MANIFEST, RunDir, read_json, write_json_atomic, write_text_atomic
from loadtests.recorder import read_records

PHASES = "phases.json"
RECORDS = "requests-ui.jsonl"


class Phases:
    """The master's record of what ran when: begin() closes the open phase and opens another."""

    def __init__(self, records_dir: Path):
        self.dir = Path(records_dir)
        path = self.dir / PHASES
        self.phases: list[dict] = read_json(path)["phases"] if path.is_file() else []

    @property
    def current(self) -> dict | None:
        return self.phases[-1] if self.phases and self.phases[-1]["end_ns"] is None else None

    def begin(self, arm: str, users: int, since: tuple[float, int] | None = None) -> dict:
        """A phase from now, or from `since` (unix s, perf_counter ns): a load's first phase opens when the
        load starts, before its users finished spawning, so that their first (warm-up) requests are in it."""
        cur = self.current
        if cur and cur["arm"] == arm and cur["users"] == users:
            return cur
        self.end()
        start_unix, start_ns = since or (time.time(), time.perf_counter_ns())
        phase = {"index": len(self.phases) + 1, "arm": arm, "users": users, "start_unix": start_unix,
                 "start_ns": start_ns, "end_unix": None, "end_ns": None}
        self.phases.append(phase)
        self._write()
        return phase

    def end(self) -> None:
        if cur := self.current:
            cur["end_unix"], cur["end_ns"] = time.time(), time.perf_counter_ns()
            self._write()

    def _write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.dir / PHASES, {"phases": self.phases})


def materialize(records_dir: str | Path) -> RunDir:
    """Cells from phases.json and the session's records (idempotent: a cell is rewritten whole). A phase
    still open ends at its last request's end. Needs the manifest the UI wrote at its start."""
    d = Path(records_dir)
    if not (d / PHASES).is_file():
        raise FileNotFoundError(f"{d}: no {PHASES}: not a web UI session's records")
    if not (d / MANIFEST).is_file():
        raise FileNotFoundError(f"{d}: no {MANIFEST}: the UI writes one when its first load starts")
    run = RunDir(d)
    # every phase again, not only the one that ended: a closed loop's request sent in phase k may end (and
    # be written) after phase k+1 began
    phases = read_json(d / PHASES)["phases"]
    records = read_records(d)
    for p in phases:
        mine = [r for r in records if p["start_ns"] <= r.send_ns and (p["end_ns"] is None or r.send_ns < p["end_ns"])]
        end_ns = p["end_ns"] or max((r.end_ns or r.send_ns for r in mine), default=p["start_ns"])
        cell = run.cell_dir(p["arm"], p["users"], p["index"])
        cell.mkdir(parents=True, exist_ok=True)
        lines = [r.model_copy(update={"arm": p["arm"], "concurrency": p["users"], "repetition": p["index"]})
                 .model_dump_json() for r in mine]
        write_text_atomic(cell / RECORDS, "".join(line + "\n" for line in lines))
        measured = [r for r in mine if not r.warmup]
        # the window opens when the phase's users were all running and their warm-up was done
        warm_end = max((r.end_ns for r in mine if r.warmup and r.end_ns), default=p["start_ns"])
        ok = bool(measured)
        status = CellStatus(arm=p["arm"], concurrency=p["users"], repetition=p["index"],
                            status="ok" if ok else "failed",
                            reason=None if ok else "no measured request was sent in this phase",
                            started_unix=p["start_unix"],
                            ended_unix=p["end_unix"] or p["start_unix"] + (end_ns - p["start_ns"]) / 1e9,
                            window_start_ns=max(p["start_ns"], warm_end), window_end_ns=end_ns,
                            requests=len(measured), errors=sum(not r.ok for r in measured))
        write_json_atomic(cell / "status.json", status.model_dump(mode="json"))
    return run
