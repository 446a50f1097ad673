"""The sampling axis of the profile: the old scalar form and the list form, measured arms, and the schedule
that runs every arm under every setting against one server per arm."""

from __future__ import annotations

import pytest

from ddbench.core import schedule
from ddbench.core.profile import Profile, ProfileError, load_profile

HOT = {"temperature": 0.7, "top_p": 0.95}


def _profile(**workload) -> Profile:
    d = load_profile("cpu-tiny").model_dump(mode="json")
    d["workload"] = {k: v for k, v in d["workload"].items() if k not in ("temperature", "top_p", "top_k")}
    d["workload"].update(workload)
    d["load"]["repetitions"] = 2
    return Profile.model_validate(d)


def test_the_scalar_form_is_one_setting_and_keeps_arm_ids_and_digest():
    shipped = load_profile("cpu-tiny")
    assert [s.label for s in shipped.workload.settings()] == ["t0"]
    assert shipped.measured_arms() == shipped.arms and shipped.measured() is shipped
    assert "sampling" not in shipped.model_dump()["workload"]     # digests of older runs stay valid
    hot = _profile(**HOT)
    assert [a.id for a in hot.measured_arms()] == [a.id for a in hot.arms]
    assert hot.sampling_for("ar").text == "T=0.7, top-p 0.95"


def test_the_list_form_measures_every_arm_under_every_setting():
    p = _profile(sampling=[{"temperature": 0}, HOT])
    ids = [a.id for a in p.measured_arms()]
    assert ids == ["ar@t0", "linear-b16@t0", "chain-b15@t0", "tree-b15-k8@t0", "ar@t0.7-p0.95",
                   "linear-b16@t0.7-p0.95", "chain-b15@t0.7-p0.95", "tree-b15-k8@t0.7-p0.95"]
    arm = p.arm("tree-b15-k8@t0.7-p0.95")
    assert (arm.kind, arm.budget, arm.topk, arm.server) == ("tree", 15, 8, "tree-b15-k8")
    w = p.workload_for("tree-b15-k8@t0.7-p0.95")
    assert (w.temperature, w.top_p, w.top_k, w.sampling) == (0.7, 0.95, None, None)
    assert p.workload_for("ar@t0").temperature == 0
    assert [a.id for a in p.measured().arms] == ids


@pytest.mark.parametrize("workload, message", [
    ({"temperature": 0.7, "sampling": [HOT]}, "not both"),
    ({"sampling": [{"temperature": 0}, {"temperature": 0, "top_p": 0.9}]}, "repeat"),
    ({"sampling": []}, "at least 1"),
])
def test_bad_sampling_is_refused_naming_the_field(tmp_path, workload, message):
    import yaml

    d = load_profile("cpu-tiny").model_dump(mode="json")
    d["workload"] = {k: v for k, v in d["workload"].items() if k != "temperature"} | workload
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(ProfileError, match=message) as e:
        load_profile(path)
    assert str(path) in str(e.value) and "workload" in str(e.value)


def test_schedule_keeps_one_server_per_arm_and_pairs_adjacent():
    p = _profile(sampling=[{"temperature": 0}, HOT])
    (block,) = schedule.blocks(p, "interleaved")
    assert block.arms == ("ar", "linear-b16", "chain-b15", "tree-b15-k8")
    first = [a for a, c, r in block.cells if (c, r) == (1, 1)]
    assert first == [a.id for a in p.measured_arms()]     # a setting's arms run next to each other
    assert schedule.bring_ups(p, "interleaved-fresh") == 4 * 2       # per repetition, not per setting
    per_rep = schedule.blocks(p, "per-repetition")
    assert [b.arms for b in per_rep[:4]] == [("ar",), ("linear-b16",), ("chain-b15",), ("tree-b15-k8",)]
    assert set(per_rep[0].cells) == {(f"ar@{s}", c, 1) for s in ("t0", "t0.7-p0.95") for c in (1, 4)}
    assert len(schedule.order(p, "arm-major")) == len(schedule.order(p)) == 8 * 2 * 2
