"""The DFlash drafter, in z-lab's checkpoint format (architecture "DFlashDraftModel").

Weights: fc (K*D -> D), hidden_norm, layers.* (Qwen3 decoder layers), norm. It has no embedding
and no LM head: it borrows the target's embed_tokens and lm_head.

Context features are the outputs of target layers `target_layer_ids` (HF hidden_states[l + 1]),
concatenated; fc + hidden_norm turn them into one context vector per committed token. In each
layer, queries come from the block; keys/values are [context ; block] through that layer's own
k/v projections (k_norm and RoPE on all keys). The block is [last committed token, MASK...];
output i predicts position start + i.

API
    Drafter(cfg) / Drafter.from_pretrained(dir, dtype=, device=) / drafter.save_pretrained(dir)
    drafter.new_cache(batch, capacity)    context-only KV cache (refengine.kvcache)
    drafter.append_context(features, positions, cache, counts=None)   commit new context entries only
    drafter(embeds, positions, features=None, cache=None, visible=None, static=False, counts=None) -> hidden [B, T, D]
        embeds      [B, T, D] target embeddings of the block tokens (see `embed`)
        positions   [B, C + T]: position ids of the C new context features, then of the T block slots
        features    [B, C, K*D] raw target features (C may be 0 / None when the cache has them)
        cache       when given, the C new context entries are appended (committed) to it first,
                    and the block attends to everything in the cache
        counts      [B] with a cache: row r's first counts[r] of the C entries are its new context;
                    they are written but left tentative (the caller advances the cache), so one
                    fixed-shape forward (a CUDA graph) holds both the append and the block
        visible     [B, T, S + T] bool over keys [context ; block] (S = context keys). Default: all
                    visible. Training packs many anchored blocks of one sequence into one forward
                    with it: block j sees context before its anchor and its own block only.
    drafter.embed(target, ids), drafter.logits(target, hidden)   use the target's embedding / lm_head
"""

from __future__ import annotations

import torch
from torch import nn

from refengine.checkpoint import Pretrained
from refengine.config import DrafterConfig
from refengine.kvcache import KVCache
from refengine.layers import DecoderLayer, RMSNorm, attend, rope


class DraftBlock(DecoderLayer):
    def forward(self, x, past, cos, sin, visible):
        h = self.input_layernorm(x)
        q, k, v = self.self_attn.project(h, cos, sin)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        x = x + self.self_attn.out(attend(q, k, v, visible))
        return x + self.mlp(self.post_attention_layernorm(x))


class Drafter(nn.Module, Pretrained):
    config_class = DrafterConfig

    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        self.config = cfg
        self.fc = nn.Linear(len(cfg.target_layer_ids) * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DraftBlock(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    @property
    def block_size(self) -> int:
        return self.config.block_size

    @property
    def target_layer_ids(self) -> list[int]:
        return self.config.target_layer_ids

    @property
    def mask_token_id(self) -> int:
        return self.config.mask_token_id

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    def new_cache(self, batch: int = 1, capacity: int = 4096) -> KVCache:
        c = self.config
        return KVCache(c.num_hidden_layers, batch, c.num_key_value_heads, capacity, c.head_dim,
                       self.dtype, self.fc.weight.device)

    def embed(self, target: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        x = target.model.embed_tokens(ids)
        scale = self.config.input_embedding_scale
        return x if scale == 1.0 else x * scale

    def logits(self, target: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        logits = target.lm_head(hidden)
        if self.config.output_multiplier != 1.0:
            logits = logits * self.config.output_multiplier
        cap = self.config.final_logit_softcapping
        return torch.tanh(logits / cap) * cap if cap else logits

    def context_kv(self, features: torch.Tensor, positions: torch.Tensor):
        """Per-layer context keys/values: they depend only on the features, not on other layers."""
        ctx = self.hidden_norm(self.fc(features))
        cos, sin = rope(positions, self.config.head_dim, self.config.rope_theta, self.dtype)
        return [layer.self_attn.keys_values(ctx, cos, sin) for layer in self.layers]

    def append_context(self, features: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                       counts: list[int] | None = None) -> None:
        """Commit context entries of newly committed tokens (features [B, C, K*D]) to the cache.

        With `counts`, row r keeps only its first counts[r] entries: the rows of a batch bring
        different numbers of new tokens, padded to C.
        """
        self.write_context(features, positions, cache)
        cache.advance(counts if counts is not None else [features.shape[1]] * features.shape[0])

    def write_context(self, features: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> None:
        """Write the context entries of features [B, C, K*D] at each row's tentative slots, uncommitted."""
        slots = cache.slots(features.shape[1])
        for i, (k, v) in enumerate(self.context_kv(features, positions)):
            cache.write(i, k, v, slots)

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, features: torch.Tensor | None = None,
                cache: KVCache | None = None, visible: torch.Tensor | None = None,
                static: bool = False, counts: torch.Tensor | None = None) -> torch.Tensor:
        """static=True (a CUDA graph) with `counts` [B]: the C new context entries are written at the
        rows' tentative slots but not committed (row r will keep counts[r] of them: the caller
        advances the cache after the replay), so the graph holds the context append too."""
        b, t, _ = embeds.shape
        c = 0 if features is None else features.shape[1]
        if cache is not None:
            lengths = cache.lengths
            if c and counts is not None:
                self.write_context(features, positions[:, :c], cache)
                lengths = lengths + counts
            elif c:
                self.append_context(features, positions[:, :c], cache)
            span = cache.capacity if static else cache.span(c if counts is not None else 0)
            past = [(cache.k[i, :, :, :span], cache.v[i, :, :, :span]) for i in range(len(self.layers))]
            if visible is None and (static or b > 1 or counts is not None):
                visible = _past_rows(lengths, span, t)
        else:
            past = self.context_kv(features, positions[:, :c]) if c else [None] * len(self.layers)
        cos, sin = rope(positions[:, c:], self.config.head_dim, self.config.rope_theta, self.dtype)
        x = embeds
        for layer, kv in zip(self.layers, past, strict=True):
            x = layer(x, kv, cos, sin, visible)
        return self.norm(x)


def _past_rows(lengths: torch.Tensor, span: int, t: int) -> torch.Tensor:
    """[B, T, span + T]: a row sees its own cached context and the whole block."""
    past = torch.arange(span, device=lengths.device)[None, :] < lengths[:, None]
    block = torch.ones(lengths.shape[0], t, dtype=torch.bool, device=lengths.device)
    return torch.cat([past, block], dim=1)[:, None, :].expand(-1, t, -1)
