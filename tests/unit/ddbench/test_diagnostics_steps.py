"""The steps diagnostic without a GPU: patch 0004's per-step log lines read and judged (commit = depth + 1 except
on a request's finishing step), its flags on the named arms only, and its JSON with the servers stood in for."""

from __future__ import annotations

import json

import pytest

from containers.launch import max_running_requests, server_command
from ddbench.core.profile import load_profile
from ddbench.diagnostics import steps as step_stats
from ddbench.diagnostics.serving import DiagnosticError, first_prompts, with_flags
from ddbench.diagnostics.steps import judge_steps, parse_steps

pytestmark = pytest.mark.unit


def line(nodes, depth, commit, done) -> str:
    return f"[2026-12-03 04:31:02 TP0] DDTREE step: nodes={nodes} depth={depth} commit={commit} done={done}"


LOG = "\n".join([
    "[2026-12-03 04:30:00 TP0] Load weight end.",
    line([16], [3], [4], [0]),                  # line 2: one request, a full tree, 3 accepted
    line([16, 9], [0, 2], [1, 3], [0, 0]),      # line 3: two requests, one verified narrower than the budget
    "[2026-12-03 04:31:03 TP0] Decode batch. #running-req: 2",
    line([5, 16], [4, 1], [2, 2], [1, 0]),      # line 5: the first finishes on it (max_tokens): 2, not 5, is fine
    line([16], [15], [16], [1]),                # line 6: finishing and consistent
    "DDTREE step: nodes=[16] depth=[] commit=[]",   # not a whole step line: ignored
])


def test_parse_steps_reads_each_step_line_in_order():
    steps = parse_steps(LOG)
    assert [s["line"] for s in steps] == [2, 3, 5, 6]
    assert steps[1] == {"line": 3, "nodes": [16, 9], "depth": [0, 2], "commit": [1, 3], "done": [0, 0]}
    assert parse_steps("") == [] and parse_steps("DDTREE finished\n") == []


def test_commit_is_depth_plus_one_everywhere_but_a_finishing_step():
    got = judge_steps(parse_steps(LOG), budget=16)
    assert got["violation_count"] == 0 and got["violations"] == []
    assert got["steps"] == 4 and got["batched_steps"] == 2                     # lines 3 and 5 verify two requests
    assert got["widths"] == [5, 9, 16] and got["narrow_steps"] == 2           # lines 3 and 5 have a width < 16
    assert got["commit_tokens"] == 4 + 1 + 3 + 2 + 2 + 16
    assert got["tau"] == round(28 / 6, 4)                                      # per request-step, not per batch


def test_a_violation_on_a_step_that_does_not_finish_is_reported():
    log = LOG + "\n" + line([16, 16], [2, 5], [3, 4], [0, 0])   # line 8: the second request commits 4, not 6
    got = judge_steps(parse_steps(log), budget=16)
    assert got["violation_count"] == 1
    assert got["violations"] == [{"line": 8, "request": 1, "depth": 5, "commit": 4}]


def test_the_same_commit_on_a_finishing_step_is_exempt():
    ok = judge_steps(parse_steps(line([16, 16], [2, 5], [3, 4], [0, 1])), budget=16)
    assert ok["violation_count"] == 0
    bad = judge_steps(parse_steps(line([16, 16], [2, 5], [3, 4], [1, 0])), budget=16)  # the other one finished
    assert bad["violations"] == [{"line": 1, "request": 1, "depth": 5, "commit": 4}]


def test_violations_are_all_counted_the_first_twenty_listed():
    log = "\n".join(line([8], [1], [1], [0]) for _ in range(25))
    got = judge_steps(parse_steps(log), budget=8)
    assert got["violation_count"] == 25 and len(got["violations"]) == 20
    assert got["violations"][0]["line"] == 1 and got["violations"][-1]["line"] == 20


def test_a_log_without_step_lines_has_no_steps():
    got = judge_steps(parse_steps("no stats here\n"), budget=15)
    assert (got["steps"], got["tau"], got["violation_count"], got["widths"]) == (0, None, 0, [])


# ---------------------------------------------------------------- flags: the named arm only


def test_with_flags_extends_only_the_named_arm():
    p = load_profile("h200-sglang-ddtree-c1")
    labelled = with_flags(p, p.arm("chain-b15"), ["--speculative-ddtree-step-stats"])
    assert labelled.arm("chain-b15").extra_args == [*p.arm("chain-b15").extra_args, "--speculative-ddtree-step-stats"]
    for a in p.arms:
        if a.id != "chain-b15":
            assert labelled.arm(a.id) == a, a.id
            assert "--speculative-ddtree-step-stats" not in server_command(labelled, labelled.arm(a.id)).argv
    assert "--speculative-ddtree-step-stats" in server_command(labelled, labelled.arm("chain-b15")).argv
    assert "--speculative-ddtree-step-stats" not in p.arm("chain-b15").extra_args   # the original is untouched
    assert [a.id for a in labelled.arms] == [a.id for a in p.arms]


# ---------------------------------------------------------------- steps_check, servers stood in for


class FakeServer:
    def __init__(self, arm):
        self.url, self.stopped = f"http://fake/{arm}", 0

    def stop(self):
        self.stopped += 1


@pytest.fixture
def stand_in(monkeypatch):
    """up_together writes each arm's server log (the step lines) and returns fake servers; chat answers."""
    seen = {}

    def up_together(labelled, arms, cell, **kw):
        seen["profile"], seen["arms"], seen["cell"] = labelled, arms, cell
        seen["servers"] = {a: FakeServer(a) for a in arms if a not in seen.get("down", {})}
        for a in seen["servers"]:
            (cell / a).mkdir(parents=True, exist_ok=True)
            (cell / a / "server.log").write_text(seen.get("logs", {}).get(a, LOG))
        return seen["servers"], dict(seen.get("down", {}))

    monkeypatch.setattr(step_stats, "up_together", up_together)
    monkeypatch.setattr(step_stats, "probe", lambda url: "m")
    monkeypatch.setattr(step_stats, "chat", lambda url, model, q, profile: {"error": seen.get("errors", {}).get(q.id)})
    return seen


