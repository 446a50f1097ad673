"""The target and drafter modules: checkpoints, caches, masks, bad input."""

from __future__ import annotations

import json

import pytest
import torch

from refengine.config import ConfigError, DrafterConfig, TargetConfig
from refengine.drafter import Drafter
from refengine.kvcache import CacheFullError
from refengine.model import Target
from refengine.pair import load_pair, random_pair, save_pair


def test_save_load_roundtrip_gives_identical_logits(tmp_path, rand_pair):
    target, drafter = rand_pair
    save_pair(target, drafter, tmp_path)
    t2, d2 = load_pair(tmp_path)
    ids = torch.randint(0, 255, (1, 9))
    pos = torch.arange(9)[None]
    assert torch.equal(target(ids, pos)[0], t2(ids, pos)[0])
    feats = target(ids, pos, layers=drafter.target_layer_ids)[1]
    block = torch.tensor([[3] + [drafter.mask_token_id] * 15])
    args = (drafter.embed(target, block), torch.arange(25)[None], feats)
    assert torch.equal(drafter(*args), d2(*args))
    raw = json.loads((tmp_path / "drafter" / "config.json").read_text())
    assert raw["architectures"] == ["DFlashDraftModel"]
    assert raw["dflash_config"] == {"target_layer_ids": drafter.target_layer_ids, "mask_token_id": 255}
    assert "lm_head.weight" not in (tmp_path / "target" / "model.safetensors").read_bytes()[:4096].decode("latin1")


def test_untied_checkpoint_keeps_its_own_head(tmp_path):
    target, _ = random_pair(seed=1, tie_word_embeddings=False)
    target.save_pretrained(tmp_path)
    t2 = Target.from_pretrained(tmp_path)
    assert not torch.equal(t2.lm_head.weight, t2.model.embed_tokens.weight)
    assert torch.equal(t2.lm_head.weight, target.lm_head.weight)


def test_incremental_cache_matches_one_forward(rand_pair):
    target, _ = rand_pair
    ids = torch.randint(0, 255, (1, 20))
    pos = torch.arange(20)[None]
    full = target(ids, pos)[0]
    cache = target.new_cache(1, 64)
    parts = []
    for a, b in ((0, 7), (7, 8), (8, 20)):
        parts.append(target(ids[:, a:b], pos[:, a:b], cache=cache)[0])
        cache.advance([b - a])
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-4, rtol=0)


def test_batched_rows_with_different_lengths_match_single_rows(rand_pair):
    target, _ = rand_pair
    seqs = [torch.randint(0, 255, (n,)) for n in (5, 11)]
    cache = target.new_cache(2, 32)
    for row, s in enumerate(seqs):
        single = target.new_cache(1, 32)
        target(s[None], torch.arange(len(s))[None], cache=single)
        cache.k[:, row], cache.v[:, row] = single.k[:, 0], single.v[:, 0]
        cache.set_length(row, len(s))
    nxt = torch.tensor([[7, 8], [9, 10]])
    pos = torch.tensor([[5, 6], [11, 12]])
    batched = target(nxt, pos, cache=cache)[0]
    for row, s in enumerate(seqs):
        full = target(torch.cat([s, nxt[row]])[None], torch.arange(len(s) + 2)[None])[0][:, -2:]
        torch.testing.assert_close(batched[row:row + 1], full, atol=1e-5, rtol=0)


def test_drafter_packed_blocks_equal_separate_forwards(rand_pair):
    """Training packs anchored blocks of one sequence into one forward with an explicit mask."""
    target, drafter = rand_pair
    n, b = 30, drafter.block_size
    ids = torch.randint(0, 255, (1, n))
    feats = target(ids, torch.arange(n)[None], layers=drafter.target_layer_ids)[1]
    anchors = [4, 13, 22]
    blocks = torch.tensor([[int(ids[0, a])] + [drafter.mask_token_id] * (b - 1) for a in anchors]).view(1, -1)
    positions = torch.cat([torch.arange(n)] + [torch.arange(a, a + b) for a in anchors])[None]
    visible = torch.zeros(len(anchors) * b, n + len(anchors) * b, dtype=torch.bool)
    for j, a in enumerate(anchors):
        visible[j * b:(j + 1) * b, :a] = True
        visible[j * b:(j + 1) * b, n + j * b:n + (j + 1) * b] = True
    packed = drafter(drafter.embed(target, blocks), positions, feats, visible=visible[None])
    for j, a in enumerate(anchors):
        one = drafter(drafter.embed(target, blocks[:, j * b:(j + 1) * b]),
                      torch.arange(0, a + b)[None], feats[:, :a])
        torch.testing.assert_close(packed[:, j * b:(j + 1) * b], one, atol=1e-5, rtol=0)


