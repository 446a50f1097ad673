"""up_together: servers started beside each other may race for GPU memory; an arm that failed in the
parallel start is tried once more alone, and one that fails twice is reported with both reasons."""

from __future__ import annotations

import threading

from containers import sweep
from containers.ready import BringUpError


class _Server:
    def __init__(self, arm):
        self.arm = arm

    def stop(self):
        pass


def _fake_up(fail_beside_others: set[str], fail_always: set[str], calls: list):
    lock = threading.Lock()

    def up(profile, arm, run_dir, **kw):
        with lock:
            calls.append(arm)
            crowded = len(calls) <= 3   # the first three calls are the alone + parallel starts
        if arm in fail_always or (arm in fail_beside_others and crowded):
            raise BringUpError(f"{arm}: Not enough memory")
        return _Server(arm)
    return up


def test_an_arm_that_failed_beside_others_comes_up_alone(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(sweep.bringup, "up", _fake_up({"c"}, set(), calls))
    servers, down = sweep.up_together(None, ["a", "b", "c"], tmp_path)
    assert sorted(servers) == ["a", "b", "c"] and down == {}
    assert calls[0] == "a" and calls[-1] == "c" and len(calls) == 4


def test_an_arm_that_fails_alone_too_is_down_with_both_reasons(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(sweep.bringup, "up", _fake_up(set(), {"b"}, calls))
    servers, down = sweep.up_together(None, ["a", "b", "c"], tmp_path)
    assert sorted(servers) == ["a", "c"]
    assert list(down) == ["b"] and "twice" in down["b"] and down["b"].count("Not enough memory") == 2


def test_the_first_arm_is_not_retried(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(sweep.bringup, "up", _fake_up(set(), {"a"}, calls))
    servers, down = sweep.up_together(None, ["a", "b"], tmp_path)
    assert calls.count("a") == 1 and list(down) == ["a"] and "twice" not in down["a"]
