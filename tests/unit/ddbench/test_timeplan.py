"""reproduce --dry-run's time plan: bring-ups from the arms' ready_s, a repetition from the union of its cells'
spans (side-by-side cells once), a bring-up's level rounds from their records, paid once or per repetition as
the schedule brings servers up, against the budget; what was never recorded is said to be unknown."""

import json

from ddbench import timeplan
from ddbench.core.profile import load_profile
from ddbench.core.records import RequestRecord, Usage
from loadtests.recorder import RecordFile


def earlier_run(root, name, arms, ready, reps, cell_s):
    run = root / name / "20261201T000000Z-abcdef"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    for arm in arms:
        (run / arm).mkdir()
        (run / arm / "status.json").write_text(json.dumps({"arm": arm, "status": "up", "ready_s": ready}))
        for r in range(1, reps + 1):
            cell = run / arm / f"c1-r{r}"
            cell.mkdir()
            t0 = 1000.0 * r   # every arm's cell of a repetition side by side, as a rounds stretch runs them
            cell.joinpath("status.json").write_text(json.dumps(
                {"arm": arm, "concurrency": 1, "repetition": r, "status": "ok", "started_unix": t0,
                 "ended_unix": t0 + cell_s}))


def test_a_rounds_plan_pays_its_bring_ups_once_and_counts_side_by_side_cells_once(tmp_path):
    p = load_profile("h100-twin8b-sglang")
    earlier_run(tmp_path, p.name, ["ar", "linear-b16", "tree-b15-k8"], ready=60.0, reps=2, cell_s=100.0)
    assert timeplan.repetition_seconds(list((tmp_path / p.name).glob("*"))) == [100.0, 100.0]
    lines = timeplan.plan(p, tmp_path)
    assert "bring-ups: 3 in 1 block(s) (ar 60 s, linear-b16 60 s, tree-b15-k8 60 s)" in lines
    up_front = 3 * 60 + p.load.warmup_s
    assert f"up front: {up_front:.0f} s of bring-up and warm-up; each repetition 100 s" in " ".join(lines)
    # the profile resolves: its first 3 repetitions, then stretches where a target is open, inside the budget
    assert lines[-1].startswith(f"resolve: the first 3 repetitions about {up_front + 300:.0f} s, then stretches go "
                                "to the levels whose targets are open (9 target(s) over 3 level(s)) until every one "
                                f"is met or {p.load.budget_s:g} s are spent")
    lines = timeplan.plan(p.model_copy(update={"load": p.load.model_copy(update={"resolve": False})}), tmp_path)
    fit = int((p.load.budget_s - up_front) // 100)
    assert lines[-1].startswith(f"budget {p.load.budget_s:g} s: {min(fit, p.load.repetitions)} of "
                                f"{p.load.repetitions} repetitions")


def test_a_fresh_schedule_pays_its_bring_ups_each_repetition(tmp_path):
    p = load_profile("cpu-tiny")   # interleaved-fresh: every server up again each repetition
    earlier_run(tmp_path, p.name, [a.id for a in p.arms], ready=5.0, reps=1, cell_s=50.0)
    lines = timeplan.plan(p, tmp_path)
    assert "up front: 0 s of bring-up and warm-up; each repetition 70 s with its own" in " ".join(lines)


def test_what_was_never_recorded_is_unknown(tmp_path):
    lines = timeplan.plan(load_profile("cpu-tiny"), tmp_path)
    assert lines[0].startswith("no earlier run of cpu-tiny")
    assert lines[-1] == "a repetition's cells: never recorded here"


def level_round(run, arm, c, k, send_s, end_s):
    d = run / arm / "warmup" / f"c{c}.{k}" / "level"
    d.mkdir(parents=True)
    f = RecordFile(d, "w")
    for user in range(c):
        f.write(RequestRecord(request_id=f"{arm}-{user}", arm=arm, concurrency=c, repetition=0, warmup=True,
                              prompt_id="p", category="c", worker="w", user=user, max_tokens=8, temperature=0.0,
                              send_ns=int(send_s * 1e9), send_unix_ns=0, end_ns=int(end_s * 1e9), status=200,
                              usage=Usage(prompt_tokens=5, completion_tokens=8, total_tokens=13), chunks=[]))
    f.close()


def test_the_level_rounds_are_timed_from_their_records_and_paid_with_each_bring_up(tmp_path):
    p = load_profile("h100-twin8b-sglang")
    p = p.model_copy(update={"load": p.load.model_copy(update={"warmup_levels": True})})
    arms = ["ar", "linear-b16", "tree-b15-k8"]
    earlier_run(tmp_path, p.name, arms, ready=60.0, reps=2, cell_s=100.0)
    run = next((tmp_path / p.name).glob("*"))
    assert "a bring-up's level rounds: never recorded here" in timeplan.plan(p, tmp_path)
    for i, arm in enumerate(arms):   # 2 s at C=1 and 5 s at C=32 for each arm: 21 s a bring-up
        level_round(run, arm, 1, 1, 10 * i, 10 * i + 2)
        level_round(run, arm, 32, 1, 10 * i + 3, 10 * i + 8)
    assert timeplan.level_seconds([run]) == 21.0
    lines = timeplan.plan(p, tmp_path)
    assert "a bring-up's level rounds: 21 s (median)" in lines
    assert any(x.startswith("unmeasured warm-up after each of 1 bring-up(s): ")
               and x.endswith("then one whole request per user at each arm and C")
               for x in lines)
    up_front = 3 * 60 + p.load.warmup_s + 21
    assert f"up front: {up_front:.0f} s of bring-up and warm-up; each repetition 100 s" in " ".join(lines)
