"""Lossless at T > 0 on the shipped pair, at a small N: every arm of cpu-tiny passes at T=0.7, top-p 0.95, the
planted bug fails on the linear and the tree arm; and the CLI on run directories of cpu-tiny made here (a manifest
with the digests a run records), at T=0 only and sweeping T=0.7."""

import json

import pandas as pd
import pytest
import torch

from analysis import sampling_law as sl
from ddbench.core.profile import REPO_ROOT, Sampling, load_profile

torch.set_num_threads(1)
SETTING = Sampling(temperature=0.7, top_p=0.95)


@pytest.fixture(scope="module")
def table():
    # family alpha 0.01, not the stage's 0.05: at these fixed seeds and N = 240, AR's p is 0.011 (per-row alpha
    # 0.0125 at 0.05), a fluke by every fresh look (30 new blocks of 120 draws on its worse prompt: p-values
    # uniform, KS p 0.25; 3600 draws pooled: p 0.33); at 0.01 a correct engine fails 1 run in 100 of fresh seeds
    return sl.check_profile(load_profile("cpu-tiny"), [SETTING], draws=240, n_prompts=2, k=3, alpha=0.01)


def test_every_arm_passes_and_the_planted_tree_fails(table):
    t = table
    assert t["arm"].tolist() == ["ar", "linear-b16", "chain-b15", "tree-b15-k8", "tree-b15-k8"]
    real, bug = t[~t["planted"]], t[t["planted"]]
    assert (real["verdict"] == "pass").all(), real[["arm", "statistic", "df", "p_value", "alpha"]]
    assert (real["impossible"] == 0).all()
    assert bug["verdict"].tolist() == ["fail"] and bug["p_value"].iloc[0] < 1e-6
    assert (t["sampling"] == "t0.7-p0.95").all() and (t["draws"] == 240).all() and (t["prompts"] == 2).all()
    spec = real[real["kind"] != "ar"].set_index("arm")["accepted_share"]
    assert spec["tree-b15-k8"] > 0.5 and (spec > 0.2).all()     # the trained drafter's drafts are accepted
    assert (t["df"] > 5).all() and (t["alpha"] == 0.01 / 4).all()


def test_the_planted_linear_fails_too():
    from ddbench.core.prompts import load_prompt_set
    from refengine.plan import Plan
    profile = load_profile("cpu-tiny")
    target, drafter, tok = sl.load(REPO_ROOT / profile.models.target, REPO_ROOT / profile.models.drafter)
    prompt = load_prompt_set(profile.workload.prompt_set)[0]
    ids = tok.chat_ids([m.model_dump() for m in prompt.messages])
    rows = [sl.Row("linear-b16", "linear", Plan("linear", block_size=16), SETTING, planted=True)]
    t = sl.check(target, drafter, [ids], rows, draws=120, n_prompts=1, k=3)
    assert t["verdict"].tolist() == ["fail"], t[["statistic", "df", "p_value"]]


def _run_dir(root, profile):
    """A run directory holding only a manifest, with the digests a finished run records (the CLI checks them)."""
    from ddbench.core.manifest import checkpoint_digest
    from ddbench.core.prompts import prompt_set_digest
    root.mkdir()
    models = {role: {"sha256": checkpoint_digest(REPO_ROOT / getattr(profile.models, role))["sha256"]}
              for role in ("target", "drafter")}
    manifest = {"profile": profile.model_dump(mode="json"), "profile_digest": profile.digest(),
                "prompt_set_digest": prompt_set_digest(profile.workload.prompt_set), "models": models}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_cli_on_a_run(tmp_path, capsys):
    greedy = load_profile("cpu-tiny")
    # a run at T=0 only: nothing to check, and an empty table says so
    run = _run_dir(tmp_path / "greedy", greedy)
    assert sl.main([str(run), "--jobs", "1"]) == 0
    assert pd.read_csv(run / "tables" / "lossless_sampling.csv").empty
    assert "no T > 0 setting" in capsys.readouterr().out
    # a run sweeping T=0 and T=0.7: its T > 0 setting, read from the manifest's profile, in two processes
    workload = greedy.workload.model_copy(update={"sampling": [Sampling(), SETTING]})
    swept = greedy.model_copy(update={"workload": workload})
    run = _run_dir(tmp_path / "swept", swept)
    assert sl.main([str(run), "--draws", "60", "--prompts", "1", "--no-planted", "--jobs", "2"]) == 0
    t = pd.read_parquet(run / "tables" / "lossless_sampling.parquet")
    assert t["arm"].tolist() == ["ar", "linear-b16", "chain-b15", "tree-b15-k8"]
    assert (t["draws"] == 60).all() and (t["sampling"] == "t0.7-p0.95").all()
    csv = pd.read_csv(run / "tables" / "lossless_sampling.csv")
    assert csv[["arm", "statistic", "verdict"]].equals(t[["arm", "statistic", "verdict"]])
