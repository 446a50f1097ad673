"""The target: a Qwen3-architecture decoder (RMSNorm, GQA with per-head q/k RMSNorm, RoPE, SwiGLU).

API
    Target(cfg)                                  random init (see refengine.pair for small test pairs)
    Target.from_pretrained(dir, dtype=, device=)  HF layout: config.json + *.safetensors (sharded ok)
    target.save_pretrained(dir)                   writes config.json + model.safetensors
    target.new_cache(batch, capacity)             -> KVCache (refengine.kvcache)
    target(ids, positions, cache=None, visible=None, layers=(), last_only=False)
        ids, positions   [B, T] long; positions are explicit (tree verify uses start + depth)
        cache            past entries, all visible; the T new entries are written tentatively
                         at each row's length (keep them with cache.advance or cache.compact)
        visible          [B, T, T] bool: which new tokens each new token sees (default causal;
                         a tree passes ancestor-or-self)
        layers           target layer ids whose outputs (exactly HF hidden_states[l + 1]) are returned
                         concatenated as features [B, T, len(layers) * D]
        static           attend over the whole cache (fixed shapes, for CUDA graphs)
        -> (logits [B, T or 1, V], features or None)
"""

from __future__ import annotations

import torch
from torch import nn

from refengine.checkpoint import Pretrained
from refengine.config import TargetConfig
from refengine.kvcache import KVCache
from refengine.layers import DecoderLayer, RMSNorm, attend, rope


class Block(DecoderLayer):
    def forward(self, x, cos, sin, visible, cache: KVCache | None, layer: int, slots, span):
        h = self.input_layernorm(x)
        q, k, v = self.self_attn.project(h, cos, sin)
        if cache is not None:
            cache.write(layer, k, v, slots)
            k, v = cache.k[layer, :, :, :span], cache.v[layer, :, :, :span]
        x = x + self.self_attn.out(attend(q, k, v, visible))
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, cfg: TargetConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Target(nn.Module, Pretrained):
    config_class = TargetConfig

    def __init__(self, cfg: TargetConfig):
        super().__init__()
        self.config = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def new_cache(self, batch: int = 1, capacity: int = 4096) -> KVCache:
        c = self.config
        return KVCache(c.num_hidden_layers, batch, c.num_key_value_heads, capacity, c.head_dim,
                       self.dtype, self.device)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(ids)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None,
                visible: torch.Tensor | None = None, layers: tuple[int, ...] | list[int] = (),
                last_only: bool = False, static: bool = False):
        t = ids.shape[1]
        if visible is None:
            visible = torch.ones(t, t, dtype=torch.bool, device=ids.device).tril()[None].expand(ids.shape[0], t, t)
        slots = span = None
        if cache is not None:
            span = cache.capacity if static else cache.span(t)
            slots = cache.slots(t)
            visible = _with_past(visible, cache.lengths, span)
        cos, sin = rope(positions, self.config.head_dim, self.config.rope_theta, self.dtype)
        x = self.embed(ids)
        wanted, features = set(layers), {}
        for i, block in enumerate(self.model.layers):
            x = block(x, cos, sin, visible, cache, i, slots, span)
            if i in wanted:
                features[i] = x
        x = self.model.norm(x)
        if len(self.model.layers) - 1 in wanted:  # HF's hidden_states[-1] is the normed output
            features[len(self.model.layers) - 1] = x
        if last_only:
            x = x[:, -1:]
        logits = self.lm_head(x)
        feats = torch.cat([features[i] for i in layers], dim=-1) if layers else None
        return logits, feats


def _with_past(new: torch.Tensor, lengths: torch.Tensor, span: int) -> torch.Tensor:
    """[B, T, T] visibility among new tokens -> [B, T, span] over the cache: the past is all visible."""
    b, t, _ = new.shape
    rel = torch.arange(span, device=new.device)[None, :] - lengths[:, None]  # [B, span]
    inside = (rel >= 0) & (rel < t)
    gathered = new.gather(2, rel.clamp(0, t - 1)[:, None, :].expand(b, t, span))
    return (rel < 0)[:, None, :] | (inside[:, None, :] & gathered)