def last_value(argv: list[str], flag: str) -> str:
    """What argparse keeps: the last occurrence's value."""
    return argv[len(argv) - 1 - argv[::-1].index(flag) + 1]


@pytest.mark.parametrize("name, concurrency, want", [("h200-sglang-ddtree-c1", 4, 4),   # the profile's C=1 only
                                                     ("h200-sglang-ddtree-c1", 1, 1),
                                                     ("h200-sglang-ddtree", 4, 32)])   # the profile's own is larger
def test_steps_check_lets_the_server_batch_what_it_sends(tmp_path, stand_in, name, concurrency, want):
    p = load_profile(name)
    arm = next(a for a in p.arms if a.kind in ("chain", "tree"))
    assert want == max(concurrency, max_running_requests(p))
    doc = step_stats.steps_check(tmp_path, p, name, [arm.id], 3, concurrency, prune=False)
    argv = doc["arms"][arm.id]["argv"]
    assert last_value(argv, "--max-running-requests") == str(want)
    assert "--speculative-ddtree-step-stats" in argv and "--is-ddtree-prune" not in argv
    assert argv == server_command(stand_in["profile"], stand_in["profile"].arm(arm.id)).argv
    assert doc["concurrency"] == concurrency and doc["passed"] is True


def test_steps_check_writes_its_json_and_judges_each_arm(tmp_path, stand_in):
    p = load_profile("h200-sglang-ddtree-c1")
    stand_in["logs"] = {"tree-b15-k8": LOG + "\n" + line([16], [2], [2], [0])}
    doc = step_stats.steps_check(tmp_path, p, "x", ["chain-b15", "tree-b15-k8"], 3, 2, prune=True, label="t")
    assert stand_in["arms"] == ["chain-b15", "tree-b15-k8"] and stand_in["cell"] == tmp_path / "diagnostics" / "steps-t"
    on_disk = json.loads((tmp_path / "diagnostics" / "steps-t.json").read_text())
    assert on_disk == json.loads(json.dumps(doc)) and doc["diagnostic"] == "steps" and doc["prune"] is True
    chain, tree = doc["arms"]["chain-b15"], doc["arms"]["tree-b15-k8"]
    assert "--is-ddtree-prune" in chain["argv"] and "--is-ddtree-prune" in tree["argv"]
    # only the named arms carry the flags
    for a in p.arms:
        if a.id not in doc["arms"]:
            assert "--speculative-ddtree-step-stats" not in stand_in["profile"].arm(a.id).extra_args, a.id
    assert chain["passed"] is True and (chain["steps"], chain["batched_steps"], chain["requests_ok"]) == (4, 2, 3)
    assert tree["passed"] is False and tree["violation_count"] == 1 and tree["violations"][0]["line"] == 8
    assert doc["passed"] is False
    assert all(s.stopped >= 1 for s in stand_in["servers"].values())


def test_prune_needs_batched_narrow_steps_to_pass(tmp_path, stand_in):
    p = load_profile("h200-sglang-ddtree-c1")
    stand_in["logs"] = {"chain-b15": "\n".join(line([16], [d], [d + 1], [0]) for d in range(4))}  # C=1 only, full
    assert step_stats.steps_check(tmp_path, p, "x", ["chain-b15"], 3, 2, prune=False)["passed"] is True
    doc = step_stats.steps_check(tmp_path, p, "x", ["chain-b15"], 3, 2, prune=True)
    assert doc["arms"]["chain-b15"]["violation_count"] == 0 and doc["passed"] is False


def test_steps_check_fails_on_failed_requests_down_arms_and_no_steps(tmp_path, stand_in):
    p = load_profile("h200-sglang-ddtree-c1")
    first = first_prompts(p, 3)[0].id
    stand_in.update(errors={first: "HTTP 500: boom"}, down={"tree-b15-k8": "timed out"}, logs={"tree-b15-k15": ""})
    doc = step_stats.steps_check(tmp_path, p, "x", ["chain-b15", "tree-b15-k8", "tree-b15-k15"], 3, 1, prune=False)
    a = doc["arms"]
    assert a["chain-b15"]["status"] == "failed" and a["chain-b15"]["reason"] == f"requests failed: {[first]}"
    assert a["chain-b15"]["requests_ok"] == 2 and a["chain-b15"]["passed"] is False
    assert a["tree-b15-k8"] == {**a["tree-b15-k8"], "status": "failed", "reason": "timed out", "passed": False}
    assert a["tree-b15-k15"]["steps"] == 0 and a["tree-b15-k15"]["passed"] is False
    assert doc["passed"] is False


def test_steps_check_refuses_what_it_cannot_judge(tmp_path, stand_in):
    with pytest.raises(DiagnosticError, match="needs chain or tree arms"):
        step_stats.steps_check(tmp_path, load_profile("h200-sglang-ddtree-c1"), "x", ["linear-b16"], 3, 1, False)
    with pytest.raises(DiagnosticError, match="needs chain or tree arms"):
        step_stats.steps_check(tmp_path, load_profile("h200-sglang-ddtree-c1"), "x", [], 3, 1, False)
    with pytest.raises(DiagnosticError, match="not on the DDTree fork"):
        step_stats.steps_check(tmp_path, load_profile("h200-sglang-tiny"), "x", ["tree-b15-k15"], 3, 1, False)
    assert "profile" not in stand_in                                       # nothing was brought up
