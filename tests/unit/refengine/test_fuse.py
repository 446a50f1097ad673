"""Serving's fused projections (refengine.layers.fuse): one GEMM for q/k/v and one for gate/up give the
unfused model's logits and every arm's tokens and verify steps, and the parameters stay HF-named views
of the fused weights (no second copy of the model)."""

from __future__ import annotations

import copy

import pytest
import torch
from engine_prompts import prompts

from refengine.engine import Engine
from refengine.layers import QKV, fuse
from refengine.pair import echo_pair, random_pair
from refengine.plan import Plan

ARMS = ["ar", "linear-b16", "chain-b15", "tree-b15-k8"]


@pytest.fixture(scope="module")
def pairs():
    out = []
    for target, drafter in (random_pair(seed=1, vocab_size=256, std=0.2), echo_pair(seed=0, mix=0.5, noise=2.0)):
        fused = (fuse(copy.deepcopy(target)), fuse(copy.deepcopy(drafter)))
        out.append(((target, drafter), fused))
    return out


def test_fused_logits_equal_the_unfused(pairs):
    (target, _), (fused, _) = pairs[0]
    ids = torch.tensor([prompts(1)[0]])
    pos = torch.arange(ids.shape[1])[None]
    a, _ = target(ids, pos)
    b, _ = fused(ids, pos)
    assert torch.allclose(a, b, atol=1e-5, rtol=0), (a - b).abs().max()


@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_takes_the_same_tokens_and_steps_fused(pairs, arm):
    for plain, fused in pairs:
        e, f = Engine(*plain, capacity=256), Engine(*fused, capacity=256)
        for p in prompts(3):
            x = e.generate(p, Plan.parse(arm), max_tokens=32)
            y = f.generate(p, Plan.parse(arm), max_tokens=32)
            assert x.tokens == y.tokens, (arm, p)
            assert [s.committed for s in x.steps] == [s.committed for s in y.steps]


def test_parameters_are_views_of_the_fused_weights_and_keep_their_names(pairs):
    (target, _), (fused, _) = pairs[0]
    assert fused.state_dict().keys() == target.state_dict().keys()
    for name, value in target.state_dict().items():
        assert torch.equal(fused.state_dict()[name], value), name
    attn = fused.model.layers[0].self_attn
    w, _ = attn.fused
    assert attn.q_proj.weight.data_ptr() == w.data_ptr()
    assert attn.v_proj.weight.data_ptr() == w[-attn.v_proj.weight.shape[0]:].data_ptr()
    mlp = fused.model.layers[0].mlp
    assert mlp.up_proj.weight.data_ptr() == mlp.fused[mlp.gate_proj.weight.shape[0]:].data_ptr()


def test_biases_fuse_with_their_weights():
    torch.manual_seed(0)
    plain = QKV(32, n_heads=4, n_kv_heads=2, head_dim=8, eps=1e-6, bias=True)
    for m in (plain.q_proj, plain.k_proj, plain.v_proj):
        torch.nn.init.normal_(m.bias)
    fused = copy.deepcopy(plain)
    fused.fuse()
    x = torch.randn(2, 5, 32)
    cos, sin = torch.ones(2, 1, 5, 8), torch.zeros(2, 1, 5, 8)
    for a, b in zip(plain.project(x, cos, sin), fused.project(x, cos, sin), strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)
