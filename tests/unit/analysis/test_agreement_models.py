"""Siblings (analysis.agreement) measured one model pair: runs of a twin, of another build of it, or of
changed checkpoints under the same profile are never pooled with the tiny pair's runs."""

import json

import numpy as np
import pandas as pd

from analysis.agreement import siblings
from analysis.estimate import stats
from loadtests.plan import PROMPT_ORDER

PAIR = {"target": {"path": "models/t", "sha256": "t1", "files": {}},
        "drafter": {"path": "models/d", "sha256": "d1", "files": {}}}
TWIN = {"path": "/x/.twins/qwen3-8b-s0", "roles": ["target", "drafter"], "shape": "qwen3-8b", "seed": 0,
        "dtype": "bf16", "version": 1, "files": {"target/config.json": "aa"}, "pair": {"target": {"m": "cc"}}}


def _run(root, name, models, ratios=(1.3, 1.32)):
    t = root / name / "tables"
    t.mkdir(parents=True)
    reps = range(1, len(ratios) + 1)
    cells = [{"arm": a, "concurrency": 1, "repetition": r, "status": "ok",
              "throughput": 100.0 * (x if a == "tree" else 1)}
             for r, x in zip(reps, ratios, strict=True) for a in ("ar", "tree")]
    pd.DataFrame(cells).to_csv(t / "cells.csv", index=False)
    p = stats.paired_log_ratio(np.array(ratios) * 100, np.full(len(ratios), 100.0))
    pd.DataFrame([{"arm": "tree", "baseline": "ar", "concurrency": 1, "speedup": p["ratio"],
                   "speedup_lo": p["ratio_lo"], "speedup_hi": p["ratio_hi"], "verdict": "faster"}]).to_csv(
        t / "speedups.csv", index=False)
    m = {"profile_digest": "d1", "host": {"cpu": "Xeon", "cores": 2, "gpus": []},
         "schedule": {"prompt_order": PROMPT_ORDER}}
    if models is not None:
        m["models"] = models
    (root / name / "manifest.json").write_text(json.dumps(m))
    return root / name


def test_siblings_measured_the_same_pair(tmp_path):
    me = _run(tmp_path, "pair-1", PAIR)
    same = _run(tmp_path, "pair-2", json.loads(json.dumps(PAIR)))
    _run(tmp_path, "retrained", {**PAIR, "target": {**PAIR["target"], "sha256": "t2"}})   # same path, new contents
    _run(tmp_path, "twin", {"target": {"sha256": "T"}, "drafter": {"sha256": "D"}, "twin": TWIN})
    _run(tmp_path, "old", None)                                        # recorded before model digests
    assert siblings(me) == [same]


def test_twin_runs_pair_only_with_runs_of_the_same_twin(tmp_path):
    models = {"target": {"sha256": "T"}, "drafter": {"sha256": "D"}, "twin": TWIN}
    me = _run(tmp_path, "a", models)
    moved = _run(tmp_path, "b", {**models, "twin": {**TWIN, "path": "/elsewhere", "roles": ["drafter", "target"]}})
    _run(tmp_path, "c", {**models, "twin": {**TWIN, "seed": 1}})       # another build's record, same digests
    _run(tmp_path, "d", {**models, "twin": {**TWIN, "dtype": "fp32"}})
    _run(tmp_path, "e", {"target": {"sha256": "T"}, "drafter": {"sha256": "D"}})   # the twin record lost
    assert siblings(me) == [moved]   # where the twin lies on disk is not what it is
