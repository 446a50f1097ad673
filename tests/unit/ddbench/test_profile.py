import pytest

from ddbench.core.profile import PROFILES_DIR, ProfileError, load_profile


def error_of(path) -> str:
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    return str(e.value)


def test_good_profile_loads(write_profile):
    p = load_profile(write_profile())
    assert [a.id for a in p.arms] == ["ar", "linear-b16", "chain-b15", "tree-b15-k8"]
    assert p.arm("chain-b15").tree_budget == 15 and p.arm("chain-b15").tree_topk == 1
    assert len(p.cells()) == 4 * 2 * 1


def test_unknown_key_names_file_and_field(write_profile):
    path = write_profile(lambda d: d["workload"].update(max_token=5))
    msg = error_of(path)
    assert str(path) in msg and "workload.max_token: unknown key" in msg


def test_unknown_top_level_key(write_profile):
    assert "arm: unknown key" in error_of(write_profile(lambda d: d.update(arm=[])))


def test_duplicate_arm_ids(write_profile):
    path = write_profile(lambda d: d["arms"].append({"id": "ar", "kind": "ar"}))
    assert "arm ids must be unique" in error_of(path) and "['ar']" in error_of(path)


def test_chain_with_topk_4_points_at_the_arm(write_profile):
    path = write_profile(lambda d: d["arms"][2].update(topk=4))
    msg = error_of(path)
    assert "arms[2] (arm 'chain-b15')" in msg and "top-k 1" in msg


def test_chain_budget_must_be_block_minus_one(write_profile):
    msg = error_of(write_profile(lambda d: d["arms"][2].update(budget=7)))
    assert "arms[2]" in msg and "block_size - 1 = 15" in msg


def test_tree_budget_zero(write_profile):
    msg = error_of(write_profile(lambda d: d["arms"][3].update(budget=0)))
    assert "arms[3].budget" in msg and "greater than or equal to 1" in msg


@pytest.mark.parametrize("topk,budget", [(1, 15), (16, 15)])
def test_tree_topk_bounds(write_profile, topk, budget):
    msg = error_of(write_profile(lambda d: d["arms"][3].update(topk=topk, budget=budget)))
    assert "arms[3] (arm 'tree-b15-k8')" in msg and "2 <= topk <= budget" in msg


def test_block_size_at_least_two(write_profile):
    assert "arms[1].block_size" in error_of(write_profile(lambda d: d["arms"][1].update(block_size=1)))


def test_linear_takes_no_budget(write_profile):
    assert "takes no budget" in error_of(write_profile(lambda d: d["arms"][1].update(budget=15)))


@pytest.mark.parametrize("field,value,where", [
    ("concurrency", [0, 4], "load.concurrency[0]"),
    ("concurrency", [], "load.concurrency"),
])
def test_load_bounds(write_profile, field, value, where):
    assert where in error_of(write_profile(lambda d: d["load"].update({field: value})))


@pytest.mark.parametrize("field,value", [("temperature", -0.1), ("max_tokens", 0)])
def test_workload_bounds(write_profile, field, value):
    assert f"workload.{field}" in error_of(write_profile(lambda d: d["workload"].update({field: value})))


def test_unset_env_var_is_named(write_profile, monkeypatch):
    monkeypatch.delenv("MODEL_DIR", raising=False)
    msg = error_of(write_profile(lambda d: d["models"].update(target="${MODEL_DIR}/qwen")))
    assert "models.target" in msg and "${MODEL_DIR} is not set" in msg


def test_env_var_and_default_expand(write_profile, monkeypatch):
    monkeypatch.setenv("MODEL_DIR", "/data")
    p = load_profile(write_profile(lambda d: d["models"].update(
        target="${MODEL_DIR}/qwen", drafter="${NOPE_UNSET_VAR:-/x/drafter}")))
    assert p.models.target == "/data/qwen" and p.models.drafter == "/x/drafter"


def test_sglang_max_running_requests_below_concurrency(write_profile):
    msg = error_of(write_profile(lambda d: d["runtime"].update(max_running_requests=48)))
    assert "max_running_requests 48" in msg and "64" in msg


def test_sglang_tree_needs_triton(write_profile):
    def edit(d):
        d["runtime"].update(attention_backend="fa3")
        d["arms"][3].update(id="tree-b31-k8", budget=31)

    msg = error_of(write_profile(edit))
    assert "tree-b31-k8" in msg and "triton" in msg
    # budget = block - 1 is verified as a chain-shaped tree in SGLang's DDTree: any backend
    assert load_profile(write_profile(lambda d: d["runtime"].update(attention_backend="fa3"), name="b.yaml"))


