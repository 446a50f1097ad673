"""Building blocks shared by the target (model.py) and the drafter (drafter.py).

    rms_norm / RMSNorm   Qwen3's RMSNorm (statistics in fp32, weight applied in the input dtype)
    rope(positions, ...) -> (cos, sin) for explicit, arbitrary position ids [B, T]
    apply_rope(x, cos, sin)
    MLP                  SwiGLU: down(silu(gate(x)) * up(x))
    QKV                  q/k/v projections + per-head q/k RMSNorm, shaped [B, heads, T, head_dim]
    attend(q, k, v, visible)  SDPA with GQA and a boolean visibility mask [B, T, S]

Module names follow the HF checkpoints (self_attn.q_proj, mlp.gate_proj, ...) so that a
state dict loads without renaming.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # fp32 statistics, as HF does: bf16 variance loses the bits that decide ties.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rope(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    """cos/sin of shape [B, 1, T, head_dim] for position ids [B, T] (any order, any gaps)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device,
                                             dtype=torch.float32) / head_dim))
    angles = positions[..., None].float() * inv_freq
    angles = torch.cat([angles, angles], dim=-1)[:, None]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class QKV(nn.Module):
    """The attention projections of one layer; both models own q_proj, k_proj, v_proj, o_proj, q_norm, k_norm."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, head_dim: int, eps: float, bias: bool):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.q_proj = nn.Linear(dim, n_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(dim, n_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(dim, n_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * head_dim, dim, bias=bias)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_norm = RMSNorm(head_dim, eps)

    def queries(self, x: torch.Tensor, cos, sin) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.n_heads, self.head_dim)).transpose(1, 2)
        return apply_rope(q, cos, sin)

    def keys_values(self, x: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def out(self, o: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
    """q [B, H, T, d], k/v [B, Hkv, S, d], visible [B, T, S] bool (True = may attend) or None (all)."""
    mask = None if visible is None else visible[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


class DecoderLayer(nn.Module):
    """The weights of a Qwen3 decoder layer (HF names); target and drafter layers differ only in forward."""

    def __init__(self, cfg):
        super().__init__()
        self.self_attn = QKV(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                             cfg.head_dim, cfg.rms_norm_eps, cfg.attention_bias)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
