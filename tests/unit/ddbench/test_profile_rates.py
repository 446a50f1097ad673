"""The rate axis of the profile: load.rate as one number or a list to sweep, open loop only; each arm measured at
each offered rate ('<arm>@q<rate>'), each cell's load at its one rate, and arms paired only at equal rates."""

from __future__ import annotations

import pytest
import yaml

from ddbench.core import schedule
from ddbench.core.profile import Profile, ProfileError, load_profile


def _open(rate, **workload) -> Profile:
    d = load_profile("cpu-tiny").model_dump(mode="json")
    d["load"].update(mode="open", rate=rate, repetitions=2, schedule="interleaved", duration_s=5,
                     requests_per_user=None)
    d["load"].pop("budget_s", None)
    if "sampling" in workload:
        d["workload"] = {k: v for k, v in d["workload"].items() if k not in ("temperature", "top_p", "top_k")}
    d["workload"].update(workload)
    return Profile.model_validate(d)


def test_one_rate_keeps_the_arms_and_a_list_measures_every_arm_at_every_rate():
    one = _open(4.0)
    assert one.measured_arms() == one.arms and one.load_for("ar").rate == 4.0
    # a list is a sweep, even of one rate (a web UI session that offered one)
    assert [a.id for a in _open([4.0]).measured_arms()][0] == "ar@q4" and _open([4.0]).load_for("ar@q4").rate == 4.0
    p = _open([2, 4.5])
    ids = [a.id for a in p.measured_arms()]
    assert ids == ["ar@q2", "linear-b16@q2", "chain-b15@q2", "tree-b15-k8@q2",
                   "ar@q4.5", "linear-b16@q4.5", "chain-b15@q4.5", "tree-b15-k8@q4.5"]
    assert p.arm("tree-b15-k8@q4.5").server == "tree-b15-k8"
    assert p.load_for("tree-b15-k8@q4.5").rate == 4.5 and p.load_for("ar@q2").rate == 2
    assert p.sampling_for("ar@q2").label == "t0-q2" and "2 req/s offered" in p.sampling_for("ar@q2").text
    assert p.sampling_for("ar@q2") == p.sampling_for("tree-b15-k8@q2") != p.sampling_for("ar@q4.5")
    # every measured arm's cells, its base arm's server; one bring-up per server
    assert {a for a, _, _ in schedule.order(p)} == set(ids) and schedule.bring_ups(p) == 4


def test_rates_and_sampling_settings_cross():
    p = _open([2, 4], sampling=[{"temperature": 0}, {"temperature": 0.7}])
    ids = [a.id for a in p.measured_arms()]
    assert ids[:2] == ["ar@t0-q2", "linear-b16@t0-q2"] and "tree-b15-k8@t0.7-q4" in ids and len(ids) == 16
    assert p.workload_for("ar@t0.7-q4").temperature == 0.7 and p.load_for("ar@t0.7-q4").rate == 4


def test_a_rate_list_comes_from_the_command_line(tmp_path):
    path = tmp_path / "open.yaml"
    path.write_text(yaml.safe_dump(_open(2.0).model_dump(mode="json")))
    p = load_profile(path, ["load.rate=[2,4,8,16]"])
    assert p.load.rates() == [2, 4, 8, 16] and len(p.measured_arms()) == 16


@pytest.mark.parametrize("load, message", [
    ({"mode": "closed", "rate": [2, 4]}, "open-loop sweep"),
    ({"mode": "open", "rate": [2, 2]}, "none repeated"),
    ({"mode": "open", "rate": [2, 0]}, "greater than 0"),
    ({"mode": "open", "rate": []}, "one or more"),
])
def test_bad_rates_are_refused_naming_the_field(tmp_path, load, message):
    d = load_profile("cpu-tiny").model_dump(mode="json")
    d["load"].update(load)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(ProfileError, match=message) as e:
        load_profile(path)
    assert str(path) in str(e.value) and "load" in str(e.value)
