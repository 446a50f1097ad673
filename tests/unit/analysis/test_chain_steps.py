"""The check "chain takes linear's verify steps" (analysis.trust.checks._chain_steps): at T=0 and C=1 a chain arm's
content chunks (one per verify step) must be its linear arm's, prompt by prompt and repetition by repetition,
wherever the two outputs are the same text. Hand-made runs, read back through ingest."""

from __future__ import annotations

import pytest
from handrun import profile, rec

from analysis.read.ingest import load
from analysis.trust.checks import FAIL, NA, PASS, _chain_steps
from ddbench.core.records import CellStatus
from ddbench.core.results import write_json_atomic, write_text_atomic

pytestmark = pytest.mark.unit

NAME = "chain takes linear's verify steps"
ARMS = [{"id": "linear-b4", "kind": "linear", "block_size": 4}, {"id": "chain-b4", "kind": "chain", "block_size": 4}]
# per (repetition, prompt): the content chunks linear-b4 streamed, one per verify step
LINEAR = {(1, "p1"): ["a", " b c", " d"], (1, "p2"): ["x", " y z", "!"],
          (2, "p1"): ["a", " b c", " d"], (2, "p2"): ["x", " y z", "!"]}


def req(arm, rep, prompt, pieces, c=1, warmup=False, error=None):
    chunks = [(100 + 10 * i, s, 1) for i, s in enumerate(pieces)]
    r = rec(arm, f"{arm}-c{c}-r{rep}-{prompt}{'-w' if warmup else ''}", 0, chunks, 200, len(pieces), prompt=prompt,
            warmup=warmup, status=500 if error else 200, error=error)
    return r.model_copy(update={"repetition": rep, "concurrency": c})


def write_run(root, records, prof=None):
    prof = prof or profile(arms=ARMS, load={"concurrency": [1, 2], "requests_per_user": 2, "repetitions": 2})
    run = root / prof.name / "r1"
    cells = {}
    for r in records:
        cells.setdefault((r.arm, r.concurrency, r.repetition), []).append(r)
    for (arm, c, rep), rs in cells.items():
        cell = run / arm / f"c{c}-r{rep}"
        write_text_atomic(cell / "requests-h-1.jsonl", "".join(r.model_dump_json() + "\n" for r in rs))
        st = CellStatus(arm=arm, concurrency=c, repetition=rep, status="ok", started_unix=1.8e9, ended_unix=1.8e9 + 2,
                        requests=sum(not r.warmup for r in rs), errors=sum(bool(r.error) for r in rs),
                        client_cpu_max=12.0)
        write_json_atomic(cell / "status.json", st.model_dump(mode="json"))
    write_json_atomic(run / "manifest.json", {"profile": prof.model_dump(mode="json"), "profile_digest": prof.digest(),
                                              "prompt_set_digest": "ab" * 32})
    return load(run)


def records(chain=None, linear=None):
    """Both arms at C=1, every (repetition, prompt) of LINEAR; chain's chunks as linear's unless replaced."""
    lin = {**LINEAR, **(linear or {})}
    ch = {**lin, **(chain or {})}
    return [req("linear-b4", rep, p, pieces) for (rep, p), pieces in lin.items()] + \
           [req("chain-b4", rep, p, pieces) for (rep, p), pieces in ch.items()]


def check(tmp_path, recs, **kw):
    [c] = _chain_steps(write_run(tmp_path, recs, **kw))
    assert (c.kind.label, str(c.scope)) == (NAME, "chain-b4")
    return c


def test_the_same_chunks_pass(tmp_path):
    c = check(tmp_path, records())
    assert c.status == PASS
    assert c.evidence == "all 4 C=1 requests with linear-b4's output take its verify steps (chunk by chunk)"


def test_one_moved_chunk_boundary_fails_naming_prompt_repetition_and_step(tmp_path):
    # the same text, "x y z!", but the chain's second step commits one token less, its third one more
    c = check(tmp_path, records(chain={(2, "p2"): ["x", " y", " z!"]}))
    assert c.status == FAIL
    assert c.evidence == ("1 of 4 requests with linear-b4's output take other steps; first: prompt p2 rep 2, "
                          "step 1 (3 chunks against 3)")


def test_one_step_more_fails_and_the_first_of_several_is_named(tmp_path):
    c = check(tmp_path, records(chain={(2, "p1"): ["a", " b c", " ", "d"], (1, "p2"): ["x y z!"]}))
    assert c.status == FAIL
    assert c.evidence.startswith("2 of 4 requests with linear-b4's output take other steps; "
                                 "first: prompt p2 rep 1, step 0 (1 chunks against 3)")


def test_a_divergent_output_is_left_to_the_output_check(tmp_path):
    # p1 rep 1 says something else (other chunks too): not judged here, only counted
    c = check(tmp_path, records(chain={(1, "p1"): ["a", " b", " c e"]}))
    assert c.status == PASS
    assert c.evidence == ("all 3 C=1 requests with linear-b4's output take its verify steps (chunk by chunk); "
                          "1 outputs diverged (left to 'chain equals linear at T=0')")
    # a moved boundary on a request whose output is the same is still caught beside it
    c = check(tmp_path / "b", records(chain={(1, "p1"): ["a", " b", " c e"], (1, "p2"): ["x", " y", " z!"]}))
    assert c.status == FAIL and c.evidence.startswith("1 of 3 requests") and "prompt p2 rep 1, step 1" in c.evidence
    assert c.evidence.endswith("; 1 outputs diverged (left to 'chain equals linear at T=0')")


def test_every_output_divergent_is_not_applicable(tmp_path):
    c = check(tmp_path, records(chain={k: [*v, "?"] for k, v in LINEAR.items()}))
    assert c.status == NA and c.evidence.startswith("every one of 4 outputs diverged from linear-b4's")


def test_only_measured_successful_c1_requests_count(tmp_path):
    recs = records() + [
        # at C=2 steps depend on the batch: not this check's
        req("linear-b4", 1, "p5", ["a", " b c", " d"], c=2), req("chain-b4", 1, "p5", ["a b", " c d"], c=2),
        # warm-up and failed requests are not compared
        req("linear-b4", 1, "p3", ["q", " r"], warmup=True), req("chain-b4", 1, "p3", ["q r"], warmup=True),
        req("linear-b4", 2, "p4", ["s", " t"]), req("chain-b4", 2, "p4", ["s t"], error="HTTP 500: boom"),
    ]
    c = check(tmp_path, recs)
    assert c.status == PASS
    assert c.evidence == "all 4 C=1 requests with linear-b4's output take its verify steps (chunk by chunk)"


def test_a_keep_alive_chunk_is_not_a_step(tmp_path):
    c = check(tmp_path, records(chain={(1, "p1"): ["", "a", "", " b c", " d"]}))
    assert c.status == PASS


def test_without_both_arms_at_c1_it_is_not_applicable(tmp_path):
    recs = [r for r in records() if r.arm == "linear-b4"] + [req("chain-b4", 1, "p1", ["a", " b c", " d"], c=2)]
    c = check(tmp_path, recs)
    assert c.status == NA and c.evidence == "no C=1 request of both chain-b4 and linear-b4"


def test_no_chain_or_no_linear_of_its_block_size_checks_nothing(tmp_path):
    arms = [ARMS[0], {"id": "chain-b8", "kind": "chain", "block_size": 8}]
    prof = profile(arms=arms, load={"concurrency": [1], "requests_per_user": 2})
    recs = [req("linear-b4", 1, "p1", ["a"]), req("chain-b8", 1, "p1", ["a"])]
    assert _chain_steps(write_run(tmp_path, recs, prof=prof)) == []
