"""A model pair (target + drafter): build a small random one, save it, load it.

    random_pair(seed=0, **sizes) -> (Target, Drafter)   fp32, CPU, config in code
    save_pair(target, drafter, dir)                      dir/target, dir/drafter (HF layout each)
    load_pair(dir, dtype=, device=) -> (Target, Drafter)
"""

from __future__ import annotations

from pathlib import Path

import torch

from refengine.config import DrafterConfig, TargetConfig
from refengine.drafter import Drafter
from refengine.layers import RMSNorm
from refengine.model import Target


def spread_layer_ids(n_target_layers: int, n_features: int) -> list[int]:
    """Feature layers spread from the second layer to the third from last (z-lab's choice)."""
    lo, hi = 1, n_target_layers - 3
    if hi <= lo:  # too shallow for z-lab's range; the last layer is avoided because HF reports it normed
        lo, hi = 0, max(0, n_target_layers - 2)
    if n_features == 1:
        return [n_target_layers // 2]
    return [round(lo + i * (hi - lo) / (n_features - 1)) for i in range(n_features)]


def random_pair(seed: int = 0, vocab_size: int = 512, hidden_size: int = 64, intermediate_size: int = 128,
                num_hidden_layers: int = 4, num_attention_heads: int = 4, num_key_value_heads: int = 2,
                head_dim: int = 16, draft_layers: int = 1, block_size: int = 16,
                target_layer_ids: list[int] | None = None, tie_word_embeddings: bool = True,
                std: float = 0.02, eos_token_id: int | None = None) -> tuple[Target, Drafter]:
    common = dict(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
                  num_attention_heads=num_attention_heads, num_key_value_heads=num_key_value_heads,
                  head_dim=head_dim, tie_word_embeddings=tie_word_embeddings, rope_theta=10000.0,
                  eos_token_id=eos_token_id, max_position_embeddings=4096)
    tcfg = TargetConfig(num_hidden_layers=num_hidden_layers, **common)
    ids = target_layer_ids or spread_layer_ids(num_hidden_layers, min(num_hidden_layers, 2))
    dcfg = DrafterConfig(num_hidden_layers=draft_layers, block_size=block_size,
                         num_target_layers=num_hidden_layers, target_layer_ids=ids,
                         mask_token_id=vocab_size - 1, **common)
    gen = torch.Generator().manual_seed(seed)
    target, drafter = Target(tcfg), Drafter(dcfg)
    for model in (target, drafter):
        _randomize(model, std, gen)
    return target.eval(), drafter.eval()


def _randomize(model: torch.nn.Module, std: float, gen: torch.Generator) -> None:
    # Norm weights away from 1 so that an oracle test would notice a norm applied in the wrong place.
    norms = {id(m.weight) for m in model.modules() if isinstance(m, RMSNorm)}
    with torch.no_grad():
        for p in model.parameters():
            if id(p) in norms:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(std * torch.randn(p.shape, generator=gen))


def save_pair(target: Target, drafter: Drafter, directory: str | Path) -> None:
    target.save_pretrained(Path(directory) / "target")
    drafter.save_pretrained(Path(directory) / "drafter")


def load_pair(directory: str | Path, dtype: torch.dtype = torch.float32,
              device: str | torch.device = "cpu") -> tuple[Target, Drafter]:
    d = Path(directory)
    return Target.from_pretrained(d / "target", dtype, device), Drafter.from_pretrained(d / "drafter", dtype, device)


def echo_pair(seed: int = 0, mix: float = 0.5, sharpness: float = 1.0, noise: float = 0.0,
              mask_scale: float = 0.0, **sizes) -> tuple[Target, Drafter]:
    """A hand-built pair that accepts drafts, for exercising long accepts without training.

    The drafter is built to predict "the last committed token again" at every block slot: its
    one layer attends uniformly (zero queries), only the root carries a value (context features
    and the MASK embedding are zeroed), and its output goes through the target's tied lm_head.
    The target is a random one whose layer outputs are scaled by `mix`: at mix 0 it always
    repeats its input token, and as mix grows it departs from repetition in a context-dependent
    way. `sharpness` scales the embeddings (and so the target's logits), making sampling at
    T > 0 nearly deterministic when large. `noise` gives the drafter random queries/keys and MLP,
    and `mask_scale` a random MASK embedding, so that block slots disagree and drafts fail
    part-way: partial accepts.
    """
    sizes = {**dict(vocab_size=256, num_hidden_layers=4), **sizes, "tie_word_embeddings": True}
    target, drafter = random_pair(seed, **sizes)
    dcfg = drafter.config
    dcfg.num_key_value_heads = dcfg.num_attention_heads
    dcfg.head_dim = dcfg.hidden_size // dcfg.num_attention_heads
    drafter = Drafter(dcfg)
    with torch.no_grad():
        emb = target.model.embed_tokens.weight
        emb.mul_(sharpness / emb.std())
        emb[dcfg.mask_token_id].zero_()
        for block in target.model.layers:
            block.self_attn.o_proj.weight.mul_(mix)
            block.mlp.down_proj.weight.mul_(mix)
        eye = torch.eye(dcfg.hidden_size)
        for p in drafter.parameters():
            p.zero_()
        for m in drafter.modules():
            if isinstance(m, RMSNorm):
                m.weight.fill_(1.0)
        for layer in drafter.layers:
            layer.self_attn.v_proj.weight.copy_(eye)
            # large enough that the final norm, not eps, sets the scale after uniform averaging
            layer.self_attn.o_proj.weight.copy_(1e4 * eye)
            if noise:
                gen = torch.Generator().manual_seed(seed + 1)
                emb[dcfg.mask_token_id] = mask_scale * torch.randn(dcfg.hidden_size, generator=gen)
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                    proj.weight.copy_(noise * torch.randn(proj.weight.shape, generator=gen))
                layer.mlp.down_proj.weight.copy_(noise * torch.randn(layer.mlp.down_proj.weight.shape, generator=gen))
                layer.mlp.gate_proj.weight.copy_(torch.randn(layer.mlp.gate_proj.weight.shape, generator=gen))
                layer.mlp.up_proj.weight.copy_(torch.randn(layer.mlp.up_proj.weight.shape, generator=gen))
    return target.eval(), drafter.eval()
