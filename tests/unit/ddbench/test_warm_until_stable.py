"""Warm-up until stable: windows until two in a row agree within the tolerance, or until the share of warmup_s
is spent; stable.json records each window and when; the analysis reads it and the check says whether each held."""

import json
import time

import pytest

from analysis.trust import checks, stability
from ddbench import sweep
from ddbench.core.profile import StableWarmup
from ddbench.core.records import RequestRecord, Usage
from ddbench.core.results import STABLE
from loadtests.recorder import RecordFile


def fake_windows(rates: list[float]):
    """A window function writing one request whose tokens over 1 s give the next throughput."""
    it = iter(rates)

    def window(d):
        d.mkdir(parents=True)
        tokens = int(next(it))
        f = RecordFile(d, "w")
        f.write(RequestRecord(request_id="r", arm="a", concurrency=1, repetition=0, warmup=True, prompt_id="p",
                              category="c", worker="w", user=0, max_tokens=tokens, temperature=0.0, top_p=1.0,
                              send_ns=0, send_unix_ns=time.time_ns(), end_ns=10**9, status=200,
                              usage=Usage(prompt_tokens=5, completion_tokens=tokens, total_tokens=tokens + 5),
                              chunks=[]))
        f.close()
    return window


def test_windows_run_until_two_agree(tmp_path):
    where = tmp_path / "a" / "warmup" / "c1.1"
    rec = sweep.warm_until_stable(fake_windows([50, 80, 95, 97, 200]), where, StableWarmup(within_pct=3,
                                  window_s=10), cap_s=120)
    assert rec["windows"] == [50, 80, 95, 97] and rec["stable_after_s"] is not None
    assert json.loads((where / STABLE).read_text())["windows"] == [50, 80, 95, 97]
    assert [p.name for p in sorted(where.iterdir()) if p.is_dir()] == ["w1", "w2", "w3", "w4"]


def test_a_server_that_never_settles_stops_at_its_share(tmp_path):
    where = tmp_path / "a" / "warmup" / "c4.2"
    rec = sweep.warm_until_stable(fake_windows([10, 20, 40, 80, 160, 320]), where, StableWarmup(window_s=10),
                                  cap_s=35)
    assert rec["windows"] == [10, 20, 40] and rec["stable_after_s"] is None
    (tmp_path / "b" / "warmup" / "c4.1").mkdir(parents=True)
    sweep.warm_until_stable(fake_windows([100, 101]), tmp_path / "b" / "warmup" / "c4.1", StableWarmup(window_s=1),
                            cap_s=10)
    w = stability.warmups(tmp_path).set_index("arm")
    assert (w.loc["a", "concurrency"], w.loc["a", "bring_up"], bool(w.loc["a", "stable"])) == (4, 2, False)
    assert w.loc["a", "throughputs"] == "10.0 20.0 40.0" and bool(w.loc["b", "stable"])
    found = {str(c.scope): c for c in checks._warmed_up(stability.warmups(tmp_path))}
    assert found["a C=4"].status == "fail" and "ran out of their share" in found["a C=4"].evidence
    assert found["b C=4"].status == "pass"


def test_the_profile_needs_a_cap():
    from ddbench.core.profile import load_profile

    with pytest.raises(Exception, match="warmup_until_stable needs warmup_s"):
        load_profile("cpu-tiny", ["load.warmup_until_stable={within_pct: 3}"])
    p = load_profile("cpu-tiny", ["load.warmup_s=60", "load.warmup_until_stable={within_pct: 2, window_s: 5}"])
    assert p.load.warmup_until_stable.window_s == 5
    assert p.digest() != load_profile("cpu-tiny", ["load.warmup_s=60"]).digest()
