"""Sampling filters and arm ids: exact values and clear errors."""

from __future__ import annotations

import pytest
import torch

from refengine.engine import Engine
from refengine.plan import Plan
from refengine.sampling import Sampling, pick, probs


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]).log_softmax(-1) * 1.0
    p = logits.softmax(-1)
    got = probs(logits, Sampling(temperature=1.0, top_k=2))
    torch.testing.assert_close(got, torch.cat([p[:2] / p[:2].sum(), torch.zeros(3)]))
    # top_p: keep the smallest prefix whose mass reaches top_p
    mass = p.cumsum(0)
    k = int((mass < 0.8).sum()) + 1
    got = probs(logits, Sampling(temperature=1.0, top_p=0.8))
    torch.testing.assert_close(got, torch.cat([p[:k] / p[:k].sum(), torch.zeros(5 - k)]))
    # temperature sharpens
    got = probs(logits, Sampling(temperature=0.5))
    torch.testing.assert_close(got, (logits / 0.5).softmax(-1))


def test_greedy_and_seeded_pick():
    logits = torch.randn(7, 50)
    assert torch.equal(pick(logits, Sampling(), None), logits.argmax(-1))
    s = Sampling(temperature=1.0, seed=5)
    assert torch.equal(pick(logits, s, s.generator("cpu")), pick(logits, s, s.generator("cpu")))


@pytest.mark.parametrize("kwargs,field", [({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"),
                                          ({"top_k": -2}, "top_k")])
def test_bad_sampling_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Sampling(**kwargs)


def test_arm_ids():
    assert Plan.parse("ar") == Plan("ar")
    assert Plan.parse("linear-b16") == Plan("linear", block_size=16)
    assert Plan.parse("chain-b15") == Plan("chain", block_size=16, budget=15, topk=1)
    assert Plan.parse("tree-b15-k8-d0.2") == Plan("tree", budget=15, topk=8, depth_bonus=0.2)
    for bad in ("tree-b15", "linear", "ar-b3", "linear-b16-k2", "beam-b4"):
        with pytest.raises(ValueError, match=bad):
            Plan.parse(bad)


def test_engine_rejects_bad_requests_clearly(rand_pair):
    engine = Engine(*rand_pair, capacity=64)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        engine.generate([1, 999], Plan("ar"))
    with pytest.raises(ValueError, match="exceeds the engine's KV capacity"):
        engine.generate([1, 2], Plan.parse("tree-b15-k8"), max_tokens=60)
    with pytest.raises(ValueError, match="block_size"):
        engine.generate([1, 2], Plan.parse("linear-b32"), max_tokens=4)
    with pytest.raises(ValueError, match="'max_tokens'"):
        engine.generate([1, 2], Plan("ar"), max_tokens=0)
    with pytest.raises(ValueError, match="needs a drafter"):
        Engine(rand_pair[0], None, capacity=64).generate([1], Plan.parse("linear-b4"))
