"""Independent oracles on checkpoints written to disk (fp32, CPU):

- the target's logits == transformers' Qwen3ForCausalLM on the same files (max abs diff <= 1e-4);
- the drafter's logits == z-lab's PyPI package `dflash` (DFlashDraftModel) on the same files;
- linear decoding == `dflash_generate`, token for token and step for step (its acceptance lengths).
"""

from __future__ import annotations

import time

import pytest
import torch

from refengine.engine import Engine
from refengine.model import Target
from refengine.pair import echo_pair, load_pair, random_pair, save_pair
from refengine.plan import Plan

transformers = pytest.importorskip("transformers")
dflash_model = pytest.importorskip("dflash.model", reason="pip install --no-deps dflash==0.1.0")

torch.set_num_threads(1)  # 2 cores shared with other jobs: OpenMP spin-waits starve


@pytest.fixture(scope="module", params=["tied-gqa", "untied-mha", "echo"])
def pair_dir(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    if request.param == "tied-gqa":
        pair = random_pair(seed=3, vocab_size=300, std=0.2)
    elif request.param == "untied-mha":
        pair = random_pair(seed=4, vocab_size=200, num_hidden_layers=6, num_key_value_heads=4, draft_layers=2,
                           tie_word_embeddings=False, std=0.2, block_size=8)
    else:
        pair = echo_pair(seed=0, mix=0.5, noise=2.0)
    save_pair(*pair, d)
    return d


def _hf(pair_dir):
    target = transformers.Qwen3ForCausalLM.from_pretrained(pair_dir / "target", dtype=torch.float32).eval()
    drafter = dflash_model.DFlashDraftModel.from_pretrained(pair_dir / "drafter", dtype=torch.float32).eval()
    return target, drafter


@torch.inference_mode()
def test_target_logits_match_transformers(pair_dir):
    ours = Target.from_pretrained(pair_dir / "target")
    hf, _ = _hf(pair_dir)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, ours.config.vocab_size - 1, (2, 33), generator=gen)
    want = hf(ids, output_hidden_states=True)
    logits, feats = ours(ids, torch.arange(33)[None].expand(2, -1), layers=list(range(ours.config.num_hidden_layers)))
    assert (logits - want.logits).abs().max().item() <= 1e-4
    d = ours.config.hidden_size
    for layer in range(ours.config.num_hidden_layers):
        torch.testing.assert_close(feats[..., layer * d:(layer + 1) * d], want.hidden_states[layer + 1],
                                   atol=1e-4, rtol=0)


@torch.inference_mode()
def test_drafter_logits_match_dflash(pair_dir):
    target, drafter = load_pair(pair_dir)
    hf, zd = _hf(pair_dir)
    assert zd.target_layer_ids == drafter.target_layer_ids and zd.block_size == drafter.block_size
    gen = torch.Generator().manual_seed(1)
    n, b = 21, drafter.block_size
    ids = torch.randint(0, target.config.vocab_size - 1, (1, n), generator=gen)
    ctx = dflash_model.extract_context_feature(hf(ids, output_hidden_states=True).hidden_states, zd.target_layer_ids)
    block = torch.tensor([[int(ids[0, -1])] + [drafter.mask_token_id] * (b - 1)])
    positions = torch.arange(n + b)[None]
    want = zd.compute_logits(zd(target_hidden=ctx, noise_embedding=hf.model.embed_tokens(block),
                                position_ids=positions), hf.lm_head)
    feats = target(ids, torch.arange(n)[None], layers=drafter.target_layer_ids)[1]
    got = drafter.logits(target, drafter(drafter.embed(target, block), positions, feats))
    assert (got - want).abs().max().item() <= 1e-4


def _dflash_run(zd, hf, prompt, max_new, stop, monkeypatch):
    # return_stats=True times with torch.cuda.synchronize(); on a CPU a plain clock gives the same stats
    monkeypatch.setattr(dflash_model, "_cuda_time", time.perf_counter)
    out = dflash_model.dflash_generate(zd, hf, torch.tensor([prompt]), max_new, stop, temperature=0.0,
                                       return_stats=True)
    return out.output_ids[0, len(prompt):].tolist(), out.acceptance_lengths


def test_linear_decoding_matches_dflash_generate(pair_dir, monkeypatch):
    target, drafter = load_pair(pair_dir)
    hf, zd = _hf(pair_dir)
    engine = Engine(target, drafter, capacity=256)
    plan = Plan("linear", block_size=drafter.block_size)
    gen = torch.Generator().manual_seed(2)
    multi = 0
    for i in range(6):
        prompt = torch.randint(0, target.config.vocab_size - 1, (int(torch.randint(2, 20, (1,), generator=gen)),),
                               generator=gen).tolist()
        free = engine.generate(prompt, Plan("ar"), max_tokens=40)
        stop = [free.tokens[20]] if i % 2 else None
        want, lengths = _dflash_run(zd, hf, prompt, 40, stop, monkeypatch)
        ours = engine.generate(prompt, plan, max_tokens=40, stop_ids=stop or ())
        assert ours.tokens == want
        assert [s.committed for s in ours.steps] == lengths  # per verify step, prefill's token apart
        multi += sum(x > 1 for x in lengths)
    if pair_dir.name.startswith("echo"):
        assert multi > 0  # drafts were accepted, so the comparison covered the accept path
