"""up_together: servers started beside each other may race (a port, a compile cache); an arm that failed
in the parallel start is tried once more alone, and one that fails twice is reported with both reasons.
SGLang servers sharing a GPU start one at a time, each sized to its share of the GPU."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from containers import bringup, gpu_memory
from containers.ready import BringUpError
from ddbench.core.profile import load_profile

GIB = 2 ** 30
NO_GPU = SimpleNamespace(backend=SimpleNamespace(kind="refengine"))


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
    monkeypatch.setattr(bringup, "up", _fake_up({"c"}, set(), calls))
    servers, down = bringup.up_together(NO_GPU, ["a", "b", "c"], tmp_path)
    assert sorted(servers) == ["a", "b", "c"] and down == {}
    assert calls[0] == "a" and calls[-1] == "c" and len(calls) == 4


def test_an_arm_that_fails_alone_too_is_down_with_both_reasons(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(bringup, "up", _fake_up(set(), {"b"}, calls))
    servers, down = bringup.up_together(NO_GPU, ["a", "b", "c"], tmp_path)
    assert sorted(servers) == ["a", "c"]
    assert list(down) == ["b"] and "twice" in down["b"] and down["b"].count("Not enough memory") == 2


def test_the_first_arm_is_not_retried(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(bringup, "up", _fake_up(set(), {"a"}, calls))
    servers, down = bringup.up_together(NO_GPU, ["a", "b"], tmp_path)
    assert calls.count("a") == 1 and list(down) == ["a"] and "twice" not in down["a"]


def test_sglang_servers_sharing_a_gpu_start_one_at_a_time_each_sized_to_its_share(monkeypatch, tmp_path):
    monkeypatch.setenv("DDBENCH_TWIN_DIR", str(tmp_path))
    profile = load_profile("h200-twin8b-sglang")          # 5 arms, one share each of one GPU
    share = profile.runtime.mem_fraction_static
    free = [140 * GIB]
    started = []

    def up(p, arm, run_dir, note=None, **kw):
        started.append((arm, p.runtime.mem_fraction_static, note))
        free[0] -= 26 * GIB                                  # this server's weights, pool and graphs
        return _Server(arm)

    monkeypatch.setattr(gpu_memory, "read_memory", lambda gpus: (free[0], 140 * GIB))
    monkeypatch.setattr(bringup, "up", up)
    servers, down = bringup.up_together(profile, [a.id for a in profile.arms], tmp_path)
    assert down == {} and [a for a, _, _ in started] == [a.id for a in profile.arms]
    # each gets share x 140 GiB of what is free at its start: 140, 114, 88, 62, 36 GiB
    frees = [140, 114, 88, 62, 36][:len(profile.arms)]
    assert [f for _, f, _ in started] == [share] + [round(share * 140 / f, 4) for f in frees[1:]]
    assert f"share {share:g} of the GPU" in started[1][2] and "114.0 GiB free" in started[1][2]


def test_a_share_the_gpu_no_longer_has_leaves_that_arm_down_saying_why(monkeypatch, tmp_path):
    monkeypatch.setenv("DDBENCH_TWIN_DIR", str(tmp_path))
    profile = load_profile("h200-twin8b-sglang")
    monkeypatch.setattr(gpu_memory, "read_memory", lambda gpus: (20 * GIB, 140 * GIB))
    monkeypatch.setattr(bringup, "up", lambda p, arm, run_dir, note=None, **kw: _Server(arm))
    servers, down = bringup.up_together(profile, ["ar", "linear-b16"], tmp_path)
    assert servers == {} and set(down) == {"ar", "linear-b16"}
    want = profile.runtime.mem_fraction_static * 140
    assert f"{want:.1f} GiB" in down["ar"] and "only 20.0 GiB are free" in down["ar"]
