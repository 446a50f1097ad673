"""A resume retires a cell's earlier attempt only just before the cell runs again, and a repetition it
began to run again stays marked until it ends: a slice cut anywhere loses no finished cell and never
leaves a repetition pairing cells of two slices."""

import pytest

from ddbench import reproduce
from ddbench.core.manifest import start_run
from ddbench.core.profile import load_profile
from ddbench.core.records import CellStatus
from ddbench.core.results import REDO, STATUS, RunDir, write_json_atomic


def _write(run, arm, c, r, status="ok"):
    write_json_atomic(run.cell_dir(arm, c, r) / STATUS,
                      CellStatus(arm=arm, concurrency=c, repetition=r, status=status).model_dump(mode="json"))


def _sweep(monkeypatch, run_n_cells: int | None):
    """reproduce.sweep against a stand-in run_sweep: it runs the first n cells of its todo (all when None),
    then is cut (KeyboardInterrupt) unless it ran them all."""
    def fake(profile, run_dir, cell, *, todo, prepare, gate=None, stretch=None, choose=None):
        n = len(todo) if run_n_cells is None else run_n_cells
        for arm, c, r in todo[:n]:
            d = run_dir / arm / f"c{c}-r{r}"
            prepare(d)
            write_json_atomic(d / STATUS, CellStatus(arm=arm, concurrency=c, repetition=r,
                                                     status="ok").model_dump(mode="json"))
        if n < len(todo):
            raise KeyboardInterrupt
    monkeypatch.setattr("ddbench.sweep.run_sweep", fake)


@pytest.fixture
def half_done(write_profile, tmp_path):
    """Two repetitions finished, except one failed cell in repetition 1."""
    profile = load_profile(write_profile(lambda d: d["load"].update(repetitions=2)))
    run = RunDir.create("t", root=tmp_path / "results")
    start_run(profile, "profile.yaml", run)
    for arm, c, r in profile.cells():
        _write(run, arm, c, r)
    failed = profile.cells()[0]
    _write(run, *failed, status="failed")
    return profile, run, failed


def test_a_resume_cut_before_any_cell_ran_keeps_every_finished_cell(monkeypatch, half_done):
    profile, run, failed = half_done
    _sweep(monkeypatch, run_n_cells=0)
    with pytest.raises(KeyboardInterrupt):
        reproduce.sweep(profile, run)
    for arm, c, r in profile.cells():
        assert reproduce.cell_status(run.cell_dir(arm, c, r)) is not None
    assert not any(run.path.glob("*/attempts"))
    assert {r for _, _, r in reproduce.pending_cells(profile, run)} == {failed[2]}


def test_a_repetition_cut_halfway_through_its_redo_is_redone_whole(monkeypatch, half_done):
    profile, run, failed = half_done
    _sweep(monkeypatch, run_n_cells=len([x for x in profile.cells() if x[2] == failed[2]]) - 1)
    with pytest.raises(KeyboardInterrupt):
        reproduce.sweep(profile, run)
    # every cell now says ok (one from the earlier slice), yet the repetition is still pending whole
    assert all(reproduce.cell_status(run.cell_dir(*x)).status == "ok" for x in profile.cells())
    rep = [x for x in profile.cells() if x[2] == failed[2]]
    assert reproduce.pending_cells(profile, run) == rep and (run.path / REDO).is_file()
    _sweep(monkeypatch, run_n_cells=None)
    reproduce.sweep(profile, run)
    assert reproduce.pending_cells(profile, run) == [] and not (run.path / REDO).exists()
    # the first attempt of every cell of that repetition is kept aside, the failed one among them
    arm, c, r = failed
    assert (run.path / arm / "attempts" / f"c{c}-r{r}.1" / STATUS).is_file()


def test_a_repetition_finished_before_the_cut_is_not_redone(monkeypatch, half_done):
    profile, run, failed = half_done
    later = next(x for x in profile.cells() if x[2] != failed[2])
    _write(run, *later, status="failed")
    first = [x for x in profile.cells() if x[2] == failed[2]]
    _sweep(monkeypatch, run_n_cells=len(first) + 1)   # the first repetition whole, then one cell of the next
    with pytest.raises(KeyboardInterrupt):
        reproduce.sweep(profile, run)
    assert {r for _, _, r in reproduce.pending_cells(profile, run)} == {later[2]}
    assert reproduce.read_json(run.path / REDO) == {"repetitions": [later[2]]}
