"""The drafter-diagnosis section from hand-made headroom tables: present only with the tables, the
measured τ ratio beside the diagnosis, and the sentences built from the tables' own numbers."""

from types import SimpleNamespace

import pandas as pd

from analysis.headroom import FILES
from ddbench.core.profile import Arm
from report import headroom

ARMS = [Arm(id="ar", kind="ar"), Arm(id="linear-b16", kind="linear", block_size=16),
        Arm(id="chain-b15", kind="chain", block_size=16),
        Arm(id="tree-b15-k8", kind="tree", block_size=16, budget=15, topk=8)]


def _run(tmp_path, with_tables=True):
    tables = tmp_path / "tables"
    tables.mkdir()
    if with_tables:
        frames = {
            "ranks": pd.DataFrame({"depth": [0, 1, 2], "roots": [10, 10, 10], "rank_1": [0.6, 0.8, 0.4],
                                   "rank_2": [0.2, 0.1, 0.3], "rank_3_4": [0.1, 0.05, 0.15],
                                   "rank_5_8": [0.05, 0.05, 0.05], "rank_gt_8": [0.05, 0.0, 0.1]}),
            "first_mismatch": pd.DataFrame([{"topk": 8, "roots": 10, "whole_chain": 3, "mismatches": 7,
                                             "sibling": 6, "sibling_share": 6 / 7, "mean_depth": 1.5,
                                             "rank_1": 0.0, "rank_2": 4 / 7, "rank_3_4": 1 / 7,
                                             "rank_5_8": 1 / 7, "rank_gt_8": 1 / 7}]),
            "after_sibling": pd.DataFrame([
                {"topk": 8, "prefix": "spine", "depth": 0, "sibling_n": 4, "sibling_next": 2, "sibling_rate": 0.5,
                 "spine_n": 20, "spine_next": 18, "spine_rate": 0.9},
                {"topk": 8, "prefix": "any", "depth": 0, "sibling_n": 9, "sibling_next": 2, "sibling_rate": 0.22,
                 "spine_n": 30, "spine_next": 24, "spine_rate": 0.8}]),
            "headroom": pd.DataFrame([{"budget": 15, "topk": 8, "roots": 10, "chain_expected": 2.0,
                                       "tree_expected": 2.5, "ratio_mean": 1.3, "ratio_of_means": 1.25,
                                       "chain_accepted": 2.0, "tree_accepted": 2.2, "accepted_ratio": 1.1},
                                      {"budget": 63, "topk": 8, "roots": 10, "chain_expected": 2.0,
                                       "tree_expected": 3.0, "ratio_mean": 1.6, "ratio_of_means": 1.5,
                                       "chain_accepted": 2.0, "tree_accepted": 2.4, "accepted_ratio": 1.2}]),
            "setup": pd.DataFrame([{"prompts": 2, "roots": 10, "stride": 1, "depth": 2, "max_tokens": 5,
                                    "cpu_s": 1.25, "wall_s": 1.3, "threads": 1}]),
        }
        for key, df in frames.items():
            df.to_csv(tables / FILES[key], index=False)
    # the paired tau ratios of the tree-gain decomposition: 6.0 / 5.0 over the chain at C=1
    decomposition = pd.DataFrame({"arm": ["tree-b15-k8"] * 4, "reference": ["linear-b16", "chain-b15"] * 2,
                                  "reference_kind": ["linear", "chain"] * 2, "concurrency": [1, 1, 4, 4],
                                  "tau_ratio": [6.0 / 5.5, 6.0 / 5.0, 4.4 / 4.2, 4.4 / 4.0]})
    decomposition["tau_ratio_lo"], decomposition["tau_ratio_hi"] = 0.9 * decomposition["tau_ratio"], \
        1.1 * decomposition["tau_ratio"]
    profile = SimpleNamespace(arms=ARMS)
    return SimpleNamespace(run=SimpleNamespace(path=tmp_path, profile=profile), decomposition=decomposition)


def test_no_tables_no_section(tmp_path):
    assert headroom.context(_run(tmp_path, with_tables=False)) is None


def test_the_section_states_the_tables_numbers_and_the_measured_ratio(tmp_path):
    ctx = headroom.context(_run(tmp_path))
    assert "2 prompts" in ctx["setup"] and "10 positions" in ctx["setup"] and "every position" in ctx["setup"]
    assert "matched the target at 3 of 10 positions" in ctx["first_mismatch"]
    assert "85.7\\%" in ctx["first_mismatch"] and "rank 2 alone: 57.1\\%" in ctx["first_mismatch"]
    assert "50.0\\% of cases (4)" in ctx["after_sibling"] and "90.0\\%" in ctx["after_sibling"]
    trees = str(ctx["trees"])
    # B15/K8 is the run's tree arm: its measured tau ratio over the chain at the lowest C, 6.0 / 5.0
    assert "1.200 (over chain-{}b15, C=1)" in trees or "1.200 (over chain-b15, C=1)" in trees
    # B63 is not an arm of the run: no measured ratio to stand beside it
    assert trees.count("--") >= 1 and "1.500" in trees
    ranks = str(ctx["ranks"])
    assert ranks.index("80.0") < ranks.index("all")  # depth rows first, the pooled row last
