"""Cross-check of two synthetic runs, an SGLang-like one whose profile names the other's results
directory in compare_with, and a reference-engine-like one: every number of the table is
recomputed here from the raw request files and status.json, not through analysis' code."""

import json
import math
import os
from collections import defaultdict

import numpy as np
import pytest

from analysis.analyze import analyze
from analysis.synth import REFENGINE, Plan, write_run

PER_USER, REPS, WARMUP = 20, 2, 2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("xc")
    ref = write_run(root, Plan(requests_per_user=PER_USER, repetitions=REPS, backend=dict(REFENGINE),
                               profile_name="ref-tiny", seed=1))
    sgl = write_run(root, Plan(requests_per_user=PER_USER, repetitions=REPS, lossy_arm="linear-b16",
                               compare_with=str(ref.parent)))
    return sgl, ref, analyze(sgl, bootstrap=100).crosscheck


def _records(run, arm, c):
    """Measured, completed requests of the arm's ok cells at concurrency c, by repetition."""
    out = defaultdict(list)
    for r in range(1, REPS + 1):
        cell = run / arm / f"c{c}-r{r}"
        st = json.loads((cell / "status.json").read_text())
        if st["status"] != "ok":
            continue
        for f in sorted(cell.glob("requests-*.jsonl")):
            for line in f.read_text().splitlines():
                x = json.loads(line)
                if not x["warmup"] and x["status"] == 200 and x["error"] is None:
                    out[r].append(x)
    return out


def _text(x):
    return "".join(ch["text"] for ch in x["chunks"])


def test_compare_with_picked_the_run_in_the_results_directory(runs):
    sgl, ref, x = runs
    sides = x.sides.set_index("side")
    assert sides.loc["other", "run_id"] == ref.name and sides.loc["other", "label"] == "reference engine"
    assert sides.loc["this", "label"] == "SGLang 0.5.23"
    assert "sglang 0.5.23" in sides.loc["this", "packages"] and "sglang" not in sides.loc["other", "packages"]


@pytest.mark.parametrize("arm", ["ar", "linear-b16", "chain-b16", "tree-b15-k8"])
def test_tau_from_the_raw_records(runs, arm):
    sgl, ref, x = runs
    row = x.arms.set_index("arm").loc[arm]
    taus = []
    for run in (sgl, ref):
        recs = [r for rs in _records(run, arm, 1).values() for r in rs]
        tokens = sum(r["usage"]["completion_tokens"] for r in recs)
        steps = sum(r["spec"]["spec_verify_ct"] if r["spec"] else r["usage"]["completion_tokens"] for r in recs)
        taus.append(tokens / steps)
    assert row["tau_this"] == pytest.approx(taus[0]) and row["tau_other"] == pytest.approx(taus[1])
    assert row["tau_gap_pct"] == pytest.approx(100 * (taus[0] / taus[1] - 1))
    assert row["tau_within_tolerance"] == (abs(taus[0] / taus[1] - 1) <= 0.05)


@pytest.mark.parametrize("arm", ["ar", "linear-b16", "chain-b16", "tree-b15-k8"])
def test_agreement_from_the_raw_texts(runs, arm):
    sgl, ref, x = runs
    row = x.arms.set_index("arm").loc[arm]
    this, other = _records(sgl, arm, 1), _records(ref, arm, 1)
    same, prefix, pairs = 0, [], 0
    for r in range(1, REPS + 1):
        a = sorted(this[r], key=lambda q: q["send_ns"])
        b = sorted(other[r], key=lambda q: q["send_ns"])
        assert [q["prompt_id"] for q in a] == [q["prompt_id"] for q in b]   # one user: same order on both
        for p, q in zip(a, b, strict=True):
            pairs += 1
            same += _text(p) == _text(q)
            prefix.append(len(os.path.commonprefix([_text(p), _text(q)])))
    assert (row["pairs"], row["identical"]) == (pairs, same)
    assert row["prefix_chars_mean"] == pytest.approx(sum(prefix) / len(prefix))
    # the lossy arm diverges on every third request (k = 3, 6, ..., 21 of k = 2..21): 13 of 20 per repetition
    assert row["agreement_rate"] == (pytest.approx(13 / 20) if arm == "linear-b16" else 1.0)


def test_throughput_side_by_side_from_the_raw_records(runs):
    sgl, ref, x = runs
    thr = x.throughput.set_index(["arm", "concurrency"])
    # the failed cell (tree-b15-k8, C=4, rep 2) is left out on both sides of its row
    assert len(thr) == 8 and thr.loc[("tree-b15-k8", 4), "reps_this"] == 1
    for (arm, c), row in thr.iterrows():
        got, per_rep = [], []
        for run in (sgl, ref):
            tokens = window = 0.0
            reps = []
            for r in range(1, REPS + 1):
                st = json.loads((run / arm / f"c{c}-r{r}" / "status.json").read_text())
                if st["status"] != "ok":
                    continue
                w = (st["window_end_ns"] - st["window_start_ns"]) / 1e9
                n = sum(q["usage"]["completion_tokens"] for q in _records(run, arm, c)[r]
                        if st["window_start_ns"] <= q["end_ns"] <= st["window_end_ns"])
                window, tokens = window + w, tokens + n
                reps.append(n / w)
            got.append(tokens / window)
            per_rep.append(reps)
        assert row["throughput_this"] == pytest.approx(got[0]) and row["throughput_other"] == pytest.approx(got[1])
        # two runs: no cell is paired; the ratio is of the geometric means over repetitions
        assert row["ratio"] == pytest.approx(math.exp(np.log(per_rep[0]).mean() - np.log(per_rep[1]).mean()))
        if min(map(len, per_rep)) >= 2:
            assert row["ratio_lo"] <= row["ratio"] <= row["ratio_hi"]
        else:        # one repetition on a side: no spread to build an interval from
            assert row["ratio_lo"] != row["ratio_lo"]
