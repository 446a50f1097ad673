from ddbench.core import settings
from ddbench.core.profile import load_profile


def deployable(d):
    d["runtime"].update(overlap_scheduler=True, attention_backend="triton",
                        attention_backend_reason="the build carries no FA3")
    d["arms"].append({"id": "tree-b15-k8-no-overlap", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8,
                      "overlap_scheduler": False, "ablation": "overlap held off: DDTree's synchronous path"})


def by_name(profile, arm):
    return {s.name: s for s in settings.arm_settings(profile, profile.arm(arm))}


def test_each_arm_gets_what_its_build_allows(write_profile):
    p = load_profile(write_profile(deployable))
    ar, tree, ablation = by_name(p, "ar"), by_name(p, "tree-b15-k8"), by_name(p, "tree-b15-k8-no-overlap")
    assert (ar["overlap scheduler"].value, ar["page size"].value) == ("on", settings.DEFAULT)
    # SGLang runs DFLASH and DDTree on its overlapped V2 worker: as deployed, they overlap too
    assert tree["overlap scheduler"].value == "on" and "V2 speculative worker" in tree["overlap scheduler"].reason
    assert tree["page size"].value == "1"
    assert ablation["overlap scheduler"].value == "off"
    assert ablation["overlap scheduler"].reason == "overlap held off: DDTree's synchronous path"
    assert ar["attention backend"].reason == "the build carries no FA3"


def test_the_switch_held_off_for_every_arm_is_one_setting(write_profile):
    p = load_profile(write_profile(lambda d: d["runtime"].update(overlap_scheduler=False)))
    assert {by_name(p, a.id)["overlap scheduler"].value for a in p.arms} == {"off"}


def test_one_line_per_setting_that_differs(write_profile):
    lines = settings.differing_lines(settings.record(load_profile(write_profile(deployable))))
    assert len(lines) == 2   # overlap and page size differ; attention and graphs are equal
    overlap = next(x for x in lines if x.startswith("overlap scheduler:"))
    assert "on for ar (SGLang's default)" in overlap
    assert "on for linear-b16, chain-b15, tree-b15-k8 (SGLang's default (the V2 speculative worker))" in overlap
    assert "off for tree-b15-k8-no-overlap (overlap held off: DDTree's synchronous path)" in overlap
    page = next(x for x in lines if x.startswith("page size:"))
    assert "1 for chain-b15, tree-b15-k8, tree-b15-k8-no-overlap" in page


def test_nothing_differs_when_every_switch_is_held_equal(write_profile):
    p = load_profile(write_profile(lambda d: d["runtime"].update(page_size=1)))
    assert settings.differing_lines(settings.record(p)) == []


def test_the_reference_engine_has_no_build_settings(write_profile):
    p = load_profile(write_profile(lambda d: d.update(backend={"kind": "refengine"}, placement={"device": "cpu"})))
    assert all(settings.arm_settings(p, a) == [] for a in p.arms)


def test_a_run_records_its_arms_settings_and_page_one_reads_the_record(write_profile, tmp_path):
    from ddbench.core.manifest import build_manifest
    from ddbench.core.results import RunDir

    p = load_profile(write_profile(deployable))
    m = build_manifest(p, "profile.yaml", RunDir(tmp_path / "run"))
    assert m["arm_settings"]["ar"][0] == {"name": "overlap scheduler", "value": "on",
                                          "reason": "SGLang's default"}
    assert settings.differing_lines(m["arm_settings"]) == settings.differing_lines(settings.record(p))
    assert settings.differing_lines({}) == []   # a run recorded before the field: nothing claimed
