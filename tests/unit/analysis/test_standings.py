"""The standings: fastest arm and runner-up per concurrency and CUDA graphs group with their paired ratio (the
speedups table's, its reverse inverted, else computed); and the budget families: the tree budgets of one block, top-k
rule, setting and graphs switch against each other, the chain on their axis."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from handrun import profile

from analysis.estimate import compare, standings

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "linear-b16-eager", "kind": "linear", "block_size": 16, "cuda_graphs": False},
        {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8},
        {"id": "tree-b31-k8", "kind": "tree", "block_size": 16, "budget": 31, "topk": 8},
        {"id": "tree-b63-k8", "kind": "tree", "block_size": 16, "budget": 63, "topk": 8}]


def _summary(thr: dict[tuple[str, int], float], arms=ARMS) -> pd.DataFrame:
    kinds = {a["id"]: a["kind"] for a in arms}
    return pd.DataFrame([{"arm": arm, "kind": kinds[arm], "concurrency": c, "throughput": t, "tau": 1.0 + t / 100,
                          "reps": 4} for (arm, c), t in thr.items()])


def _speedup(arm, base, c, r, lo, hi, n_to_resolve=None):
    return {"arm": arm, "baseline": base, "concurrency": c, "speedup": r, "speedup_lo": lo, "speedup_hi": hi,
            "pairs": 4, "verdict": compare.verdict(lo, hi), "sign_p": 0.125, "mde": 0.04, "n_to_resolve": n_to_resolve}


def _analysis(summary, speedups, arms=ARMS):
    prof = profile(arms=arms, placement={"device": "cuda", "gpus": [0]})
    return SimpleNamespace(run=SimpleNamespace(profile=prof), summary=summary,
                           speedups=pd.DataFrame(speedups), cells=pd.DataFrame(), boots={})


def test_fastest_and_runner_up_per_c_and_graphs_group_read_from_the_speedups_table():
    s = _summary({("ar", 1): 100, ("linear-b16", 1): 150, ("tree-b15-k8", 1): 170, ("linear-b16-eager", 1): 60,
                  ("ar", 4): 300, ("linear-b16", 4): 320})
    sp = [_speedup("tree-b15-k8", "linear-b16", 1, 1.13, 1.05, 1.22),
          _speedup("linear-b16", "ar", 4, 1.07, 0.97, 1.18, n_to_resolve=30)]
    p = standings.podium(_analysis(s, sp)).set_index(["concurrency", "cuda_graphs"])
    assert sorted(p.index) == [(1, False), (1, True), (4, True)]
    on = p.loc[(1, True)]
    assert (on["fastest"], on["runner_up"], on["speedup"]) == ("tree-b15-k8", "linear-b16", 1.13)
    assert on["verdict"] == "faster"
    assert on["source"] == "speedups table"
    # the eager arm is alone in its group: no runner-up, no claim
    off = p.loc[(1, False)]
    assert off["fastest"] == "linear-b16-eager" and pd.isna(off["runner_up"]) and off["verdict"] == "not compared"
    four = p.loc[(4, True)]
    assert four["verdict"] == "within noise" and four["n_to_resolve"] == 30


def test_the_reverse_row_is_inverted_exactly():
    s = _summary({("ar", 1): 200, ("linear-b16", 1): 150})     # ar fastest: the table has linear over ar only
    p = standings.podium(_analysis(s, [_speedup("linear-b16", "ar", 1, 0.8, 0.7, 0.9)])).iloc[0]
    assert (p["fastest"], p["runner_up"]) == ("ar", "linear-b16")
    assert (p["speedup"], p["speedup_lo"], p["speedup_hi"]) == pytest.approx((1 / 0.8, 1 / 0.9, 1 / 0.7))
    assert p["verdict"] == "faster" and p["source"] == "speedups table, inverted"


def test_inversion_matches_computing_the_ratio_directly(synth_analysis):
    a = synth_analysis
    got = standings.pair_ratio(a, "ar", "linear-b16", 1)
    assert got["source"] == "speedups table, inverted"
    want = compare.speedup(compare.Side(a.run, a.cells, a.boots, "ar"),
                           compare.Side(a.run, a.cells, a.boots, "linear-b16"), 1)
    assert (got["speedup"], got["speedup_lo"], got["speedup_hi"]) == pytest.approx(
        (want["speedup"], want["speedup_lo"], want["speedup_hi"]), rel=1e-9)
    assert got["verdict"] == want["verdict"] and got["n_to_resolve"] == want["n_to_resolve"]


def test_a_pair_outside_the_table_is_computed_or_its_refusal_kept(monkeypatch):
    s = _summary({("tree-b15-k8", 1): 170, ("tree-b31-k8", 1): 180})
    a = _analysis(s, [])
    monkeypatch.setattr(compare, "speedup", lambda x, y, c: {**_speedup(x.arm, y.arm, c, 1.06, 0.98, 1.15),
                                                             "n_to_resolve": 12})
    p = standings.podium(a).iloc[0]
    assert (p["fastest"], p["runner_up"], p["source"], p["verdict"]) == ("tree-b31-k8", "tree-b15-k8", "computed",
                                                                         "within noise")

    def refuse(x, y, c):
        raise compare.MismatchError("refusing to compare: temperature differs")
    monkeypatch.setattr(compare, "speedup", refuse)
    p = standings.podium(a).iloc[0]
    assert p["verdict"] == "not compared" and "temperature differs" in p["source"] and np.isnan(p["speedup"])


def test_budgets_need_three_at_one_block_and_switch(monkeypatch):
    monkeypatch.setattr(compare, "speedup", lambda x, y, c: _speedup(x.arm, y.arm, c, 1.02, 0.95, 1.10))
    s = _summary({("tree-b15-k8", 1): 170, ("tree-b31-k8", 1): 180, ("tree-b63-k8", 1): 175})
    b = standings.budgets(_analysis(s, []))
    assert list(b["budget"]) == [15, 31, 63] and list(b["best"]) == [False, True, False]
    assert b[b["best"]]["verdict"].iloc[0] == "not compared"          # no ratio of the best over itself
    assert (b[~b["best"]]["verdict"] == "within noise").all()
    two = [a for a in ARMS if a["id"] != "tree-b63-k8"]
    assert standings.budgets(_analysis(s[s["arm"] != "tree-b63-k8"], [], arms=two)).empty
    fams = standings.families(_analysis(s, [], arms=two))
    assert [f.budgets for f in fams] == [[15, 31]] and standings.budget_families(_analysis(s, [], arms=two)) == []


def test_a_family_keeps_one_top_k_rule_and_puts_the_chain_on_its_budget_axis(monkeypatch):
    monkeypatch.setattr(compare, "speedup", lambda x, y, c: _speedup(x.arm, y.arm, c, 1.10, 1.05, 1.15))
    arms = [*ARMS, {"id": "chain-b15", "kind": "chain", "block_size": 16},
            {"id": "tree-b31-k31", "kind": "tree", "block_size": 16, "budget": 31, "topk": 31}]
    s = _summary({("chain-b15", 1): 160, ("tree-b15-k8", 1): 170, ("tree-b31-k8", 1): 180, ("tree-b63-k8", 1): 175,
                  ("tree-b31-k31", 1): 190}, arms)
    a = _analysis(s, [], arms=arms)
    # K = B is another tree than K = 8 at the same budget: a family of its own, of one budget
    assert [(f.k, f.budgets) for f in standings.families(a)] == [("K = 8", [15, 31, 63]), ("K = B", [31])]
    (k8,) = standings.budget_families(a)
    assert (k8.chain.id, k8.linear.id) == ("chain-b15", "linear-b16")
    r = standings.ranked(a, k8, 1)
    assert [p["arm"].id for p in r] == ["tree-b31-k8", "tree-b63-k8", "tree-b15-k8", "chain-b15"]
    assert [p["source"] for p in r[1:]] == ["computed", "computed", "computed"]
    b = standings.budgets(a)          # the same points and ratios, in axis order: the chain (B = L-1) first
    assert list(b["arm"]) == ["chain-b15", "tree-b15-k8", "tree-b31-k8", "tree-b63-k8"]
    assert list(b["chain"]) == [True, False, False, False] and list(b["best"]) == [False, False, True, False]
    assert list(b["speedup"].iloc[[0, 1, 3]]) == [1.10, 1.10, 1.10]
