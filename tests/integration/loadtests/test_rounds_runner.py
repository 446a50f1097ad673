"""The rounds runner against two real null servers: every arm's unit in turn, rotated each round, the same prompts
for every arm of a round, one record file per arm, and each arm's busy time the sum of its own units."""

import json

from ddbench.core.profile import Load, Workload
from ddbench.core.records import RequestRecord
from ddbench.core.results import record_files
from loadtests.rounds import Target, rotation, run_stretch

# the most a unit's users take to start sending once the unit is handed to them (threads on a busy 2-core host)
HANDOFF_NS = 20e6


def test_rotation_puts_every_arm_in_every_place():
    arms = ["a", "b", "c"]
    orders = [rotation(arms, j) for j in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    for place in range(3):
        assert sorted(o[place] for o in orders) == arms


def stretch(null_server, tmp_path, slow_itl_ms: int, load: Load):
    """One stretch at C=2 of a fast (2 ms a chunk) and a slow null server: the statuses and each arm's records."""
    fast, slow = null_server(ttft_ms=5, itl_ms=2, tokens=16), null_server(ttft_ms=5, itl_ms=slow_itl_ms, tokens=16)
    work = Workload(prompt_set="loadtests/prompts/study5.jsonl", max_tokens=16)
    targets = [Target("fast", fast.url, tmp_path / "fast", work, "null-model"),
               Target("slow", slow.url, tmp_path / "slow", work, "null-model")]
    statuses = run_stretch(targets, load, concurrency=2, repetition=1)
    return statuses, {t.arm: [RequestRecord.model_validate_json(line) for f in record_files(t.cell_dir)
                              for line in f.read_text().splitlines()] for t in targets}


def test_a_stretch_interleaves_units_and_times_each_arm_on_its_own(null_server, tmp_path):
    statuses, recs = stretch(null_server, tmp_path, 6,
                             Load(concurrency=[2], requests_per_user=3, warmup_requests=1, schedule="rounds"))
    for arm, rs in recs.items():
        assert len(rs) == 2 * 4 and sorted({r.round for r in rs}) == [0, 1, 2, 3]
        assert [r.warmup for r in rs if r.round == 0] == [True, True]
        assert statuses[arm].status == "ok" and statuses[arm].requests == 6
        # busy time: the measured units only, each from its first send to its last end (the runner's clock
        # brackets them a little wider)
        units = {}
        for r in rs:
            if not r.warmup:
                lo, hi = units.get(r.round, (r.send_ns, r.end_ns))
                units[r.round] = (min(lo, r.send_ns), max(hi, r.end_ns))
        inside = sum(hi - lo for lo, hi in units.values())
        assert inside <= statuses[arm].busy_ns <= inside * 1.5
    # the same prompts to both arms in a round
    for j in range(4):
        assert sorted(r.prompt_id for r in recs["fast"] if r.round == j) == \
            sorted(r.prompt_id for r in recs["slow"] if r.round == j)
    # units alternate: in round 0 fast goes first, in round 1 slow does, and no two units overlap
    first = {j: min((min(r.send_ns for r in recs[a] if r.round == j), a) for a in recs)[1] for j in range(4)}
    assert first == {0: "fast", 1: "slow", 2: "fast", 3: "slow"}
    spans = sorted((min(r.send_ns for r in recs[a] if r.round == j), max(r.end_ns for r in recs[a] if r.round == j))
                   for a in recs for j in range(4))
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))
    # the slower server's busy time is the longer, in proportion to its chunk gap
    assert statuses["slow"].busy_ns > 1.8 * statuses["fast"].busy_ns
    assert json.loads((tmp_path / "fast" / "status.json").read_text())["busy_ns"] == statuses["fast"].busy_ns


def test_a_block_unit_keeps_each_user_sending_for_its_seconds(null_server, tmp_path):
    from loadtests.rounds import block_slot
    statuses, recs = stretch(null_server, tmp_path, 8, Load(concurrency=[2], requests_per_user=2, warmup_requests=0,
                                                            schedule="rounds", unit_s={2: 0.6}))
    for arm, rs in recs.items():
        assert statuses[arm].status == "ok" and statuses[arm].requests == len(rs)
        for j in (0, 1):
            for u in (0, 1):
                mine = sorted((r for r in rs if r.round == j and r.user == u), key=lambda r: r.send_ns)
                # back to back, the last one sent before the block's 0.6 s were up and ended after them; the
                # block's clock starts as the unit is handed to its users, a moment before the first request leaves
                assert len(mine) >= 2
                assert all(b.send_ns >= a.end_ns for a, b in zip(mine, mine[1:], strict=False))
                first = min(r.send_ns for r in rs if r.round == j)
                assert mine[-1].send_ns - first < 0.6e9 <= mine[-1].end_ns - first + HANDOFF_NS
    # the faster server gets through more requests in the same seconds, along the same prompt sequence
    assert len(recs["fast"]) > 1.5 * len(recs["slow"])
    def sequence(arm, j, u):
        return [r.prompt_id for r in sorted((r for r in recs[arm] if r.round == j and r.user == u),
                                            key=lambda r: r.send_ns)]
    for j in (0, 1):
        for u in (0, 1):
            slow = sequence("slow", j, u)
            assert sequence("fast", j, u)[:len(slow)] == slow
    assert sequence("fast", 0, 0)[0] != sequence("fast", 1, 0)[0]   # each round opens with its own prompts
    assert block_slot(1, 1, 2, 2) == 1 + (16 + 2) * 2
