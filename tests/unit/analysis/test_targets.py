"""The profile's targets: by default each deployable speculative arm against deployable AR and each deployable tree
against the best linear arm; each met or open at every level by the MDE reached, the rounds estimate's where it has an
interval, else the repetition pairs'; named in a profile, checked against its arms and levels, out of the digest."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from handrun import profile

from analysis.estimate import targets
from ddbench.core.profile import ProfileError, load_profile

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "linear-b8", "kind": "linear", "block_size": 8},
        {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8},
        {"id": "tree-b15-k8-eager", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8,
         "cuda_graphs": False, "ablation": "CUDA graphs off"}]


def _prof(**over):
    return profile(arms=ARMS, load={"concurrency": [1, 8], "requests_per_user": 2},
                   placement={"device": "cuda", "gpus": [0]}, **over)


def _analysis(prof, rounds=(), pairs=(), thr=None):
    thr = thr or {("linear-b16", 1): 200.0, ("linear-b8", 1): 150.0, ("linear-b16", 8): 900.0,
                  ("linear-b8", 8): 1000.0}
    summary = pd.DataFrame([{"arm": a, "concurrency": c, "throughput": t} for (a, c), t in thr.items()])
    cols = ["arm", "baseline", "concurrency", "rounds", "speedup", "speedup_lo", "speedup_hi", "verdict", "mde"]
    pcols = ["arm", "other", "concurrency", "speedup", "speedup_lo", "speedup_hi", "pairs", "verdict", "sign_p",
             "mde", "n_to_resolve", "source"]
    return SimpleNamespace(run=SimpleNamespace(profile=prof), summary=summary,
                           rounds=pd.DataFrame(list(rounds), columns=cols),
                           pairs=pd.DataFrame(list(pairs), columns=pcols))


def _round(arm, base, c, mde, n=12):
    return {"arm": arm, "baseline": base, "concurrency": c, "rounds": n, "speedup": 1.1, "speedup_lo": 1.0,
            "speedup_hi": 1.2, "verdict": "within noise", "mde": mde}


def _pair(arm, other, c, mde, ratio=1.1):
    return {"arm": arm, "other": other, "concurrency": c, "speedup": ratio, "speedup_lo": ratio * 0.9,
            "speedup_hi": ratio * 1.1, "pairs": 4, "verdict": "within noise", "sign_p": 0.5, "mde": mde,
            "n_to_resolve": 9, "source": "speedups table"}


def test_the_default_targets_leave_ablations_out_and_take_the_best_linear_arm_for_the_tree():
    goals = _prof().goals()
    assert [(t.arm, t.baseline, t.mde_pct) for t in goals] == [
        ("linear-b16", "ar", 5.0), ("linear-b8", "ar", 5.0), ("tree-b15-k8", "ar", 5.0),
        ("tree-b15-k8", "best-linear", 3.0)]
    assert profile(arms=[{"id": "ar", "kind": "ar"}]).goals() == []
    chain = profile(arms=[{"id": "ar", "kind": "ar"}, {"id": "chain-b15", "kind": "chain", "block_size": 16}])
    assert chain.goals() == []   # a check of the tree code, never deployed


def test_best_linear_is_the_faster_linear_arm_at_each_level():
    prof = _prof(targets=[{"arm": "tree-b15-k8", "baseline": "best-linear", "mde_pct": 3}])
    a = _analysis(prof, rounds=[_round("tree-b15-k8", "linear-b16", 1, 0.019),
                                _round("tree-b15-k8", "linear-b8", 8, 0.04)])
    t = targets.table(a)
    assert list(t["baseline"]) == ["linear-b16", "linear-b8"]
    assert list(t["met"]) == [True, False] and list(t["estimate"]) == ["rounds", "rounds"]
    assert targets.headline(t) == "targets: 1 of 2 met"
    assert targets.text(t.iloc[1]) == "tree-b15-k8 / linear-b8 at C=8: MDE 4.0% (rounds) against 3%, open"


def test_without_a_rounds_interval_the_repetition_pairs_decide_and_without_either_the_target_is_open():
    prof = _prof(targets=[{"arm": "linear-b16", "baseline": "ar", "mde_pct": {1: 5, 8: 10}}])
    a = _analysis(prof, rounds=[_round("linear-b16", "ar", 1, np.nan, n=3)],
                  pairs=[_pair("ar", "linear-b16", 1, 0.04, ratio=0.5), _pair("ar", "linear-b16", 8, np.nan)])
    t = targets.table(a).set_index("concurrency")
    assert (t.loc[1, "estimate"], t.loc[1, "mde"], bool(t.loc[1, "met"])) == ("repetition pairs", 0.04, True)
    assert t.loc[1, "speedup"] == pytest.approx(2.0)   # the pairs table's row, read the other way
    assert not t.loc[8, "met"] and np.isnan(t.loc[8, "mde"]) and t.loc[8, "note"].startswith("no interval")
    assert t.loc[8, "target_mde"] == 0.10


def test_a_pair_never_compared_is_open_and_says_why():
    prof = _prof(targets=[{"arm": "tree-b15-k8", "baseline": "ar", "mde_pct": 5}])
    t = targets.table(_analysis(prof))
    assert not t["met"].any() and all(n.startswith("not compared") for n in t["note"])
    t = targets.table(_analysis(_prof(targets=[{"arm": "tree-b15-k8", "baseline": "best-linear", "mde_pct": 3}]),
                                thr={("ar", 1): 1.0}))
    assert list(t["note"]) == ["no deployable linear arm finished at C=1", "no deployable linear arm finished at C=8"]


@pytest.mark.parametrize("target, message", [
    ({"arm": "tree-b99", "baseline": "ar", "mde_pct": 3}, r"targets\[0\]\.arm: no arm 'tree-b99'"),
    ({"arm": "tree-b15-k8", "baseline": "best-linear", "mde_pct": {32: 3}},
     r"targets\[0\]\.mde_pct gives levels \[32\]"),
    ({"arm": "tree-b15-k8", "baseline": "ar", "mde_pct": 0}, r"mde_pct"),
])
def test_a_bad_target_is_refused_naming_its_field(target, message):
    with pytest.raises((ValueError, ProfileError), match=message):
        _prof(targets=[target])


def test_targets_are_no_condition_of_the_cells_and_the_twin_profiles_name_theirs():
    assert _prof(targets=[{"arm": "linear-b16", "baseline": "ar", "mde_pct": 1}]).digest() == _prof().digest()
    for name in ("h100-twin8b-sglang", "h200-twin8b-sglang"):
        goals = load_profile(name).goals()
        tree = [t for t in goals if t.baseline == "best-linear"]
        assert [(t.at(1), t.at(8), t.at(32)) for t in tree] == [(2, 3, 3)]
