"""What a sweep does around its blocks, against stand-in servers and cells.

load.warmup_s: after a bring-up and before the first measured cell, unmeasured load shared evenly over the
(arm, concurrency) pairs about to run, in their order, each into <arm>/warmup/c<C>.<k>/ where no analysis
reads a cell; nothing happens when it is 0, and a profile without it keeps its digest. load.warmup_levels:
one whole request per user at each of those pairs, so that no measured cell is a level's first.

A time budget's gate: a repetition it refuses brings no server up and runs no cell, whether the repetition
is a block of its own (interleaved-fresh) or part of one (interleaved)."""

from __future__ import annotations

import pytest
import yaml

from ddbench import sweep
from ddbench.core import schedule
from ddbench.core.profile import load_profile
from ddbench.core.records import CellStatus
from ddbench.core.results import RunDir


class _Server:
    url, model, api_key_env = "http://127.0.0.1:9", None, None

    def exited(self):
        return None

    def stop(self):
        pass


def _profile(tmp_path, **load):
    data = {"name": "t", "backend": {"kind": "refengine"}, "models": {"target": "none", "drafter": "none"},
            "arms": [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16}],
            "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 8},
            "load": {"concurrency": [1, 4], "requests_per_user": 2, "repetitions": 2, **load}}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profile(path)


def _sweep(monkeypatch, tmp_path, profile, gate=None, ups=None):
    calls = []

    def up(p, arms, run_dir, **kw):
        if ups is not None:
            ups.append(arms)
        return {a: _Server() for a in arms}, {}
    monkeypatch.setattr(sweep.bringup, "up_together", up)

    def cell(workload, load, *, cell_dir, arm, concurrency, repetition, unmeasured=False, **kw):
        calls.append((arm, concurrency, repetition, unmeasured, load.duration_s, load.warmup_requests, cell_dir))
        cell_dir.mkdir(parents=True, exist_ok=True)
        return CellStatus(arm=arm, concurrency=concurrency, repetition=repetition, status="ok")

    sweep.run_sweep(profile, tmp_path / "run", cell, telemetry_interval_s=60, gate=gate)
    return calls


def test_each_bring_up_is_followed_by_warm_up_load_over_the_pairs_about_to_run(monkeypatch, tmp_path):
    profile = _profile(tmp_path, warmup_s=20, schedule="interleaved-fresh")   # a bring-up per repetition
    calls = _sweep(monkeypatch, tmp_path, profile)
    blocks = schedule.blocks(profile)
    assert len(blocks) == 2
    at = 0
    for k, block in enumerate(blocks, start=1):
        pairs = list(dict.fromkeys((a, c) for a, c, _ in block.cells))
        warm, measured = calls[at:at + len(pairs)], calls[at + len(pairs):at + len(pairs) + len(block.cells)]
        at += len(pairs) + len(block.cells)
        assert [(a, c) for a, c, *_ in warm] == pairs
        assert all(w[3] and w[4] == 20 / len(pairs) and w[5] == 0 for w in warm)
        assert [w[6] for w in warm] == [tmp_path / "run" / a / "warmup" / f"c{c}.{k}" for a, c in pairs]
        assert [(a, c, r) for a, c, r, *_ in measured] == list(block.cells)
        assert not any(m[3] for m in measured)
    assert at == len(calls)
    # the warm-ups are not cells of the run
    cells = {(a, c, r) for a, c, r, _ in RunDir(tmp_path / "run").cells()}
    assert cells == set(profile.cells())


def test_no_warm_up_when_warmup_s_is_zero_and_no_change_to_the_digest(monkeypatch, tmp_path):
    profile = _profile(tmp_path)
    calls = _sweep(monkeypatch, tmp_path, profile)
    assert not any(c[3] for c in calls) and len(calls) == len(profile.cells())
    assert "warmup_s" not in profile.model_dump(mode="json")["load"]
    assert _profile(tmp_path, warmup_s=0).digest() == profile.digest() != _profile(tmp_path, warmup_s=5).digest()


