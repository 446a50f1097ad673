"""The twin (refengine/twin.py) at the tiny-twin shape, fp32 on the CPU: it computes the shipped pair's
logits and features on real tokens, never lets a padded token win, builds the same bytes twice, and
refuses bad input by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from refengine import twin
from refengine.config import DrafterConfig, TargetConfig
from refengine.drafter import Drafter
from refengine.model import Target
from refengine.tokenizer import Tokenizer

REPO = Path(__file__).resolve().parents[3]
PROMPTS = REPO / "loadtests" / "prompts" / "chat.jsonl"
SHARD = 100_000_000  # small shards, so the tiny twin goes through the index path as the 8B one does

pytestmark = pytest.mark.skipif(not (twin.PAIR_TARGET / "config.json").is_file(), reason="no shipped pair")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return twin.build("tiny-twin", tmp_path_factory.mktemp("twin") / "t", dtype="fp32", device="cpu",
                      shard_bytes=SHARD)


@pytest.fixture(scope="module")
def models(built):
    pair = Target.from_pretrained(twin.PAIR_TARGET), Drafter.from_pretrained(twin.PAIR_DRAFTER)
    tw = Target.from_pretrained(built / "target"), Drafter.from_pretrained(built / "drafter")
    return pair, tw


@pytest.fixture(scope="module")
def prompts():
    tok = Tokenizer.from_pretrained(twin.PAIR_TARGET)
    rows = [json.loads(line) for line in PROMPTS.read_text().splitlines() if line.strip()]
    return [tok.chat_ids(r["messages"]) for r in rows[::9]]  # one of each kind, roughly


def _forward(target, drafter, ids):
    n = len(ids)
    x = torch.tensor([ids])
    logits, feats = target(x, torch.arange(n)[None], layers=drafter.target_layer_ids)
    block = torch.tensor([[ids[-1]] + [drafter.mask_token_id] * (drafter.block_size - 1)])
    hidden = drafter(drafter.embed(target, block), torch.arange(n + drafter.block_size)[None], feats)
    return logits, feats, drafter.logits(target, hidden)


@torch.inference_mode()
def test_twin_logits_are_the_pairs_on_real_tokens(models, prompts):
    (pt, pd), (tt, td) = models
    v, d = pt.config.vocab_size, pt.config.hidden_size
    D, lay = tt.config.hidden_size, twin.layout("tiny-twin")
    worst_t = worst_d = 0.0
    for ids in prompts:
        pl, pf, pdl = _forward(pt, pd, ids)
        tl, tf, tdl = _forward(tt, td, ids)
        worst_t = max(worst_t, (tl[..., :v] - pl).abs().max().item())
        worst_d = max(worst_d, (tdl[..., :v] - pdl).abs().max().item())
        # the twin's feature layers hold the pair's features, the sentinel, and zeros
        for k in range(len(pd.target_layer_ids)):
            f = tf[..., k * D:(k + 1) * D]
            torch.testing.assert_close(f[..., :d], pf[..., k * d:(k + 1) * d], atol=1e-4, rtol=0)
            assert (f[..., d] == lay.c).all() and (f[..., d + 1:] == 0).all()
    print(f"tiny-twin max |dlogit|: target {worst_t:.3g}, drafter {worst_d:.3g}")
    assert worst_t <= 1e-4 and worst_d <= 1e-4


@torch.inference_mode()
def test_padded_tokens_never_reach_a_top_64_and_carry_no_mass(models, prompts):
    (pt, pd), (tt, td) = models
    v = pt.config.vocab_size
    assert tt.config.vocab_size > v  # the padded-vocab path is exercised
    for ids in prompts:
        for pair_logits, twin_logits in zip(_forward(pt, pd, ids)[::2], _forward(tt, td, ids)[::2], strict=True):
            assert (twin_logits.topk(64, dim=-1).indices < v).all()
            lp = twin_logits.float().log_softmax(-1)
            assert (lp[..., v:].exp() == 0).all()
            torch.testing.assert_close(lp[..., :v], pair_logits.float().log_softmax(-1), atol=1e-4, rtol=0)


@torch.inference_mode()
def test_qk_norm_eps_error_is_small_and_measured(built, prompts):
    """q_norm / k_norm use the config's eps; their ideal one is p eps / t. Measure what that costs."""
    lay = twin.layout("tiny-twin")
    config, ideal = Target.from_pretrained(built / "target"), Target.from_pretrained(built / "target")
    for block in ideal.model.layers:
        for norm in (block.self_attn.q_norm, block.self_attn.k_norm):
            norm.eps = lay.pt.rms_norm_eps * lay.pt.head_dim / lay.shape.head_dim
    worst = 0.0
    for ids in prompts:
        x, pos = torch.tensor([ids]), torch.arange(len(ids))[None]
        worst = max(worst, (config(x, pos)[0] - ideal(x, pos)[0])[..., :lay.pt.vocab_size].abs().max().item())
    print(f"q/k-norm eps {lay.eps:.3g} vs ideal {lay.pt.rms_norm_eps * lay.pt.head_dim / lay.shape.head_dim:.3g}: "
          f"max |dlogit| {worst:.3g}")
    assert worst < 1e-4


