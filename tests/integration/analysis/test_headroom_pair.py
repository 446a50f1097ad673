"""The drafter diagnosis on the shipped pair: two chat prompts through diagnose(), and the CLI on a copy of a
committed cpu-tiny run's manifest (its tables go to the copy, never into results/)."""

import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from analysis import headroom as h
from ddbench.core.profile import REPO_ROOT
from ddbench.core.prompts import load_prompts

torch.set_num_threads(1)
TARGET, DRAFTER = REPO_ROOT / "models/qwen3-stdlib-13m", REPO_ROOT / "models/qwen3-stdlib-13m-dflash-b16"
RUN = REPO_ROOT / "results/cpu-tiny/20261202T161542Z-5c3322"


@pytest.fixture(scope="module")
def tables():
    prompts = load_prompts(REPO_ROOT / "loadtests/prompts/chat.jsonl")[:2]
    return h.diagnose(TARGET, DRAFTER, prompts, max_tokens=16, budgets=[15, 31], topk=8, stride=2)


def test_shapes_and_shares(tables):
    assert tables["setup"].iloc[0][["prompts", "roots", "depth"]].tolist() == [2, 16, 15]
    ranks = tables["ranks"]
    assert ranks["depth"].tolist() == list(range(16))
    np.testing.assert_allclose(ranks[h.SHARES].sum(axis=1), 1.0)
    # a trained drafter: most depth-1 drafts are the target's token, and it gets harder with depth
    first = ranks.set_index("depth")["rank_1"]
    assert first[1] > 0.5
    assert first[1] >= first[15]
    fm = tables["first_mismatch"].iloc[0]
    assert fm["topk"] == 8 and fm["whole_chain"] + fm["mismatches"] == 16
    assert 0 <= fm["sibling_share"] <= 1
    assert set(tables["after_sibling"]["prefix"]) == {"spine", "any"}


def test_tree_expects_at_least_the_chain(tables):
    t = tables["headroom"].set_index("budget")
    assert t.index.tolist() == [15, 31]
    assert (t["tree_expected"] >= t["chain_expected"] - 1e-9).all()
    assert t.loc[31, "tree_expected"] >= t.loc[15, "tree_expected"]
    assert (t["ratio_mean"] >= 1 - 1e-9).all()
    assert (t["chain_accepted"] <= 15).all() and (t["tree_accepted"] <= 15).all()


def test_cli_writes_the_tables_of_a_copied_run(tmp_path, capsys):
    run = tmp_path / RUN.name
    run.mkdir()
    shutil.copy(RUN / "manifest.json", run / "manifest.json")
    assert h.main([str(run), "--prompts", "2", "--stride", "16"]) == 0
    assert sorted(p.name for p in (run / "tables").iterdir()) == sorted(h.FILES.values())
    setup = pd.read_csv(run / "tables" / "headroom_setup.csv").iloc[0]
    assert (setup["prompts"], setup["roots"], setup["max_tokens"]) == (2, 8, 64)   # 64 tokens, every 16th a root
    trees = pd.read_csv(run / "tables" / "headroom_trees.csv")
    assert trees[["budget", "topk"]].values.tolist() == [[15, 8]]                  # the run's tree arm
    assert "CPU" in capsys.readouterr().out
