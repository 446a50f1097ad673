import pytest

from ddbench import cli
from ddbench.core import builds
from ddbench.core.profile import load_profile
from ddbench.preflight import problems

TREE = "arms=[{id: ar, kind: ar}, {id: tree-b15-k8, kind: tree, block_size: 16, budget: 15, topk: 8}]"


def test_stock_sglang_serves_ar_and_dflash_only():
    p = load_profile("qwen3-8b-1gpu-stock")
    assert builds.kinds(p) == ("ar", "linear") and builds.unservable(p) == []
    assert "stock SGLang 0.5.15" in builds.describe(p) and "backend.ddtree: fork" in builds.describe(p)


def test_a_tree_on_stock_sglang_is_refused_naming_the_arm_and_the_build():
    p = load_profile("qwen3-8b-1gpu-stock", [TREE])
    (why,) = builds.unservable(p)
    assert why.startswith("arms[1] 'tree-b15-k8': a tree arm") and "backend.ddtree: fork" in why
    assert why in problems(p, report=False)


def test_check_refuses_it_and_prints_the_build_otherwise(capsys):
    assert cli.main(["check", "qwen3-8b-1gpu-stock", "--set", TREE]) != 0
    assert "'tree-b15-k8': a tree arm" in capsys.readouterr().err
    assert cli.main(["check", "qwen3-8b-1gpu"]) == 0
    assert "build SGLang 0.5.17 + the pinned DDTree fork" in capsys.readouterr().out


@pytest.mark.parametrize("name, served", [("cpu-tiny", 4), ("qwen3-8b-1gpu", 4), ("h200-sglang-tiny", 2)])
def test_every_shipped_build_names_what_it_serves(name, served):
    assert len(builds.kinds(load_profile(name))) == served