@torch.inference_mode()
def test_a_bf16_twin_rounds_less_than_bf16_arithmetic_does(tmp_path, models, prompts):
    """bf16 rounds the twin's scaled weights (sqrt(d/D) norms, the q_norm fold): read in fp32, its logits
    stay nearer the fp32 pair's than the pair's own bf16 run does."""
    out = twin.build("tiny-twin", tmp_path / "bf", dtype="bf16", device="cpu")
    assert json.loads((out / "target" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    from safetensors import safe_open
    with safe_open(str(out / "drafter" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    (pt, _), _ = models
    tw, p16 = Target.from_pretrained(out / "target"), Target.from_pretrained(twin.PAIR_TARGET, torch.bfloat16)
    v, rounding, arithmetic = pt.config.vocab_size, 0.0, 0.0
    for ids in prompts:
        x, pos = torch.tensor([ids]), torch.arange(len(ids))[None]
        want = pt(x, pos)[0]
        rounding = max(rounding, (tw(x, pos)[0][..., :v] - want).abs().max().item())
        arithmetic = max(arithmetic, (p16(x, pos)[0].float() - want).abs().max().item())
    print(f"bf16 twin weights: max |dlogit| {rounding:.3g}; the pair's bf16 arithmetic: {arithmetic:.3g}")
    assert rounding < arithmetic


def test_layout_places_the_pair_and_the_ballast(built):
    rec = json.loads((built / "twin.json").read_text())
    assert rec["layers"] == {"target": [0, 1, 3, 5, 6, 7], "drafter": [0, 2, 3]}
    lay = twin.layout("qwen3-8b")
    assert lay.tlayers == [0, 1, 9, 17, 25, 33]      # twin 1, 9, 17 = pair 1, 2, 3
    assert lay.dlayers == [0, 2, 4]
    assert lay.c ** 2 < lay.pt.hidden_size * lay.pt.rms_norm_eps and lay.eps > 0
    assert lay.head_dims()[:3].tolist() == [0, 2, 4] and lay.head_dims()[32:35].tolist() == [64, 66, 68]
    # the target went through the index (shards), as an 8B twin's 4 GB shards do
    index = json.loads((built / "target" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 2
    assert set(rec["files"]) >= {"target/config.json", "drafter/config.json", "target/tokenizer.json",
                                 "drafter/tokenizer.json", "target/model.safetensors.index.json"}
    assert rec["seed"] == 0 and rec["dtype"] == "fp32" and rec["shape"] == "tiny-twin"
    assert rec["pair"]["target"]["files"]["model.safetensors"] == twin.sha256_file(
        twin.PAIR_TARGET / "model.safetensors")


def test_the_8b_configs_have_the_real_numbers():
    lay = twin.layout("qwen3-8b")
    raw_t = json.loads((twin.PAIR_TARGET / "config.json").read_text())
    raw_d = json.loads((twin.PAIR_DRAFTER / "config.json").read_text())
    t, d = twin.configs(lay, raw_t, raw_d, "bf16")
    assert set(t) == set(raw_t) and set(d) == set(raw_d)   # the keys loaders know, new numbers
    tc, dc = TargetConfig.from_hf(t), DrafterConfig.from_hf(d)
    assert (tc.hidden_size, tc.num_hidden_layers, tc.num_attention_heads, tc.num_key_value_heads, tc.head_dim,
            tc.intermediate_size, tc.vocab_size, tc.tie_word_embeddings) == (4096, 36, 32, 8, 128, 12288, 151936, False)
    assert (dc.num_hidden_layers, dc.block_size, dc.target_layer_ids, dc.num_target_layers, dc.mask_token_id) == \
        (5, 16, [1, 9, 17, 25, 33], 36, 4)
    assert tc.rope_theta == 10000.0 and t["torch_dtype"] == "bfloat16" and len(t["layer_types"]) == 36


def test_seeded_values_are_uniform_and_keyed():
    a = twin.seeded(0, "x", (1000, 1000))
    assert abs(a.std().item() - twin.STD) < 2e-4 and abs(a.mean().item()) < 1e-4
    assert a.abs().max().item() <= twin.STD * 3 ** 0.5
    assert torch.equal(a, twin.seeded(0, "x", (1000, 1000), chunk=12345))   # chunking changes nothing
    assert not torch.equal(a, twin.seeded(1, "x", (1000, 1000)))
    assert not torch.equal(a, twin.seeded(0, "y", (1000, 1000)))


def test_a_second_build_has_the_same_bytes_and_an_existing_one_is_reused(built, tmp_path):
    again = twin.build("tiny-twin", tmp_path / "t2", dtype="fp32", device="cpu", shard_bytes=SHARD)
    a, b = json.loads((built / "twin.json").read_text()), json.loads((again / "twin.json").read_text())
    assert a["files"] == b["files"]
    for f in a["files"]:
        assert twin.sha256_file(again / f) == a["files"][f]
    stamp = (again / "twin.json").stat().st_mtime_ns
    assert twin.build("tiny-twin", again, dtype="fp32", device="cpu", shard_bytes=SHARD) == again
    assert (again / "twin.json").stat().st_mtime_ns == stamp
    assert not list(tmp_path.glob(".t2.tmp-*"))


def test_bad_input_is_named(built, tmp_path, capsys):
    with pytest.raises(twin.TwinError, match="unknown twin shape 'qwen9'.*qwen3-8b"):
        twin.build("qwen9", tmp_path / "x")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(twin.TwinError, match=f"{empty}: not a checkpoint directory"):
        twin.build("tiny-twin", tmp_path / "x", pair_target=empty)
    with pytest.raises(twin.TwinError, match="exists and is not a complete twin"):
        twin.build("tiny-twin", built, seed=1, dtype="fp32")   # another recipe: never overwritten
    with pytest.raises(twin.TwinError, match="dtype 'fp16'"):
        twin.build("tiny-twin", tmp_path / "x", dtype="fp16")
    assert twin.main(["nope", str(tmp_path / "x")]) == 2
    assert "unknown twin shape 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
