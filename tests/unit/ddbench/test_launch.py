from containers.launch import server_command, sglang_effective_topk
from ddbench.core.profile import load_profile


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def commands(profile):
    return {a.id: server_command(profile, a) for a in profile.arms}


def test_sglang_sets_max_running_requests_to_top_concurrency(write_profile):
    for launch in commands(load_profile(write_profile())).values():
        assert int(flag(launch.argv, "--max-running-requests")) >= 64


def test_sglang_switches_held_off_for_every_arm_when_the_profile_says_so(write_profile):
    p = load_profile(write_profile(lambda d: d["arms"][3].update(id="tree-b31-k8", budget=31)))
    cmds = commands(p)
    for launch in cmds.values():
        assert "--disable-overlap-schedule" in launch.argv
    tree = cmds["tree-b31-k8"]
    assert flag(tree.argv, "--attention-backend") == "triton" and flag(tree.argv, "--page-size") == "1"
    assert flag(tree.argv, "--speculative-algorithm") == "DDTREE"
    assert flag(tree.argv, "--speculative-ddtree-budget") == "31"
    assert tree.env["SGLANG_DDTREE_MAX_TOPK"] == "8"


def test_sglang_each_arm_as_deployed(write_profile):
    def edit(d):
        d["runtime"]["overlap_scheduler"] = True
        d["arms"][3].update(id="tree-b31-k8", budget=31)
        d["arms"].append({"id": "ar-no-overlap", "kind": "ar", "overlap_scheduler": False,
                          "ablation": "overlap held off: AR's synchronous path"})
        d["arms"].append({"id": "linear-b16-no-overlap", "kind": "linear", "block_size": 16,
                          "overlap_scheduler": False, "ablation": "overlap held off: DFLASH's synchronous path"})

    cmds = commands(load_profile(write_profile(edit)))
    # AR keeps SGLang's defaults: overlap on, its own attention backend and page size
    assert not {"--disable-overlap-schedule", "--attention-backend", "--page-size"} & set(cmds["ar"].argv)
    for arm in ("linear-b16", "chain-b15", "tree-b31-k8"):   # SGLang's V2 worker overlaps them as deployed
        assert "--disable-overlap-schedule" not in cmds[arm].argv
    for arm in ("ar-no-overlap", "linear-b16-no-overlap"):   # the ablations hold it off
        assert "--disable-overlap-schedule" in cmds[arm].argv
    assert flag(cmds["chain-b15"].argv, "--page-size") == "1" and "--attention-backend" not in cmds["chain-b15"].argv
    assert flag(cmds["tree-b31-k8"].argv, "--attention-backend") == "triton"
    assert any(n.startswith("overlap scheduler on: SGLang's default") for n in cmds["ar"].notes)


def test_sglang_arms(write_profile):
    cmds = commands(load_profile(write_profile()))
    assert "--speculative-algorithm" not in cmds["ar"].argv
    lin = cmds["linear-b16"].argv
    assert flag(lin, "--speculative-algorithm") == "DFLASH" and flag(lin, "--speculative-num-draft-tokens") == "16"
    chain = cmds["chain-b15"]
    assert flag(chain.argv, "--speculative-ddtree-budget") == "15" and chain.env["SGLANG_DDTREE_MAX_TOPK"] == "1"
    # no flag is an ambiguous prefix on SGLang 0.5.23
    assert not any(a == "--cuda-graph-max-bs" for c in cmds.values() for a in c.argv)


def test_sglang_effective_topk_note(write_profile):
    p = load_profile(write_profile())
    tree = p.arm("tree-b15-k8")
    assert sglang_effective_topk(tree, 8) == 2  # max(15 // 15 + 1, 2) = 2
    assert any("= 2, not 8" in n for n in commands(p)["tree-b15-k8"].notes)


def test_cuda_graph_switch_per_arm(write_profile):
    p = load_profile(write_profile(lambda d: d["arms"].append({"id": "ar-eager", "kind": "ar", "cuda_graphs": False})))
    cmds = commands(p)
    assert "--disable-cuda-graph" in cmds["ar-eager"].argv and "--disable-cuda-graph" not in cmds["ar"].argv


def test_refengine_uses_the_same_flag_names(write_profile):
    p = load_profile(write_profile(lambda d: d.update(backend={"kind": "refengine"},
                                                      placement={"device": "cpu"})))
    cmds = commands(p)
    tree = cmds["tree-b15-k8"]
    assert tree.argv[1:3] == ["-m", "refengine.serve"]
    assert flag(tree.argv, "--speculative-dflash-block-size") == "16"
    assert flag(tree.argv, "--speculative-ddtree-budget") == "15" and tree.env["SGLANG_DDTREE_MAX_TOPK"] == "8"
    assert flag(tree.argv, "--device") == "cpu" and "--disable-cuda-graph" in tree.argv
