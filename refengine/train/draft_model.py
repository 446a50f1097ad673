"""The DFlash drafter as trained here: a few Qwen3-style layers over the target's features.

Parameter names follow z-lab's checkpoints (`fc`, `hidden_norm`, `layers.*`, `norm`) so the
state dict loads unchanged into dflash.DFlashDraftModel and into our engine. Training and tau
evaluation need many blocks of one sequence at once, each seeing the context strictly before its
anchor, so this module takes the context and every block together and masks per block, which
the inference-shaped modules (one block, a KV cache) do not offer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """The DFlash rule: spread the draft's taps evenly over target layers 1 .. L-3."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return [round(start + i * (end - start) / (num_draft_layers - 1)) for i in range(num_draft_layers)]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope(x, pos, theta: float):
    """x: (N, H, T, d); pos: (N, T) absolute positions. Half-split rotation, as Qwen3."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = pos.float()[..., None] * inv                      # (N, T, d/2)
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None].to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None].to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Attention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        d, self.hd = cfg["hidden_size"], cfg["head_dim"]
        self.h, self.kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.theta = cfg["rope_theta"]
        self.q_proj = nn.Linear(d, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, d, bias=False)
        self.q_norm = RMSNorm(self.hd, cfg["rms_norm_eps"])
        self.k_norm = RMSNorm(self.hd, cfg["rms_norm_eps"])

    def forward(self, x, ctx, pos_q, pos_k, mask):
        n, tq, _ = x.shape
        kv_in = torch.cat([ctx, x], 1)  # keys and values: context features, then the block itself
        q = self.q_norm(self.q_proj(x).view(n, tq, self.h, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(kv_in).view(n, -1, self.kv, self.hd)).transpose(1, 2)
        v = self.v_proj(kv_in).view(n, -1, self.kv, self.hd).transpose(1, 2)
        q, k = rope(q, pos_q, self.theta), rope(k, pos_k, self.theta)
        if self.kv != self.h:
            k = k.repeat_interleave(self.h // self.kv, 1)
            v = v.repeat_interleave(self.h // self.kv, 1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(o.transpose(1, 2).reshape(n, tq, -1))


class MLP(nn.Module):
    def __init__(self, d: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(d, inter, bias=False)
        self.up_proj = nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg["hidden_size"], cfg["intermediate_size"])
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, x, ctx, pos_q, pos_k, mask):
        x = x + self.self_attn(self.input_layernorm(x), ctx, pos_q, pos_k, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DraftModel(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        d = cfg["hidden_size"]
        self.target_layer_ids = cfg["dflash_config"]["target_layer_ids"]
        self.block_size = cfg["block_size"]
        self.mask_token_id = cfg["dflash_config"]["mask_token_id"]
        self.fc = nn.Linear(len(self.target_layer_ids) * d, d, bias=False)
        self.hidden_norm = RMSNorm(d, cfg["rms_norm_eps"])
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(d, cfg["rms_norm_eps"])
        self.apply(self._init)

    def _init(self, m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=self.cfg.get("initializer_range", 0.02))

    def context(self, hidden_states) -> torch.Tensor:
        """HF hidden_states tuple -> the drafter's context features (layer id l is hidden_states[l+1])."""
        return torch.cat([hidden_states[i + 1] for i in self.target_layer_ids], -1)

    def forward(self, feats, block_emb, anchors):
        """feats (N, L, K*D) target features; block_emb (N, A*b, D); anchors (N, A) positions.
        Returns normed hidden states (N, A*b, D); slot j of block i stands for position anchors[i] + j."""
        n, length, _ = feats.shape
        b = self.block_size
        ctx = self.hidden_norm(self.fc(feats))
        offs = torch.arange(b, device=feats.device)
        pos_q = (anchors[:, :, None] + offs).reshape(n, -1)
        pos_k = torch.cat([torch.arange(length, device=feats.device).expand(n, -1), pos_q], 1)
        mask = block_mask(anchors, length, b)
        x = block_emb
        for layer in self.layers:
            x = layer(x, ctx, pos_q, pos_k, mask)
        return self.norm(x)


def block_mask(anchors: torch.Tensor, length: int, b: int) -> torch.Tensor:
    """(N, 1, A*b, L + A*b) bool: a block sees context strictly before its anchor, and all of itself."""
    n, a = anchors.shape
    dev = anchors.device
    q_anchor = anchors.repeat_interleave(b, 1)                                   # (N, A*b)
    see_ctx = torch.arange(length, device=dev)[None, None, :] < q_anchor[:, :, None]
    blk = torch.arange(a, device=dev).repeat_interleave(b)
    see_blk = (blk[:, None] == blk[None, :]).expand(n, -1, -1)
    return torch.cat([see_ctx, see_blk], -1)[:, None]


def drafter_config(target_cfg: dict, layers: int, block_size: int, mask_token_id: int) -> dict:
    """A Qwen3 config for the draft layers plus the DFlash fields, in z-lab's layout."""
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "rms_norm_eps", "vocab_size", "max_position_embeddings", "hidden_act", "initializer_range",
            "attention_bias", "attention_dropout", "rope_parameters", "tie_word_embeddings",
            "bos_token_id", "eos_token_id", "pad_token_id")
    cfg = {k: target_cfg[k] for k in keep if k in target_cfg}
    theta = target_cfg.get("rope_theta") or target_cfg["rope_parameters"]["rope_theta"]
    cfg.update({
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "rope_theta": theta,
        "num_hidden_layers": layers, "num_target_layers": target_cfg["num_hidden_layers"],
        "block_size": block_size, "layer_types": ["full_attention"] * layers, "use_cache": True,
        "dflash_config": {"target_layer_ids": build_target_layer_ids(target_cfg["num_hidden_layers"], layers),
                          "mask_token_id": mask_token_id},
    })
    return cfg
