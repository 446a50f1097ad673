"""A run on the DDTree fork checks commit = depth + 1 of its chain and tree arms in the steps diagnostic."""

import json
from types import SimpleNamespace

from analysis.trust.checks import FAIL, NA, PASS, _step_diagnostics


def _run(tmp_path, ddtree="fork"):
    arms = [SimpleNamespace(id=i, kind=k) for i, k in
            [("ar", "ar"), ("linear-b16", "linear"), ("chain-b15", "chain"), ("tree-b15-k8", "tree")]]
    return SimpleNamespace(path=tmp_path, profile=SimpleNamespace(backend=SimpleNamespace(ddtree=ddtree), arms=arms))


def _write(tmp_path, name, arms, prune=False, c=1):
    (tmp_path / "diagnostics").mkdir(exist_ok=True)
    (tmp_path / "diagnostics" / name).write_text(json.dumps({"arms": arms, "prune": prune, "concurrency": c}))


def _arm(passed=True, violations=0, status="ok"):
    return {"status": status, "passed": passed, "violation_count": violations, "steps": 100, "batched_steps": 0,
            "widths": [15], "requests_ok": 8}


def test_each_chain_and_tree_arm_is_judged_by_its_diagnostic(tmp_path):
    _write(tmp_path, "steps.json", {"chain-b15": _arm(), "tree-b15-k8": _arm(passed=False, violations=3)})
    got = {str(c.scope): c for c in _step_diagnostics(_run(tmp_path))}
    assert got["chain-b15"].status == PASS and "0 of 100 steps" in got["chain-b15"].evidence
    assert got["tree-b15-k8"].status == FAIL and "3 of 100 steps" in got["tree-b15-k8"].evidence
    assert set(got) == {"chain-b15", "tree-b15-k8"}          # ar and linear have no tree steps


def test_an_arm_without_a_diagnostic_is_na_saying_how_to_run_it(tmp_path):
    _write(tmp_path, "steps-prune.json", {"tree-b15-k8": _arm()}, prune=True, c=4)
    got = {str(c.scope): c for c in _step_diagnostics(_run(tmp_path))}
    assert got["chain-b15"].status == NA and "--arm chain-b15" in got["chain-b15"].evidence
    assert got["tree-b15-k8"].status == PASS and "pruned, C=4" in got["tree-b15-k8"].evidence


def test_an_arm_that_did_not_serve_or_a_broken_record_fails(tmp_path):
    _write(tmp_path, "steps.json", {"chain-b15": _arm(status="failed")})
    (tmp_path / "diagnostics" / "steps-x.json").write_text("{not json")
    got = _step_diagnostics(_run(tmp_path))
    assert [c.status for c in got if str(c.scope) == "chain-b15"] == [FAIL]
    assert any(c.status == FAIL and "steps-x.json" in c.evidence for c in got)


def test_other_backends_have_no_such_check(tmp_path):
    assert _step_diagnostics(_run(tmp_path, ddtree=None)) == []