def test_sglang_ddtree_with_linear_runs_each_arm_as_deployed(write_profile):
    # the overlap switch is no longer held equal by force: each arm gets what its build allows
    p = load_profile(write_profile(lambda d: d["runtime"].update(overlap_scheduler=True)))
    assert p.runtime.overlap_scheduler


def test_overlap_per_arm_is_refused_where_no_server_has_one(write_profile):
    def refengine(d):
        d.update(backend={"kind": "refengine"}, placement={"device": "cpu"})
        d["arms"].append({"id": "ar-no-overlap", "kind": "ar", "overlap_scheduler": False})

    msg = error_of(write_profile(refengine))
    assert "arms[4].overlap_scheduler (arm 'ar-no-overlap')" in msg and "no overlap" in msg


def test_refengine_has_no_sglang_rules(write_profile):
    p = load_profile(write_profile(lambda d: d.update(backend={"kind": "refengine"}) or
                                   d["runtime"].update(overlap_scheduler=True, max_running_requests=1)))
    assert p.backend.kind == "refengine"


def test_gpus_must_match_tp(write_profile):
    msg = error_of(write_profile(lambda d: d["placement"].update(tp_size=2)))
    assert "placement" in msg and "tp_size 2" in msg


def test_not_a_mapping(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("- 1\n- 2\n")
    assert "a profile is a YAML mapping" in error_of(p)


def test_missing_file_and_unknown_name(tmp_path):
    assert "no such profile file" in error_of(tmp_path / "none.yaml")
    msg = error_of("no-such-profile")
    assert "no shipped profile named 'no-such-profile'" in msg and "cpu-tiny" in msg


@pytest.mark.parametrize("path", sorted(PROFILES_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_profiles_load(path):
    p = load_profile(path)
    assert p.name == path.stem


def test_digest_changes_with_content(write_profile):
    a = load_profile(write_profile())
    b = load_profile(write_profile(lambda d: d["workload"].update(max_tokens=33), name="b.yaml"))
    assert a.digest() != b.digest() and a.digest() == load_profile(write_profile(name="c.yaml")).digest()


def test_requests_per_user_per_level(tmp_path):
    base = (PROFILES_DIR / "cpu-tiny.yaml").read_text()
    good = tmp_path / "good.yaml"
    good.write_text(base.replace("requests_per_user: 12", "requests_per_user: {1: 24, 4: 6}"))
    p = load_profile(good)
    assert (p.load.per_user(1), p.load.per_user(4)) == (24, 6)
    assert p.digest() == type(p).model_validate(p.model_dump(mode="json")).digest()   # survives the manifest
    bad = tmp_path / "bad.yaml"
    bad.write_text(base.replace("requests_per_user: 12", "requests_per_user: {1: 24, 8: 6}"))
    with pytest.raises(ProfileError, match=r"requests_per_user gives levels \[1, 8\], the plan runs \[1, 4\]"):
        load_profile(bad)


def test_overlay_check_needs_the_ddtree_build_served_from_this_hosts_layers(write_profile):
    msg = error_of(write_profile(lambda d: d.update(diagnostics=["overlay-check"]), name="o.yaml"))
    assert "overlay-check" in msg and "ddtree 'fork'" in msg
    ok = load_profile(write_profile(lambda d: d["backend"].update(ddtree="fork") or
                                    d.update(diagnostics=["overlay-check"]), name="f.yaml"))
    assert ok.diagnostics == ["overlay-check"]
    assert "overlay-check" in load_profile("gpu-sglang-checks").diagnostics


def test_rounds_needs_closed_loop_requests_and_gpu_time_needs_sglang_rounds(write_profile):
    msg = error_of(write_profile(lambda d: d["load"].update(schedule="rounds", requests_per_user=None,
                                                            duration_s=5)))
    assert "schedule 'rounds'" in msg and "requests_per_user" in msg
    ok = load_profile(write_profile(lambda d: d["load"].update(schedule="rounds") or d.update(diagnostics=["gpu-time"]),
                                    name="r.yaml"))
    assert ok.load.schedule == "rounds" and ok.diagnostics == ["gpu-time"]
    msg = error_of(write_profile(lambda d: d.update(diagnostics=["gpu-time"]), name="g.yaml"))
    assert "gpu-time" in msg and "rounds" in msg
