"""Our training-shaped drafter (many anchored blocks in one masked forward) against z-lab's
dflash.DFlashDraftModel (one block, the context before it), on the same random weights."""

import pytest
import torch
from transformers import Qwen3Config

from refengine.train.draft_model import DraftModel, block_mask, build_target_layer_ids, drafter_config
from refengine.train.drafter import block_inputs, pick_anchors

zlab = pytest.importorskip("dflash.model")

TARGET_CFG = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 8, "rms_norm_eps": 1e-6, "vocab_size": 50, "max_position_embeddings": 256,
              "hidden_act": "silu", "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
              "num_hidden_layers": 6, "attention_bias": False, "attention_dropout": 0.0}


@pytest.mark.parametrize("layers", [1, 2, 3, 4])
def test_layer_rule_matches_zlab(layers):
    for n in (4, 6, 8, 12, 36):
        assert build_target_layer_ids(n, layers) == zlab.build_target_layer_ids(n, layers)


def test_block_mask():
    m = block_mask(torch.tensor([[2, 5]]), length=6, b=3)[0, 0]
    assert m.shape == (6, 6 + 6)
    assert m[0, :6].tolist() == [True, True, False, False, False, False]   # anchor 2 sees 0, 1
    assert m[3, :6].tolist() == [True] * 5 + [False]                     # anchor 5 sees 0..4
    assert m[0, 6:].tolist() == [True, True, True, False, False, False]  # own block only
    assert m[4, 6:].tolist() == [False, False, False, True, True, True]


def test_masked_blocks_equal_zlab_single_blocks():
    torch.manual_seed(0)
    cfg = drafter_config(TARGET_CFG, layers=2, block_size=4, mask_token_id=49)
    ours = DraftModel(cfg).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(0.1 * torch.randn_like(p))  # norms away from 1, so a misplaced norm shows
    theirs = zlab.DFlashDraftModel(Qwen3Config(**cfg)).eval()
    missing, unexpected = theirs.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all("rotary" in k for k in missing)
    length, b, d = 12, 4, 32
    feats = torch.randn(1, length, 2 * d)
    anchors = torch.tensor([[3, 6, 10]])
    emb = torch.randn(1, 3 * b, d)
    with torch.no_grad():
        got = ours(feats, emb, anchors).view(3, b, d)
        for i, a in enumerate(anchors[0].tolist()):
            want = theirs(position_ids=torch.arange(a + b)[None], noise_embedding=emb[:, i * b:(i + 1) * b],
                          target_hidden=feats[:, :a])
            torch.testing.assert_close(got[i], want[0], atol=1e-5, rtol=1e-4)


def test_block_inputs_and_anchors():
    seqs = torch.arange(20).view(2, 10)
    gen = torch.Generator().manual_seed(0)
    anchors = pick_anchors(torch.tensor([4, 4]), length=10, count=3, gen=gen)
    assert ((anchors >= 4) & (anchors <= 8)).all() and (anchors.diff(1) > 0).all()
    ids, labels, valid = block_inputs(seqs, torch.tensor([[4, 8], [5, 6]]), b=3, mask_id=99)
    assert ids.view(2, 2, 3).tolist()[0] == [[4, 99, 99], [8, 99, 99]]
    assert labels[0, 0].tolist() == [5, 6] and valid[0, 1].tolist() == [True, False]
    with pytest.raises(ValueError, match="do not fit"):
        pick_anchors(torch.tensor([4]), length=10, count=6, gen=gen)
