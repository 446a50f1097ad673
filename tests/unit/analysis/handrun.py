"""A run small enough to compute every metric by hand (see test_metrics.py for the arithmetic)."""

import json

from ddbench.core.profile import Profile
from ddbench.core.records import CellStatus, RequestRecord
from ddbench.core.results import write_json_atomic, write_text_atomic

MS = 1_000_000
T0 = 10_000 * MS


def profile(**over) -> Profile:
    d = {"name": "hand", "backend": {"kind": "refengine"}, "models": {"target": "t", "drafter": "d"},
         "arms": [{"id": "ar", "kind": "ar"}, {"id": "tree-b4-k2", "kind": "tree", "block_size": 4, "budget": 4,
                                                "topk": 2}],
         "workload": {"prompt_set": "p.jsonl", "max_tokens": 8}, "load": {"concurrency": [1], "requests_per_user": 2}}
    d.update(over)
    return Profile.model_validate(d)


def rec(arm, rid, send_ms, chunks, end_ms, n, warmup=False, spec=None, status=200, error=None, prompt="p1",
        category="code", temperature=0.0):
    return RequestRecord(
        request_id=rid, arm=arm, concurrency=1, repetition=1, warmup=warmup, prompt_id=prompt, category=category,
        worker="h:1", user=0, max_tokens=8, temperature=temperature, send_ns=T0 + send_ms * MS,
        send_unix_ns=1_800_000_000 * 10**9 + send_ms * MS,
        chunks=[{"t_ns": T0 + t * MS, "text": s, "tokens": k} for t, s, k in chunks],
        end_ns=T0 + end_ms * MS, status=status, error=error, finish_reason="length" if not error else None,
        usage={"prompt_tokens": 5, "completion_tokens": n} if not error else None, spec=spec)


def hand_records():
    ar = [
        rec("ar", "w", -500, [(-400, "a", 1), (-350, " b", 1)], -300, 2, warmup=True),
        # A: TTFT 100 ms, E2E 300 ms, TPOT 200/3 ms, gaps 50, 50, 60 ms
        rec("ar", "A", 0, [(100, "a", 1), (150, " b", 1), (200, " c", 1), (260, " d", 1)], 300, 4),
        # B: an empty keep-alive chunk first: TTFT counts the first chunk with content (120 ms)
        rec("ar", "B", 300, [(350, "", 0), (420, "a", 1), (480, " b", 1), (520, " c", 1), (600, " d", 1)], 620, 4),
        rec("ar", "D", 620, [], 640, 0, status=500, error="HTTP 500: boom"),
    ]
    tree = [
        # E: prefill token + one verify step committing 3 (2 drafts accepted): τ = 4 / 1
        rec("tree-b4-k2", "E", 0, [(100, "a", 1), (200, " b c d", 3)], 210, 4,
            spec={"spec_verify_ct": 1, "spec_num_correct_drafts": 2, "spec_num_proposed_drafts": 3,
                  "spec_correct_drafts_histogram": [0, 0, 1, 0], "spec_accepted_depth_histogram": [0, 0, 1, 0],
                  "spec_commit_length_histogram": [0, 0, 0, 1, 0], "spec_avg_tree_nodes": 4.0}),
        # F: prefill + steps committing 2, 2, 1: τ = 6 / 3
        rec("tree-b4-k2", "F", 400, [(500, "a", 1), (540, " b c", 2), (580, " d e", 2), (640, " f", 1)], 650, 6,
            spec={"spec_verify_ct": 3, "spec_num_correct_drafts": 2, "spec_num_proposed_drafts": 9,
                  "spec_correct_drafts_histogram": [1, 2, 0, 0], "spec_accepted_depth_histogram": [1, 2, 0, 0],
                  "spec_commit_length_histogram": [0, 1, 2, 0, 0], "spec_avg_tree_nodes": 4.0}),
    ]
    return ar, tree


def write_hand_run(root, prof=None, ar=None, tree=None, window=True, digest=None):
    prof = prof or profile()
    run = root / prof.name / "r1"
    a, t = hand_records()
    for arm, records in (("ar", ar or a), ("tree-b4-k2", tree or t)):
        cell = run / arm / "c1-r1"
        write_text_atomic(cell / "requests-h-1.jsonl", "".join(r.model_dump_json() + "\n" for r in records))
        measured = [r for r in records if not r.warmup]
        st = CellStatus(arm=arm, concurrency=1, repetition=1, status="ok", started_unix=1.8e9, ended_unix=1.8e9 + 2,
                        window_start_ns=T0 if window else None, window_end_ns=T0 + 1000 * MS if window else None,
                        requests=len(measured), errors=sum(1 for r in measured if r.error), client_cpu_max=12.0)
        write_json_atomic(cell / "status.json", st.model_dump(mode="json"))
    write_json_atomic(run / "manifest.json", {"profile": prof.model_dump(mode="json"),
                                              "profile_digest": digest or prof.digest(),
                                              "prompt_set_digest": "ab" * 32})
    return run


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
