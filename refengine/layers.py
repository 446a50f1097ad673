"""Building blocks shared by the target (model.py) and the drafter (drafter.py).

    RMSNorm              Qwen3's RMSNorm (statistics in fp32, weight applied in the input dtype)
    rope(positions, ...) -> (cos, sin) for explicit, arbitrary position ids [B, T]
    apply_rope(x, cos, sin)
    MLP                  SwiGLU: down(silu(gate(x)) * up(x))
    QKV                  q/k/v projections + per-head q/k RMSNorm, shaped [B, heads, T, head_dim]
    fuse(model)          q/k/v and gate/up as one GEMM each, for serving (the parameters become views)
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
        # HF's order: normalize with fp32 statistics (bf16 variance loses the bits that decide ties), round to
        # the input dtype, then scale. aten's rms_norm computes in fp32 for a bf16 input and is one op for torch
        # to fuse, where the spelled-out formula ran as eight kernels, 145 norms a forward at the 8B shape
        # (bench --kernels shows what a GPU runs).
        return self.weight * F.rms_norm(x, (x.shape[-1],), eps=self.eps)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.fused: torch.Tensor | None = None  # [gate; up] after fuse()

    def fuse(self) -> None:
        self.fused = fuse_linears(self.gate_proj, self.up_proj)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused is None:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        gate, up = F.linear(x, self.fused).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


def rope(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    """cos/sin of shape [B, 1, T, head_dim] for position ids [B, T] (any order, any gaps). sin's first half
    carries rotate-half's minus sign (apply_rope)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device,
                                             dtype=torch.float32) / head_dim))
    angles = positions[..., None].float() * inv_freq
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([cos, cos], dim=-1)[:, None].to(dtype), torch.cat([-sin, sin], dim=-1)[:, None].to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # rotate_half(x) * sin, with [-x2, x1] as a roll of x and the sign in sin: three kernels for q or k, not five
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), sin)


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
        self.fused: tuple[torch.Tensor, torch.Tensor | None] | None = None  # [q; k; v] after fuse()

    def fuse(self) -> None:
        self.fused = fuse_linears(self.q_proj, self.k_proj, self.v_proj)

    def _heads(self, y: torch.Tensor, n: int, norm: RMSNorm | None = None) -> torch.Tensor:
        """[B, T, n * head_dim] -> [B, n, T, head_dim], per-head normed."""
        b, t, _ = y.shape
        y = y.view(b, t, n, self.head_dim)
        return (norm(y) if norm is not None else y).transpose(1, 2)

    def _kv(self, k: torch.Tensor, v: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope(self._heads(k, self.n_kv_heads, self.k_norm), cos, sin), self._heads(v, self.n_kv_heads)

    def keys_values(self, x: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
        return self._kv(self.k_proj(x), self.v_proj(x), cos, sin)

    def project(self, x: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of one input: one GEMM once fused."""
        if self.fused is None:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        else:
            kv = self.n_kv_heads * self.head_dim
            q, k, v = F.linear(x, *self.fused).split([self.n_heads * self.head_dim, kv, kv], dim=-1)
        return apply_rope(self._heads(q, self.n_heads, self.q_norm), cos, sin), *self._kv(k, v, cos, sin)

    def out(self, o: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


def fuse_linears(*linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight (and bias) for linears that read the same input, their outputs stacked. Each linear's
    parameters become views of it, so memory is not doubled and the HF-named state dict still reads them."""
    weight = torch.cat([m.weight.detach() for m in linears])
    bias = None if linears[0].bias is None else torch.cat([m.bias.detach() for m in linears])
    start = 0
    for m in linears:
        n = m.weight.shape[0]
        m.weight = nn.Parameter(weight[start:start + n], requires_grad=False)
        if bias is not None:
            m.bias = nn.Parameter(bias[start:start + n], requires_grad=False)
        start += n
    return weight, bias


def fuse(model: nn.Module) -> nn.Module:
    """Serving's last step after loading (and after any .to()): each layer's q/k/v and gate/up projections
    become one GEMM. At decode those are GEMVs that read the same input; apart they are five kernels whose
    smaller ones leave HBM bandwidth unused."""
    for m in model.modules():
        if isinstance(m, (QKV, MLP)):
            m.fuse()
    return model


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
