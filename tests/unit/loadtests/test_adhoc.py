"""A web UI session's phases become cells: arm, C = users, repetition = the phase's index."""

import json

import pytest

from ddbench.core.records import CellStatus, Chunk, RequestRecord, Usage
from ddbench.core.results import write_json_atomic
from loadtests.adhoc import PHASES, Phases, materialize
from loadtests.recorder import RecordFile, read_records


def rec(send_ns, warmup=False, end_ns=None):
    return RequestRecord(request_id=f"r{send_ns}", arm="adhoc", concurrency=0, repetition=1, warmup=warmup,
                         prompt_id="p", category="c", worker="w", user=0, max_tokens=4, temperature=0.0,
                         send_ns=send_ns, send_unix_ns=send_ns, chunks=[Chunk(t_ns=send_ns + 5, text="x")],
                         end_ns=end_ns or send_ns + 10, status=200, usage=Usage(prompt_tokens=1, completion_tokens=4))


def test_phases_open_close_and_name_cells(tmp_path):
    ph = Phases(tmp_path)
    first = ph.begin("ar", 2, since=(1.0, 100))
    assert ph.begin("ar", 2) is first                  # the same setting is the same phase
    ph.begin("ar", 4)
    ph.begin("linear", 4)
    ph.end()
    saved = json.loads((tmp_path / PHASES).read_text())["phases"]
    assert [(p["index"], p["arm"], p["users"]) for p in saved] == [(1, "ar", 2), (2, "ar", 4), (3, "linear", 4)]
    assert saved[0]["start_ns"] == 100 and all(p["end_ns"] for p in saved)
    assert Phases(tmp_path).current is None


def test_materialize_splits_records_by_send_time(tmp_path):
    write_json_atomic(tmp_path / "manifest.json", {"profile": {}})
    write_json_atomic(tmp_path / PHASES, {"phases": [
        {"index": 1, "arm": "ar", "users": 2, "start_unix": 10.0, "start_ns": 100, "end_unix": 11.0, "end_ns": 200},
        {"index": 2, "arm": "tree", "users": 3, "start_unix": 11.0, "start_ns": 200, "end_unix": None,
         "end_ns": None}]})
    f = RecordFile(tmp_path, "w1")
    for r in (rec(100, warmup=True, end_ns=120), rec(130), rec(150), rec(210), rec(250, end_ns=300)):
        f.write(r)
    f.close()
    run = materialize(tmp_path)
    one, two = read_records(run.cell_dir("ar", 2, 1)), read_records(run.cell_dir("tree", 3, 2))
    assert [r.send_ns for r in one] == [100, 130, 150] and [r.send_ns for r in two] == [210, 250]
    assert {(r.arm, r.concurrency, r.repetition) for r in two} == {("tree", 3, 2)}
    s1 = CellStatus.model_validate_json((run.cell_dir("ar", 2, 1) / "status.json").read_text())
    s2 = CellStatus.model_validate_json((run.cell_dir("tree", 3, 2) / "status.json").read_text())
    # the window opens after the warm-up; an open phase ends with its last request
    assert (s1.window_start_ns, s1.window_end_ns, s1.requests, s1.status) == (120, 200, 2, "ok")
    assert (s2.window_start_ns, s2.window_end_ns, s2.requests) == (200, 300, 2)
    assert materialize(tmp_path).path == run.path                 # again: the same cells, rewritten
    assert len(read_records(run.cell_dir("ar", 2, 1))) == 3


def test_materialize_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="phases.json"):
        materialize(tmp_path)
    (tmp_path / PHASES).write_text('{"phases": []}')
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        materialize(tmp_path)


def _phase(index, arm, users, rate, start, end):
    return {"index": index, "arm": arm, "users": users, "rate": rate, "start_unix": start / 1e9, "start_ns": start,
            "end_unix": end / 1e9, "end_ns": end}


def test_a_session_that_offered_rates_is_an_open_loop_run(tmp_path):
    from ddbench.core.profile import Profile, load_profile

    write_json_atomic(tmp_path / "manifest.json", {"profile": load_profile("cpu-tiny").model_dump(mode="json")})
    write_json_atomic(tmp_path / PHASES, {"phases": [_phase(1, "ar", 8, 2.0, 100, 200),
                                                     _phase(2, "ar", 8, 4.0, 200, 300)]})
    f = RecordFile(tmp_path, "w1")
    for r in (rec(130), rec(210)):
        f.write(r)
    f.close()
    run = materialize(tmp_path)
    assert [r.arm for r in read_records(run.cell_dir("ar@q2", 8, 1))] == ["ar@q2"]
    assert [r.arm for r in read_records(run.cell_dir("ar@q4", 8, 2))] == ["ar@q4"]
    m = json.loads((tmp_path / "manifest.json").read_text())
    profile = Profile.model_validate(m["profile"])
    assert (profile.load.mode, profile.load.rate) == ("open", [2.0, 4.0])
    assert m["profile_digest"] == profile.digest()
    assert profile.load_for("ar@q4").rate == 4.0


def test_one_rate_offered_is_a_sweep_of_one(tmp_path):
    from ddbench.core.profile import Profile, load_profile

    write_json_atomic(tmp_path / "manifest.json", {"profile": load_profile("cpu-tiny").model_dump(mode="json")})
    write_json_atomic(tmp_path / PHASES, {"phases": [_phase(1, "ar", 4, 2.0, 100, 200)]})
    f = RecordFile(tmp_path, "w1")
    f.write(rec(130))
    f.close()
    run = materialize(tmp_path)
    assert [r.arm for r in read_records(run.cell_dir("ar@q2", 4, 1))] == ["ar@q2"]
    assert not run.cell_dir("ar", 4, 1).exists()
    profile = Profile.model_validate(json.loads((tmp_path / "manifest.json").read_text())["profile"])
    assert (profile.load.mode, profile.load.rate) == ("open", [2.0])
    assert profile.measured().sampling_for("ar@q2").rate == 2.0


def test_a_session_is_one_load_mode(tmp_path):
    from ddbench.core.profile import load_profile

    write_json_atomic(tmp_path / "manifest.json", {"profile": load_profile("cpu-tiny").model_dump(mode="json")})
    write_json_atomic(tmp_path / PHASES, {"phases": [_phase(1, "ar", 8, None, 100, 200),
                                                     _phase(2, "ar", 8, 4.0, 200, 300)]})
    with pytest.raises(ValueError, match=r"phases \[1\] ran closed loop"):
        materialize(tmp_path)
    ph = Phases(tmp_path / "s")
    first = ph.begin("ar", 8, rate=2.0)
    assert ph.begin("ar", 8, rate=4.0) is not first      # a new rate is a new phase