@pytest.mark.parametrize("warmup_s", [0, 12])
def test_warmup_levels_serves_every_pair_one_whole_request_per_user_before_it_is_measured(monkeypatch, tmp_path,
                                                                                          warmup_s):
    # the first-block effect: a server is slow at a level until every shape of it (each batch size, each length
    # up to max_tokens) has run once; a time-shared window may end before any request does, a level round not
    profile = _profile(tmp_path, warmup_s=warmup_s, warmup_levels=True, schedule="interleaved-fresh",
                       unit_s=None)
    shaped, order = set(), []

    def up(p, arms, run_dir, **kw):
        shaped.clear()   # a fresh server has run no shape
        return {a: _Server() for a in arms}, {}
    monkeypatch.setattr(sweep.bringup, "up_together", up)

    def cell(workload, load, *, cell_dir, arm, concurrency, repetition, unmeasured=False, **kw):
        whole = load.duration_s is None and load.unit_seconds(concurrency) is None
        order.append((arm, concurrency, repetition, unmeasured, load.per_user(concurrency), whole,
                      (arm, concurrency) in shaped, cell_dir))
        if whole:
            shaped.add((arm, concurrency))
        cell_dir.mkdir(parents=True, exist_ok=True)
        return CellStatus(arm=arm, concurrency=concurrency, repetition=repetition, status="ok")

    sweep.run_sweep(profile, tmp_path / "run", cell, telemetry_interval_s=60)
    measured = [o for o in order if not o[3]]
    assert [o[:3] for o in measured] == list(profile.cells()) and all(o[6] for o in measured)
    levels = [o for o in order if o[3] and o[7].name == "level"]
    assert all(o[4] == 1 and o[5] and o[2] == 0 for o in levels)
    assert [(o[0], o[1], o[7]) for o in levels] == [
        (a, c, tmp_path / "run" / a / "warmup" / f"c{c}.{k}" / "level")
        for k in (1, 2) for a, c in dict.fromkeys((a, c) for a, c, r in profile.cells() if r == k)]
    assert len(order) - len(levels) - len(measured) == (len(levels) if warmup_s else 0)   # the timed windows
    off = _profile(tmp_path, warmup_s=warmup_s, schedule="interleaved-fresh")
    assert "warmup_levels" not in off.model_dump(mode="json")["load"] and off.digest() != profile.digest()


@pytest.mark.parametrize("mode, bring_ups", [("interleaved-fresh", 2), ("interleaved", 1)])
def test_a_repetition_the_gate_refuses_runs_nothing(monkeypatch, tmp_path, mode, bring_ups):
    profile = _profile(tmp_path, repetitions=3, schedule=mode)
    asked, ups = [], []

    def gate(r):
        asked.append(r)
        return r <= 2
    calls = _sweep(monkeypatch, tmp_path, profile, gate=gate, ups=ups)
    assert [(a, c, r) for a, c, r, *_ in calls] == [x for x in profile.cells() if x[2] <= 2]
    assert len(ups) == bring_ups and 3 in asked


def test_the_rounds_schedule_runs_one_stretch_per_repetition_and_level(monkeypatch, tmp_path):
    profile = _profile(tmp_path, schedule="rounds")
    stretches = []

    def stretch(targets, load, *, concurrency, repetition, around=None):
        stretches.append((concurrency, repetition, [t[0] for t in targets]))
        for _, _, _, cell_dir, _ in targets:
            cell_dir.mkdir(parents=True, exist_ok=True)
        return {t[0]: CellStatus(arm=t[0], concurrency=concurrency, repetition=repetition, status="ok",
                                 busy_ns=1) for t in targets}

    monkeypatch.setattr(sweep.bringup, "up_together", lambda p, arms, run_dir, **kw: ({a: _Server() for a in arms}, {}))
    out = sweep.run_sweep(profile, tmp_path / "run", cell=None, telemetry_interval_s=60, stretch=stretch)
    assert stretches == [(1, 1, ["ar", "linear-b16"]), (4, 1, ["ar", "linear-b16"]),
                         (1, 2, ["linear-b16", "ar"]), (4, 2, ["linear-b16", "ar"])]
    assert {a: len(s) for a, s in out.items()} == {"ar": 4, "linear-b16": 4}
    # the stretch's telemetry is every cell's: each cell directory has its copy
    assert all((tmp_path / "run" / a / f"c{c}-r{r}" / "telemetry.jsonl").is_file()
               for a, c, r in profile.cells())
    with pytest.raises(ValueError, match="stretch runner"):
        sweep.run_sweep(profile, tmp_path / "run2", cell=None)


def test_a_rounds_arm_that_is_down_fails_its_cells_and_the_others_run(monkeypatch, tmp_path):
    profile = _profile(tmp_path, schedule="rounds")
    seen = []

    def stretch(targets, load, *, concurrency, repetition, around=None):
        seen.append([t[0] for t in targets])
        return {t[0]: CellStatus(arm=t[0], concurrency=concurrency, repetition=repetition, status="ok")
                for t in targets}

    monkeypatch.setattr(sweep.bringup, "up_together",
                        lambda p, arms, run_dir, **kw: ({"ar": _Server()}, {"linear-b16": "killed before ready"}))
    out = sweep.run_sweep(profile, tmp_path / "run", cell=None, telemetry_interval_s=60, stretch=stretch)
    assert seen == [["ar"]] * 4
    assert all(s.status == "failed" and "killed before ready" in s.reason for s in out["linear-b16"])
