"""The recommendation rule, on planted runs: an arm its own checks fail is never the pick, the pick is the simplest
eligible arm no eligible arm beats (so a non-transitive triple cannot fool it), and thin evidence recommends
nothing rather than something stronger than more pairs would say."""

from types import SimpleNamespace

import pandas as pd

from analysis import recommend
from analysis.trust.kinds import FAIL, RUN, Check, Kind, Scope, frame
from ddbench.core.profile import Profile
from report import front

ARMS = [{"id": "ar", "kind": "ar"}, {"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8}]


def run(throughput: dict, ratios: list, failed=(), reps=None, arms=ARMS):
    """A stand-in analysis at C=1: throughput per arm, ratios as (arm, baseline, r, lo, hi), failed checks as
    (Kind, Scope), ok repetitions per arm (4 each unless given)."""
    p = Profile.model_validate({
        "name": "hand", "backend": {"kind": "refengine"}, "models": {"target": "t", "drafter": "d"}, "arms": arms,
        "workload": {"prompt_set": "p.jsonl", "max_tokens": 8}, "load": {"concurrency": [1], "requests_per_user": 2}})
    reps = reps or {}
    summary = pd.DataFrame([{"arm": a, "concurrency": 1, "throughput": t} for a, t in throughput.items()])
    cells = pd.DataFrame([{"arm": a, "concurrency": 1, "repetition": r, "status": "ok"}
                          for a in throughput for r in range(1, reps.get(a, 4) + 1)])
    checks = frame([Check(k, s, FAIL, "planted") for k, s in failed])
    speedups = pd.DataFrame([{"arm": x, "baseline": y, "baseline_kind": p.arm(y).kind, "concurrency": 1,
                              "speedup": r, "speedup_lo": lo, "speedup_hi": hi, "pairs": 4, "sign_p": 0.1,
                              "mde": 0.05, "n_to_resolve": None, "ablation": False,
                              "verdict": "faster" if lo > 1 else "slower" if hi < 1 else "within noise"}
                             for x, y, r, lo, hi in ratios])
    a = SimpleNamespace(run=SimpleNamespace(profile=p, manifest=SimpleNamespace(models={})), summary=summary,
                        cells=cells, checks=checks, speedups=speedups, kinds={x["id"]: x["kind"] for x in arms})
    a.recommendation = recommend.recommendation(a)
    return a


def picked(a):
    rec = a.recommendation
    return list(rec.loc[rec["pick"], "arm"])


def sentence(a):
    return str(front.recommend(a, front.groups(a)[0])[1]).replace("-{}", "-")   # TeX's hyphen guard, read back


def test_a_lossy_fastest_arm_is_passed_over_saying_why():
    a = run({"ar": 100, "linear-b16": 200, "tree-b15-k8": 230},
            [("linear-b16", "ar", 2.0, 1.9, 2.1), ("tree-b15-k8", "ar", 2.3, 2.2, 2.4),
             ("tree-b15-k8", "linear-b16", 1.15, 1.10, 1.20)],
            failed=[(Kind.LOSSLESS, Scope("tree-b15-k8"))])
    assert picked(a) == ["linear-b16"]
    s = sentence(a)
    assert "deploy linear-b16" in s and "tree-b15-k8 is 1.15" in s
    assert "but failed: lossless at T=0: not recommended" in s


def test_ar_differing_from_itself_is_nondeterminism_not_a_loss():
    a = run({"ar": 300, "linear-b16": 200, "tree-b15-k8": 230},
            [("linear-b16", "ar", 0.66, 0.6, 0.7), ("tree-b15-k8", "ar", 0.77, 0.7, 0.8),
             ("tree-b15-k8", "linear-b16", 1.15, 1.10, 1.20)],
            failed=[(Kind.LOSSLESS, Scope("ar")), (Kind.LOSSLESS, Scope("linear-b16"))])
    assert picked(a) == ["ar"]
    assert a.recommendation.set_index("arm").loc["linear-b16", "why_not"] == "failed: lossless at T=0"


def test_a_failed_cell_or_too_few_requests_at_this_c_bars_the_arm_there():
    a = run({"ar": 100, "linear-b16": 200, "tree-b15-k8": 230},
            [("linear-b16", "ar", 2.0, 1.9, 2.1), ("tree-b15-k8", "ar", 2.3, 2.2, 2.4),
             ("tree-b15-k8", "linear-b16", 1.15, 1.10, 1.20)],
            failed=[(Kind.MIN_REQUESTS, Scope("tree-b15-k8", 1)), (Kind.CELL_FINISHED, Scope("linear-b16", 1, 3)),
                    (Kind.HOST_QUIET, RUN)])   # a condition: warns only
    assert picked(a) == ["ar"]
    rec = a.recommendation.set_index("arm")
    assert rec.loc["tree-b15-k8", "why_not"] == "failed: minimum requests"
    assert rec.loc["ar", "beaten_by"] == ""        # the arms that beat it are not eligible
    # a check at another C, or of another arm whose id starts alike, bars nothing here
    assert recommend.barred(a.checks.assign(concurrency=16), "tree-b15-k8", 1) == []
    assert recommend.barred(a.checks.assign(arm="tree-b15-k8-eager"), "tree-b15-k8", 1) == []
    # what bars is the kind's field, never its printed label
    assert recommend.barred(a.checks.assign(check="renamed"), "tree-b15-k8", 1) == ["renamed"]
    assert recommend.barred(a.checks.assign(bars=False), "tree-b15-k8", 1) == []


def test_a_non_transitive_triple_cannot_pick_an_arm_that_another_beats():
    # linear beats ar; the tree is within noise of both (it is noisier). Taking the simplest arm within noise of
    # the fastest (the tree) would pick ar, which linear beats at 95% confidence
    a = run({"ar": 100, "linear-b16": 110, "tree-b15-k8": 120},
            [("linear-b16", "ar", 1.10, 1.05, 1.15), ("tree-b15-k8", "ar", 1.20, 0.95, 1.50),
             ("tree-b15-k8", "linear-b16", 1.09, 0.90, 1.30)])
    assert picked(a) == ["linear-b16"]
    assert a.recommendation.set_index("arm").loc["ar", "beaten_by"] == "linear-b16"
    assert "tree-b15-k8 is within noise of it" in sentence(a)


def test_one_pair_is_not_enough_evidence_and_never_says_more_than_four_would():
    ratios = [("linear-b16", "ar", 2.08, 1.5, 2.9), ("tree-b15-k8", "ar", 2.1, 1.6, 2.8),
              ("tree-b15-k8", "linear-b16", 1.01, 0.9, 1.1)]
    thin = run({"ar": 100, "linear-b16": 208, "tree-b15-k8": 210}, ratios, reps={"linear-b16": 1, "tree-b15-k8": 1})
    assert picked(thin) == ["ar"]   # the only arm with an interval; the sentence names what was passed over
    assert "not enough evidence (1 pair)" in sentence(thin)
    none = run({"ar": 100, "linear-b16": 208, "tree-b15-k8": 210}, ratios,
               reps={"ar": 1, "linear-b16": 1, "tree-b15-k8": 1})
    assert picked(none) == [] and "no recommendation" in sentence(none)


def test_an_arm_that_never_answered_leaves_nothing_to_recommend():
    """A dead URL: linear-b16's every cell failed, so AR was compared with nothing; AR alone is no verdict."""
    a = run({"ar": 100}, [])
    a.cells = pd.concat([a.cells, pd.DataFrame([{"arm": "linear-b16", "concurrency": 1, "repetition": r,
                                                 "status": "failed"} for r in range(1, 5)])], ignore_index=True)
    a.recommendation = recommend.recommendation(a)
    assert picked(a) == []
    assert "linear-b16: not measured: no cell of it at C=1 finished" in sentence(a)
    assert picked(run({"ar": 100}, [])) == ["ar"]   # an arm the profile never planned there is no gap


def test_a_miscounted_arm_is_barred_by_its_counts():
    """Half its completion tokens lost: the server's τ and the client's part, the drawn lengths are missed."""
    ratios = [("linear-b16", "ar", 2.0, 1.9, 2.1), ("tree-b15-k8", "ar", 2.3, 2.2, 2.4),
              ("tree-b15-k8", "linear-b16", 1.15, 1.10, 1.20)]
    for kind, scope in ((Kind.TAU, Scope("tree-b15-k8", 1, 2)),
                        (Kind.REQUESTED_LENGTHS, Scope("tree-b15-k8", part="output"))):
        a = run({"ar": 100, "linear-b16": 200, "tree-b15-k8": 230}, ratios, failed=[(kind, scope)])
        assert picked(a) == ["linear-b16"], kind
        assert f"but failed: {kind.label}: not recommended" in sentence(a)


def test_a_chain_is_a_check_never_the_pick():
    """chain-b15 takes linear-b16's steps by construction: where linear cannot be picked (here: lossy), the chain
    is not picked in its place, and says why."""
    a = run({"ar": 100, "linear-b16": 200, "chain-b15": 201},
            [("linear-b16", "ar", 2.0, 1.9, 2.1), ("chain-b15", "ar", 2.01, 1.9, 2.1),
             ("chain-b15", "linear-b16", 1.0, 0.95, 1.05)],
            failed=[(Kind.LOSSLESS, Scope("linear-b16"))],
            arms=[*ARMS, {"id": "chain-b15", "kind": "chain", "block_size": 16}])
    rec = a.recommendation.set_index("arm")
    assert picked(a) == ["ar"]   # the only eligible arm: the chain does not stand in for a lossy linear
    assert rec.loc["chain-b15", "why_not"] == "a check of the tree code (it must equal linear), never deployed"
