"""Continuous batching: a request stepped in a batch gets exactly the tokens and steps it gets
alone, while others join and leave around it (T=0 fp32, and seeded T>0)."""

from __future__ import annotations

import pytest
import torch
from engine_prompts import prompts

from refengine.batch import Batch, generate_all
from refengine.engine import Engine, buckets
from refengine.plan import Plan
from refengine.request import Request
from refengine.sampling import Sampling

ARMS = ["ar", "linear-b16", "chain-b15", "tree-b15-k8", "tree-b31-k4", "tree-b12-k3-d0.3"]


def _requests(ps, sampling, max_tokens, stops):
    return [Request(list(p), sampling(i), max_tokens[i % len(max_tokens)], frozenset(stops[i % len(stops)]),
                    sampling(i).generator("cpu")) for i, p in enumerate(ps)]


@pytest.mark.parametrize("arm", ARMS)
@pytest.mark.parametrize("pair", ["rand_pair", "echo"])
def test_batched_requests_match_their_solo_runs(request, pair, arm):
    target, drafter = request.getfixturevalue(pair)
    plan = Plan.parse(arm)
    ps = prompts(7, seed=11)
    solo = Engine(target, drafter, capacity=256)
    free = [solo.generate(p, Plan("ar"), max_tokens=30).tokens for p in ps]
    stops = [set(), {free[1][10]}, set(), {free[3][5]}]  # some end by a stop token, some by max_tokens
    max_tokens = [30, 17, 45]
    reqs = _requests(ps, lambda i: Sampling(), max_tokens, stops)
    with torch.inference_mode():
        generate_all(Engine(target, drafter, capacity=256, batch=3), reqs, plan, join_every=2)
    accepted = 0
    for i, (p, r) in enumerate(zip(ps, reqs, strict=True)):
        alone = solo.generate(p, plan, max_tokens=max_tokens[i % 3], stop_ids=stops[i % 4])
        assert r.tokens == alone.tokens, (arm, i)
        assert r.finish_reason == alone.finish_reason
        assert [(s.committed, s.accepted, s.nodes) for s in r.steps] == \
               [(s.committed, s.accepted, s.nodes) for s in alone.steps], (arm, i)
        accepted += sum(s.accepted for s in r.steps)
    assert {r.finish_reason for r in reqs} == {"stop", "length"}
    if pair == "echo" and plan.speculative:
        assert accepted > 0  # drafts were really accepted, so the per-row commits differed


@pytest.mark.parametrize("arm", ["ar", "linear-b16", "tree-b15-k8"])
def test_seeded_sampling_in_a_batch_matches_solo(echo, arm):
    target, drafter = echo
    plan = Plan.parse(arm)
    ps = prompts(5, seed=12)
    sampling = lambda i: Sampling(temperature=1.0, top_p=0.9, top_k=40, seed=100 + i)  # noqa: E731
    reqs = _requests(ps, sampling, [25], [set()])
    with torch.inference_mode():
        generate_all(Engine(target, drafter, capacity=256, batch=4), reqs, plan)
    solo = Engine(target, drafter, capacity=256)
    for i, (p, r) in enumerate(zip(ps, reqs, strict=True)):
        assert r.tokens == solo.generate(p, plan, sampling(i), max_tokens=25).tokens, (arm, i)


def test_a_leaving_request_hands_its_row_to_the_last(echo):
    target, drafter = echo
    engine = Engine(target, drafter, capacity=128, batch=3)
    batch = Batch(engine, Plan.parse("linear-b16"))
    ps = prompts(3, seed=13)
    reqs = [Request(list(p), Sampling(), 40, frozenset()) for p in ps]
    with torch.inference_mode():
        for r in reqs:
            batch.add(r)
        batch.step()
        lengths = engine._tcache.host_lengths()
        batch.remove(reqs[0])
    assert batch.reqs == [reqs[2], reqs[1]]
    assert engine._tcache.host_lengths() == [lengths[2], lengths[1], 0]
    with pytest.raises(ValueError, match="3 cache rows"):
        engine.use_rows(4)


def test_a_full_batch_refuses_another_request(rand_pair):
    engine = Engine(*rand_pair, capacity=64, batch=1)
    batch = Batch(engine, Plan("ar"))
    with torch.inference_mode():
        batch.add(Request([1, 2, 3], Sampling(), 5, frozenset()))
        with pytest.raises(RuntimeError, match="all 1 cache rows are in use"):
            batch.add(Request([1, 2, 3], Sampling(), 5, frozenset()))
        with pytest.raises(ValueError, match="KV capacity 64"):
            Batch(engine, Plan("ar")).add(Request([1] * 60, Sampling(), 10, frozenset()))


def test_graph_buckets_cover_every_batch_size():
    assert buckets(1) == [1]
    assert buckets(8) == [1, 2, 4, 8]
    assert buckets(32) == [1, 2, 4, 8, 16, 24, 32]
    assert buckets(20) == [1, 2, 4, 8, 16, 20]
