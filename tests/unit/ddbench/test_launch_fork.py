"""SGLang commands on the pinned DDTree fork with ddbench's patches (backend.ddtree 'fork'): every arm's top-k
as --speculative-ddtree-topk, chains and capped trees included, no top-k env; budgets a top-k cannot fill refused."""

import pytest

from containers.launch import server_command
from containers.sglang_flags import check_profile, table_for
from containers.sglang_pin import pin
from ddbench.core.profile import ProfileError, load_profile

pytestmark = pytest.mark.unit


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def fork_profile(write_profile, arms=None, **backend):
    def edit(d):
        d["backend"].update({"ddtree": "fork", "version": "0.5.15", **backend})
        d["arms"] = arms or [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
                             {"id": "tree-b15-k15", "kind": "tree", "block_size": 16, "budget": 15, "topk": 15},
                             {"id": "tree-b63-k63", "kind": "tree", "block_size": 16, "budget": 63, "topk": 63}]
    return write_profile(edit)


def test_a_tree_arm_on_the_fork_gets_ddtree_with_the_budget_and_its_topk_flag(write_profile):
    p = load_profile(fork_profile(write_profile))
    tree = server_command(p, p.arm("tree-b63-k63"))
    assert flag(tree.argv, "--speculative-algorithm") == "DDTREE"
    assert flag(tree.argv, "--speculative-num-draft-tokens") == "16"
    assert flag(tree.argv, "--speculative-ddtree-budget") == "63"
    assert flag(tree.argv, "--speculative-ddtree-topk") == "63"  # ddbench patch 0001
    assert "SGLANG_DDTREE_MAX_TOPK" not in tree.env  # the PR's knob, not the fork's
    assert flag(tree.argv, "--attention-backend") == "triton" and flag(tree.argv, "--page-size") == "1"
    notes = " | ".join(tree.notes)
    assert f"DDTree fork {pin().label}" in notes
    assert "budget 63, top-k min(B, vocab ?, K 63) = 63, verify width 64" in notes  # a fake target: vocab unknown
    lin = server_command(p, p.arm("linear-b16"))
    assert flag(lin.argv, "--speculative-algorithm") == "DFLASH" and "--speculative-ddtree-budget" not in lin.argv
    assert not any("MAX_TOPK" in n for n in tree.notes)  # the PR's rule does not apply here


def test_every_arm_of_a_fork_profile_is_checked_against_the_forks_flags(write_profile):
    p = load_profile(fork_profile(write_profile))
    assert {table_for(p, a.kind) for a in p.arms} == {pin().flags_table}
    assert check_profile(p) == []


def test_a_chain_and_a_capped_tree_run_on_the_fork_with_their_topk(write_profile):
    arms = [{"id": "linear-b8", "kind": "linear", "block_size": 8},
            {"id": "chain-b7", "kind": "chain", "block_size": 8},
            {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8}]
    p = load_profile(fork_profile(write_profile, arms))
    chain = server_command(p, p.arm("chain-b7"))
    assert [flag(chain.argv, f) for f in ("--speculative-algorithm", "--speculative-num-draft-tokens",
                                          "--speculative-ddtree-budget", "--speculative-ddtree-topk")] == \
        ["DDTREE", "8", "7", "1"]
    assert any("top-k min(B, vocab ?, K 1) = 1" in n and "linear arm's verify steps" in n for n in chain.notes)
    capped = server_command(p, p.arm("tree-b15-k8"))
    assert (flag(capped.argv, "--speculative-ddtree-budget"), flag(capped.argv, "--speculative-ddtree-topk")) == \
        ("15", "8")
    assert check_profile(p) == []  # the patched flag is in the pin's flag table


@pytest.mark.parametrize("arm, words", [
    ({"id": "tree-b40-k2", "kind": "tree", "block_size": 5, "budget": 40, "topk": 2},
     r"tree arm 'tree-b40-k2': budget 40 cannot be filled with top-k 2 over 4 draft depths \(block 5\): at most 30"),
])
def test_a_budget_the_topk_cannot_fill_is_refused_by_name(write_profile, arm, words):
    with pytest.raises(ProfileError, match=words):
        load_profile(fork_profile(write_profile, [arm]))


def test_the_pr_build_keeps_its_topk_rule(write_profile):
    p = load_profile(write_profile(lambda d: d["backend"].update(ddtree="pr29907")))
    tree = server_command(p, p.arm("tree-b15-k8"))
    assert tree.env["SGLANG_DDTREE_MAX_TOPK"] == "8" and any("= 2, not 8" in n for n in tree.notes)
    assert table_for(p, "tree") == "ddtree-pr29907"


def test_an_unset_build_leaves_the_digest_as_before(write_profile):
    p = load_profile(write_profile())
    assert "ddtree" not in p.model_dump(mode="json")["backend"]


def test_a_build_only_names_sglang(write_profile):
    with pytest.raises(ProfileError, match="names an SGLang build"):
        load_profile(write_profile(lambda d: d.update(backend={"kind": "refengine", "ddtree": "fork"},
                                                      placement={"device": "cpu"})))


def test_measured_arms_never_carry_the_stage_profiler(write_profile):
    def edit(d):
        d["arms"][1]["extra_args"] = ["--speculative-ddtree-profile"]
    with pytest.raises(ProfileError, match=r"arm 'linear-b16': --speculative-ddtree-profile\* never goes"):
        load_profile(write_profile(edit))


def test_the_shipped_fork_profile():
    p = load_profile("h200-sglang-ddtree")
    assert p.backend.ddtree == "fork"
    assert [a.id for a in p.arms] == ["ar", "ar-no-overlap", "ar-eager", "linear-b16", "linear-b16-eager",
                                      "tree-b15-k15", "tree-b15-k15-eager", "tree-b31-k31", "tree-b63-k63"]
    assert all(a.topk == a.budget for a in p.arms if a.kind == "tree")
    ref = load_profile("h200-tiny")
    # the cross-check pairs like with like (the reference engine has no overlap scheduler to ablate)
    assert {a.id for a in p.arms if not a.ablation} <= {a.id for a in ref.arms}
    assert p.workload == ref.workload and p.load.concurrency == ref.load.concurrency
    assert check_profile(p) == []