def test_drafter_cache_path_equals_uncached(rand_pair):
    target, drafter = rand_pair
    ids = torch.randint(0, 255, (1, 12))
    feats = target(ids, torch.arange(12)[None], layers=drafter.target_layer_ids)[1]
    block = drafter.embed(target, torch.tensor([[5] + [drafter.mask_token_id] * 15]))
    want = drafter(block, torch.arange(28)[None], feats)
    cache = drafter.new_cache(1, 64)
    drafter(block, torch.arange(21)[None], feats[:, :5], cache=cache)
    got = drafter(block, torch.cat([torch.arange(5, 12), torch.arange(12, 28)])[None], feats[:, 5:], cache=cache)
    assert cache.length() == 12
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_drafter_tentative_context_append_equals_committed_append(rand_pair):
    """The graphed draft's path (context written tentatively, a whole block wide, rows keeping
    different counts) gives the eager path's hidden states, and leaves the same cache."""
    target, drafter = rand_pair
    ids = torch.randint(0, 255, (3, 20))
    feats = target(ids, torch.arange(20)[None].expand(3, -1), layers=drafter.target_layer_ids)[1]
    prompt, counts, width = [6, 9, 4], [5, 0, 16], 16
    block = drafter.embed(target, torch.tensor([[7] + [drafter.mask_token_id] * 15] * 3))
    caches = [drafter.new_cache(3, 64) for _ in range(2)]
    for cache in caches:  # rows of different lengths, as prefill leaves them
        for r, n in enumerate(prompt):
            drafter.append_context(feats[r:r + 1, :n], torch.arange(n)[None], cache.rows(r, r + 1))
    new = torch.zeros(3, width, feats.shape[-1])
    for r, (n, c) in enumerate(zip(prompt, counts, strict=True)):
        new[r, :c] = feats[r, n:n + c]
    starts = torch.tensor([n + c for n, c in zip(prompt, counts, strict=True)])
    ctx_pos = starts[:, None] - torch.tensor(counts)[:, None] + torch.arange(width)
    block_pos = starts[:, None] + torch.arange(16)
    eager, graphed = caches
    drafter.append_context(new, ctx_pos, eager, counts)
    want = drafter(block, block_pos, cache=eager)
    got = drafter(block, torch.cat([ctx_pos, block_pos], 1), new, cache=graphed, static=True,
                  counts=torch.tensor(counts))
    graphed.advance(counts)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert graphed.host_lengths() == eager.host_lengths() == starts.tolist()
    for r, n in enumerate(starts.tolist()):
        torch.testing.assert_close(graphed.k[:, r, :, :n], eager.k[:, r, :, :n], atol=1e-6, rtol=0)


def test_missing_config_field_names_file_and_field(tmp_path):
    target, drafter = random_pair()
    drafter.save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    del raw["dflash_config"]["mask_token_id"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"config\.json.*'mask_token_id'"):
        Drafter.from_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="no such file"):
        Target.from_pretrained(tmp_path / "nowhere")
    raw = TargetConfig(vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=3, head_dim=4).to_hf()
    with pytest.raises(ConfigError, match="num_key_value_heads"):
        TargetConfig.from_hf(raw, "x/config.json")
    with pytest.raises(ConfigError, match="target_layer_ids"):
        DrafterConfig.from_hf({**raw, "num_key_value_heads": 1, "block_size": 4, "num_target_layers": 1,
                               "dflash_config": {"target_layer_ids": [3], "mask_token_id": 0}}, "d")


def test_missing_weight_names_it(tmp_path, rand_pair):
    from safetensors.torch import load_file, save_file

    rand_pair[0].save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    del state["model.layers.1.mlp.up_proj.weight"]
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ConfigError, match="model.layers.1.mlp.up_proj.weight"):
        Target.from_pretrained(tmp_path)


def test_cache_overflow_is_a_clear_error(rand_pair):
    target, _ = rand_pair
    cache = target.new_cache(1, 8)
    with pytest.raises(CacheFullError, match="holds 8 entries"):
        target(torch.zeros(1, 9, dtype=torch.long), torch.arange(9)[None], cache=cache)
