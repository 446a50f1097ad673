"""A web UI session as a run: each setting of arm, user count and (open loop) offered rate is a phase, and a
phase analyses as a cell (the arm, C = the user count, repetition = the phase's index).

    Phases(records_dir).begin(arm, users, rate) / .end()   the master's log, phases.json, written atomically
    materialize(records_dir) -> RunDir                the cells from the phases and the flat records

While the UI runs, every Locust process appends its records to records_dir/requests-<worker>.jsonl as
always; the phases say which requests belong where, by send time. `materialize` (run when the UI
quits, and by `ddbench analyze` on a directory that has phases.json) writes <arm>/c<C>-r<k>/ with the
requests sent inside phase k and a status.json whose measured window is the phase, so that `just
analyze` reads the session like any run (and `just report` renders it). A session whose phases offered rates
(mode open) is an open-loop run: `materialize` records its rates in the manifest's profile, and names each
phase's cell as a rate sweep does, `<arm>@q<rate>`, however many rates it offered.
"""

from __future__ import annotations

import time
from pathlib import Path

from ddbench.core.profile import Profile
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

    def begin(self, arm: str, users: int, rate: float | None = None, since: tuple[float, int] | None = None) -> dict:
        """A phase from now, or from `since` (unix s, perf_counter ns): a load's first phase opens when the
        load starts, before its users finished spawning, so that their first (warm-up) requests are in it.
        rate: the offered rate of an open-loop load (requests/s), None in closed loop."""
        cur = self.current
        if cur and cur["arm"] == arm and cur["users"] == users and cur.get("rate") == rate:
            return cur
        self.end()
        start_unix, start_ns = since or (time.time(), time.perf_counter_ns())
        phase = {"index": len(self.phases) + 1, "arm": arm, "users": users, "rate": rate, "start_unix": start_unix,
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
    ids = measured_ids(d, phases)
    records = read_records(d)
    for p in phases:
        mine = [r for r in records if p["start_ns"] <= r.send_ns and (p["end_ns"] is None or r.send_ns < p["end_ns"])]
        end_ns = p["end_ns"] or max((r.end_ns or r.send_ns for r in mine), default=p["start_ns"])
        arm = ids[p["index"]]
        cell = run.cell_dir(arm, p["users"], p["index"])
        cell.mkdir(parents=True, exist_ok=True)
        lines = [r.model_copy(update={"arm": arm, "concurrency": p["users"], "repetition": p["index"]})
                 .model_dump_json() for r in mine]
        write_text_atomic(cell / RECORDS, "".join(line + "\n" for line in lines))
        measured = [r for r in mine if not r.warmup]
        # the window opens when the phase's users were all running and their warm-up was done
        warm_end = max((r.end_ns for r in mine if r.warmup and r.end_ns), default=p["start_ns"])
        ok = bool(measured)
        status = CellStatus(arm=arm, concurrency=p["users"], repetition=p["index"],
                            status="ok" if ok else "failed",
                            reason=None if ok else "no measured request was sent in this phase",
                            started_unix=p["start_unix"],
                            ended_unix=p["end_unix"] or p["start_unix"] + (end_ns - p["start_ns"]) / 1e9,
                            window_start_ns=max(p["start_ns"], warm_end), window_end_ns=end_ns,
                            requests=len(measured), errors=sum(not r.ok for r in measured))
        write_json_atomic(cell / "status.json", status.model_dump(mode="json"))
    return run


def measured_ids(d: Path, phases: list[dict]) -> dict[int, str]:
    """Each phase's arm as analysis reads it. A session that offered rates is an open-loop run: its manifest's
    profile is rewritten to that load (its digest with it), a sweep of the rates offered, and each phase's arm
    is the measured arm of its rate, '<arm>@q<rate>', one rate or several. One session is one load mode:
    closed and open phases together are refused, naming them (their records stay as they are)."""
    rates = sorted({p["rate"] for p in phases if p.get("rate")})
    if not rates:
        return {p["index"]: p["arm"] for p in phases}
    closed = [p["index"] for p in phases if not p.get("rate")]
    if closed:
        raise ValueError(f"{d}: phases {closed} ran closed loop and the others open loop (at {rates} req/s): a "
                         f"session is one load mode; offer rates from the web UI with another records directory")
    manifest = read_json(d / MANIFEST)
    load = {**manifest["profile"]["load"], "mode": "open", "rate": rates}
    profile = Profile.model_validate({**manifest["profile"], "load": load})
    if manifest.get("profile_digest") != profile.digest():   # each phase's end materializes again
        write_json_atomic(d / MANIFEST, {**manifest, "profile": profile.model_dump(mode="json"),
                                         "profile_digest": profile.digest()})
    by_setting = {(x.base, x.sampling.rate): x.id for x in profile.measured_arms()}
    return {p["index"]: by_setting[(p["arm"], p["rate"])] for p in phases}
