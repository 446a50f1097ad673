"""The twin: a target + drafter of a real model's shape whose computation contains the tiny pair's.

    python -m refengine.twin SHAPE [OUT] [--seed N] [--dtype bf16|fp32] [--device cpu|cuda]
    build(shape, out=None, seed=0, dtype="bf16") -> OUT      OUT/target, OUT/drafter, OUT/twin.json

A twin runs every matrix product, KV-cache byte and kernel launch of the real shape (Qwen3-8B and
its z-lab DFlash drafter), yet its tokens and verify steps are the shipped pair's: acceptance comes
from a trained pair while the step times are the real model's. How the pair sits inside:

- residual: the pair's d dims are the twin's first d; dim d is a sentinel that every embedding row
  sets to C and nothing writes; the other dims stay 0 (o_proj / down_proj rows there are 0).
- RMSNorm over D dims: mean square = (S + C^2) / D + eps', so eps' = (d eps - C^2) / D makes it
  d/D times the pair's, and weights scaled by sqrt(d/D) undo that. Internal norms weigh the
  sentinel 0, so no projection sees it; the drafter's fc copies it so hidden_norm sees it too.
- padded vocab: the final norms weigh the sentinel PAD_NORM and padded lm_head rows hold PAD_ROW
  there (real rows 0): every padded logit is ~ -1e9 C / rms, never sampled, 0 mass in fp32.
- heads: pair KV head g -> twin KV head g, its q heads -> the first q heads of that group; rotary
  pair i (dims i, i + p/2) -> twin pair r i (r = twin / pair head_dim) at the pair's rope_theta,
  so the frequencies are the pair's bit for bit. q_norm absorbs the head_dim RMS and softmax-scale
  change; q_norm / k_norm keep the config eps (their ideal one differs: measured in the tests).
- extra heads, MLP units and ballast layers carry seeded weights and zero output columns:
  they cost what real ones cost and change nothing. Pair layers are placed so that the twin's
  target_layer_ids read the pair's features; extra feature layers get zero fc columns.

Seeded values are a counter hash of (seed, tensor name, index): the same bytes on CPU and CUDA.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from safetensors.torch import save as st_save

from refengine.checkpoint import shard_files
from refengine.config import ConfigError, DrafterConfig, TargetConfig
from refengine.drafter import Drafter
from refengine.model import Target

REPO = Path(__file__).resolve().parents[1]
PAIR_TARGET = REPO / "models" / "qwen3-stdlib-13m"
PAIR_DRAFTER = REPO / "models" / "qwen3-stdlib-13m-dflash-b16"
VERSION = 1                      # bump when the construction changes: old OUT dirs stop matching
STD = 0.02                       # seeded weights: uniform, this std (HF's initializer_range)
PAD_NORM, PAD_ROW = 1024.0, -2.0 ** 20   # powers of two: exact in bf16
SHARD_BYTES = 4 * 10 ** 9
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "generation_config.json", "chat_template.jinja")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


@dataclass(frozen=True)
class Shape:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    draft_layers: int
    target_layer_ids: tuple[int, ...]
    block_size: int = 16


SHAPES = {
    # Qwen/Qwen3-8B config.json (verbatim copy: huggingface.co/thejaminator/qwen-hook-layer-9/commit/
    # 478fb720f1f3ced834fce0275b55b2732d438edc, "Copy config.json from Qwen/Qwen3-8B"): hidden 4096, 36 layers,
    # 32 heads / 8 KV, head_dim 128, intermediate 12288, vocab 151936, tie_word_embeddings false,
    # max_position_embeddings 40960, rms_norm_eps 1e-6, rope_theta 1e6 (the twin keeps the pair's 1e4).
    # Drafter z-lab/Qwen3-8B-DFlash-b16: 5 layers of those widths, block 16, target_layer_ids [1, 9, 17, 25, 33],
    # num_target_layers 36 (vllm-project/speculators tests/unit/convert/test_dflash_converter.py, whose
    # source config is z-lab's, auto_map dflash.DFlashDraftModel; z-lab's model card pairs it with Qwen/Qwen3-8B).
    "qwen3-8b": Shape(4096, 36, 32, 8, 128, 12288, 151936, 40960, 5, (1, 9, 17, 25, 33)),
    # for CPU tests: two ballast target layers (2 and 4), one ballast drafter layer, a fourth feature
    # layer with zero fc columns, 808 padded tokens
    "tiny-twin": Shape(768, 8, 8, 2, 128, 2048, 9000, 2048, 4, (1, 3, 5, 6)),
}


class TwinError(ValueError):
    pass


# ---------------------------------------------------------------------------------------------
# seeded values: lowbias32-style mixing on int64 tensors, every product < 2^63 (no overflow),
# so the integers are exact on any device and the floats come from one IEEE multiply.

M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & M32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def seeded(seed: int, name: str, shape, device="cpu", chunk: int = 1 << 24) -> torch.Tensor:
    """Uniform values of std STD, fp32, a function of (seed, name, flat index) only."""
    n = math.prod(shape)
    if n >= 1 << 32:
        raise TwinError(f"{name}: {n} elements is past the 32-bit counter")
    digest = hashlib.sha256(f"{seed}\0{name}".encode()).digest()
    k1, k2 = int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little")
    scale = torch.tensor(STD * math.sqrt(12.0), dtype=torch.float32, device=device)
    out = torch.empty(n, dtype=torch.float32, device=device)
    for lo in range(0, n, chunk):
        i = torch.arange(lo, min(lo + chunk, n), dtype=torch.int64, device=device)
        h = _mix32((_mix32(i ^ k1) + k2) & M32)
        out[lo:lo + len(i)] = ((h >> 8).float() * 2.0 ** -24 - 0.5) * scale
    return out.view(*shape)


# ---------------------------------------------------------------------------------------------
# layout: where the pair sits in the twin


@dataclass
class Layout:
    name: str
    shape: Shape
    pt: TargetConfig              # the pair's target and drafter configs
    pd: DrafterConfig
    tlayers: list[int]            # pair target layer l -> twin target layer
    dlayers: list[int]            # pair drafter layer l -> twin drafter layer
    c: float                      # sentinel value (dim pt.hidden_size)
    eps: float                    # the twin's rms_norm_eps

    @property
    def s(self) -> int:
        return self.pt.hidden_size

    def norm_scale(self) -> float:
        return math.sqrt(self.pt.hidden_size / self.shape.hidden_size)

    def head_dims(self) -> torch.Tensor:
        """Twin head dim of each pair head dim: rotary pair i -> r i, so the frequencies match."""
        p, t = self.pt.head_dim, self.shape.head_dim
        r, i = t // p, torch.arange(p // 2)
        return torch.cat([r * i, r * i + t // 2])

    def q_heads(self) -> list[int]:
        np_, nt = self.pt.num_attention_heads // self.pt.num_key_value_heads, \
            self.shape.num_attention_heads // self.shape.num_key_value_heads
        return [(h // np_) * nt + h % np_ for h in range(self.pt.num_attention_heads)]

    def rows(self, heads: list[int]) -> torch.Tensor:
        """Twin projection rows of the pair's heads' dims, pair order (head-major)."""
        t, dims = self.shape.head_dim, self.head_dims()
        return torch.cat([h * t + dims for h in heads])

    def whole(self, heads: list[int]) -> torch.Tensor:
        t = self.shape.head_dim
        return torch.cat([torch.arange(h * t, (h + 1) * t) for h in heads])


def place(n_pair: int, pair_ids: list[int], twin_ids: list[int]) -> list[int]:
    """Twin index of each pair target layer: pair feature layers on the twin's first feature
    layers, later pair layers on its spare feature layers, the rest right after their predecessor."""
    at = dict(zip(pair_ids, twin_ids, strict=False))
    spare = list(twin_ids[len(pair_ids):])
    out = []
    for layer in range(n_pair):
        if layer in at:
            out.append(at[layer])
        elif layer > max(pair_ids) and spare:
            out.append(spare.pop(0))
        else:
            out.append(out[-1] + 1 if out else 0)
    return out


def spread(n_pair: int, n_twin: int) -> list[int]:
    return [0] if n_pair == 1 else [round(i * (n_twin - 1) / (n_pair - 1)) for i in range(n_pair)]


def _pair_layer(name: str, prefix: str, placed: dict[int, int], weights: dict) -> tuple[str, dict | None]:
    """A twin layer tensor's field, and the pair's tensors of the layer it carries (None: a ballast layer)."""
    i, field = name[len(prefix):].split(".", 1)
    p = placed.get(int(i))
    if p is None:
        return field, None
    own = f"{prefix}{p}."
    return field, {k[len(own):]: t for k, t in weights.items() if k.startswith(own)}


def sentinel(d: int, eps: float) -> float:
    """The largest power of two C with C^2 <= d eps / 2: exact in bf16, and eps' stays positive."""
    return 2.0 ** math.floor(math.log2(math.sqrt(d * eps / 2)))


def layout(name: str, pair_target: Path | None = None, pair_drafter: Path | None = None) -> Layout:
    pair_target, pair_drafter = Path(pair_target or PAIR_TARGET), Path(pair_drafter or PAIR_DRAFTER)
    if name not in SHAPES:
        raise TwinError(f"unknown twin shape {name!r}: known shapes are {', '.join(sorted(SHAPES))}")
    sh = SHAPES[name]
    for d in (pair_target, pair_drafter):
        if not (Path(d) / "config.json").is_file():
            raise TwinError(f"{d}: not a checkpoint directory (no config.json)")
    pt, pd = TargetConfig.load(pair_target), DrafterConfig.load(pair_drafter)
    checks = [
        (pt.attention_bias or pd.attention_bias, "the pair has attention biases (not mapped)"),
        ((pd.hidden_size, pd.head_dim, pd.num_attention_heads, pd.num_key_value_heads, pd.rms_norm_eps,
          pd.rope_theta) != (pt.hidden_size, pt.head_dim, pt.num_attention_heads, pt.num_key_value_heads,
                             pt.rms_norm_eps, pt.rope_theta), "the pair's drafter and target differ in width"),
        (sh.hidden_size <= pt.hidden_size, f"hidden_size {sh.hidden_size} leaves no sentinel dim past the "
                                           f"pair's {pt.hidden_size}"),
        (sh.head_dim % pt.head_dim, f"head_dim {sh.head_dim} is not a multiple of the pair's {pt.head_dim}"),
        (sh.num_attention_heads % sh.num_key_value_heads, "num_key_value_heads must divide num_attention_heads"),
        (sh.num_key_value_heads < pt.num_key_value_heads, f"fewer KV heads than the pair's {pt.num_key_value_heads}"),
        (sh.num_attention_heads // sh.num_key_value_heads < pt.num_attention_heads // pt.num_key_value_heads,
         "a smaller GQA group than the pair's"),
        (sh.intermediate_size < max(pt.intermediate_size, pd.intermediate_size), "a smaller intermediate_size"),
        (sh.vocab_size < pt.vocab_size, f"vocab_size {sh.vocab_size} < the pair's {pt.vocab_size}"),
        (sh.num_hidden_layers < pt.num_hidden_layers, "fewer target layers than the pair's"),
        (sh.draft_layers < pd.num_hidden_layers, "fewer drafter layers than the pair's"),
        (len(sh.target_layer_ids) < len(pd.target_layer_ids), "fewer feature layers than the pair's drafter reads"),
        (sh.block_size != pd.block_size, f"block_size {sh.block_size} != the pair drafter's {pd.block_size}"),
        (pd.num_target_layers != pt.num_hidden_layers, "the pair's drafter was made for another target depth"),
        (pt.num_hidden_layers - 1 in pd.target_layer_ids, "the pair reads its last (normed) layer"),
    ]
    for bad, why in checks:
        if bad:
            raise TwinError(f"twin shape {name!r} cannot hold the pair {pair_target} + {pair_drafter}: {why}")
    tl = place(pt.num_hidden_layers, pd.target_layer_ids, list(sh.target_layer_ids))
    ok = all(a < b for a, b in zip(tl, tl[1:], strict=False)) and 0 <= tl[0] and tl[-1] < sh.num_hidden_layers
    if not ok or sh.num_hidden_layers - 1 in sh.target_layer_ids:
        raise TwinError(f"twin shape {name!r}: target_layer_ids {list(sh.target_layer_ids)} cannot carry the "
                        f"pair's {pd.target_layer_ids} in order (placement {tl}; the last layer is normed)")
    c = sentinel(pt.hidden_size, pt.rms_norm_eps)
    eps = (pt.hidden_size * pt.rms_norm_eps - c * c) / sh.hidden_size
    return Layout(name, sh, pt, pd, tl, spread(pd.num_hidden_layers, sh.draft_layers), c, eps)


# ---------------------------------------------------------------------------------------------
# configs


def configs(lay: Layout, raw_target: dict, raw_drafter: dict, dtype: str) -> tuple[dict, dict]:
    """The pair's config.json files with the twin's numbers: the keys loaders know stay as they were."""
    sh, name = lay.shape, {"bf16": "bfloat16", "fp32": "float32"}[dtype]

    def common(raw: dict, layers: int) -> dict:
        out = dict(raw)
        out.update(hidden_size=sh.hidden_size, intermediate_size=sh.intermediate_size,
                   num_hidden_layers=layers, num_attention_heads=sh.num_attention_heads,
                   num_key_value_heads=sh.num_key_value_heads, head_dim=sh.head_dim, vocab_size=sh.vocab_size,
                   rms_norm_eps=lay.eps, tie_word_embeddings=False,
                   max_position_embeddings=sh.max_position_embeddings, torch_dtype=name)
        if "dtype" in raw:
            out["dtype"] = name
        if "layer_types" in raw:
            out["layer_types"] = ["full_attention"] * layers
        if "max_window_layers" in raw:
            out["max_window_layers"] = layers
        return out

    target = common(raw_target, sh.num_hidden_layers)
    drafter = common(raw_drafter, sh.draft_layers)
    drafter.update(block_size=sh.block_size, num_target_layers=sh.num_hidden_layers)
    flat = "dflash_config" not in raw_drafter
    ids = list(sh.target_layer_ids)
    if flat:
        drafter["target_layer_ids"] = ids
    else:
        drafter["dflash_config"] = {**raw_drafter["dflash_config"], "target_layer_ids": ids}
    return target, drafter


# ---------------------------------------------------------------------------------------------
# tensors


class Maker:
    """Makes one twin tensor at a time from the pair's weights (fp32, CPU) and seeded values."""

    def __init__(self, lay: Layout, pair_target: dict, pair_drafter: dict, seed: int, dtype: torch.dtype,
                 device="cpu"):
        self.lay, self.seed, self.dtype, self.device = lay, seed, dtype, device
        self.ts, self.ds = pair_target, pair_drafter   # the pair's weights, fp32
        self.tmap = {t: p for p, t in enumerate(lay.tlayers)}
        self.dmap = {t: p for p, t in enumerate(lay.dlayers)}

    def base(self, role: str, name: str, shape, kind: str) -> torch.Tensor:
        if kind == "seeded":
            return seeded(self.seed, f"{role}/{name}", shape, self.device).to(self.dtype).cpu()
        return (torch.zeros if kind == "zeros" else torch.ones)(shape, dtype=self.dtype)

    def target(self, name: str, shape) -> torch.Tensor:
        lay, d, s, v = self.lay, self.lay.pt.hidden_size, self.lay.s, self.lay.pt.vocab_size
        if name.startswith("model.layers."):
            field, pair = _pair_layer(name, "model.layers.", self.tmap, self.ts)
            return self.layer("target", name, field, shape, pair)
        if name == "model.embed_tokens.weight":
            w = self.base("target", name, shape, "zeros")
            w[:v, :d] = self.ts[name].to(w.dtype)
            w[:, s] = lay.c
            return w
        if name == "lm_head.weight":
            w = self.base("target", name, shape, "zeros")
            w[:v, :d] = self.ts.get(name, self.ts["model.embed_tokens.weight"]).to(w.dtype)
            w[v:, s] = PAD_ROW
            return w
        if name == "model.norm.weight":
            return self.final_norm(name, shape, self.ts[name], "target")
        raise TwinError(f"no rule for target tensor {name}")

    def drafter(self, name: str, shape) -> torch.Tensor:
        lay, d, s, D = self.lay, self.lay.pt.hidden_size, self.lay.s, self.lay.shape.hidden_size
        if name.startswith("layers."):
            field, pair = _pair_layer(name, "layers.", self.dmap, self.ds)
            return self.layer("drafter", name, field, shape, pair)
        if name == "fc.weight":
            w = self.base("drafter", name, shape, "zeros")
            fc = self.ds[name]
            for k in range(len(lay.pd.target_layer_ids)):
                w[:d, k * D:k * D + d] = fc[:, k * d:(k + 1) * d].to(w.dtype)
            w[s, s] = 1.0   # the sentinel rides into hidden_norm, whose RMS then is the pair's
            return w
        if name == "hidden_norm.weight":
            return self.norm("drafter", name, shape, self.ds[name])
        if name == "norm.weight":
            return self.final_norm(name, shape, self.ds[name], "drafter")
        raise TwinError(f"no rule for drafter tensor {name}")

    def norm(self, role: str, name: str, shape, pair: torch.Tensor) -> torch.Tensor:
        w = self.base(role, name, shape, "ones")
        w[:self.lay.pt.hidden_size] = (pair * self.lay.norm_scale()).to(w.dtype)
        w[self.lay.s] = 0.0
        return w

    def final_norm(self, name: str, shape, pair: torch.Tensor, role: str) -> torch.Tensor:
        w = self.norm(role, name, shape, pair)
        if self.lay.shape.vocab_size > self.lay.pt.vocab_size:
            w[self.lay.s] = PAD_NORM
        return w

    def layer(self, role: str, name: str, field: str, shape, pair: dict | None) -> torch.Tensor:
        if pair is None:   # ballast: a real layer's work, nothing written to the residual
            kind = "zeros" if field in ("self_attn.o_proj.weight", "mlp.down_proj.weight") else \
                "ones" if field.endswith("norm.weight") else "seeded"
            return self.base(role, name, shape, kind)
        lay, d = self.lay, self.lay.pt.hidden_size
        p = pair[field]
        qh, kh = lay.q_heads(), list(range(lay.pt.num_key_value_heads))
        if field in ("input_layernorm.weight", "post_attention_layernorm.weight"):
            return self.norm(role, name, shape, p)
        if field in ("self_attn.q_norm.weight", "self_attn.k_norm.weight"):
            w = self.base(role, name, shape, "ones")
            # q.k / sqrt(t) with q, k each sqrt(t/p) larger after the norm: q absorbs the net sqrt(p/t)
            f = math.sqrt(lay.pt.head_dim / lay.shape.head_dim) if "q_norm" in field else 1.0
            w[lay.head_dims()] = (p * f).to(w.dtype)
            return w
        if field in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"):
            heads = qh if "q_proj" in field else kh
            w = self.base(role, name, shape, "seeded")
            # q/k dims the pair lacks must be 0 (their RMS and dot products); v's are cut by o_proj
            w[lay.whole(heads) if "v_proj" not in field else lay.rows(heads)] = 0
            w[lay.rows(heads), :d] = p.to(w.dtype)
            return w
        if field == "self_attn.o_proj.weight":
            w = self.base(role, name, shape, "zeros")
            w[:d, lay.rows(qh)] = p.to(w.dtype)
            return w
        if field in ("mlp.gate_proj.weight", "mlp.up_proj.weight"):
            w = self.base(role, name, shape, "seeded")
            w[:p.shape[0]] = 0
            w[:p.shape[0], :d] = p.to(w.dtype)
            return w
        if field == "mlp.down_proj.weight":
            w = self.base(role, name, shape, "zeros")
            w[:d, :p.shape[1]] = p.to(w.dtype)
            return w
        raise TwinError(f"no rule for {role} tensor {name}")


def tensor_shapes(cfg, cls) -> list[tuple[str, tuple[int, ...]]]:
    with torch.device("meta"):
        model = cls(cfg)
    return [(k, tuple(v.shape)) for k, v in model.state_dict().items()]


# ---------------------------------------------------------------------------------------------
# files


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def dir_digests(directory: Path) -> dict[str, str]:
    return {f.name: sha256_file(f) for f in sorted(Path(directory).iterdir()) if f.is_file()}


def load_pair_state(directory: Path) -> dict[str, torch.Tensor]:
    state = {}
    for f in shard_files(Path(directory)):
        state.update({k: v.float() for k, v in load_file(str(f)).items()})
    return state


def write_model(directory: Path, names: list[tuple[str, tuple]], make, dtype: torch.dtype,
                shard_bytes: int) -> dict[str, str]:
    """Weights tensor by tensor into shards of at most shard_bytes (HF names; one shard: model.safetensors)."""
    size = torch.empty((), dtype=dtype).element_size()
    shards, cur, used = [], [], 0
    for name, shape in names:
        nbytes = math.prod(shape) * size
        if cur and used + nbytes > shard_bytes:
            shards.append(cur)
            cur, used = [], 0
        cur.append((name, shape))
        used += nbytes
    shards.append(cur)
    n = len(shards)
    files = ["model.safetensors"] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    digests, weight_map, total = {}, {}, 0
    for fname, group in zip(files, shards, strict=True):
        state = {name: make(name, shape).contiguous() for name, shape in group}
        data = st_save(state, metadata={"format": "pt"})
        (directory / fname).write_bytes(data)
        digests[fname] = hashlib.sha256(data).hexdigest()
        total += sum(t.numel() * t.element_size() for t in state.values())
        weight_map.update({name: fname for name in state})
        del state, data
    if n > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        text = json.dumps(index, indent=2) + "\n"
        (directory / "model.safetensors.index.json").write_text(text)
        digests["model.safetensors.index.json"] = hashlib.sha256(text.encode()).hexdigest()
    return digests


def _write_json(path: Path, data: dict) -> str:
    text = json.dumps(data, indent=2) + "\n"
    path.write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


def default_out(shape: str, seed: int) -> Path:
    return REPO / ".twins" / f"{shape}-s{seed}"


def record(lay: Layout, seed: int, dtype: str, pair_target: Path, pair_drafter: Path) -> dict:
    """twin.json less its written files' digests: what decides whether an OUT can be reused."""
    return {
        "version": VERSION, "shape": lay.name, "numbers": {**asdict(lay.shape),
                                                            "target_layer_ids": list(lay.shape.target_layer_ids)},
        "seed": seed, "dtype": dtype,
        "sentinel": {"dim": lay.s, "value": lay.c, "rms_norm_eps": lay.eps, "pair_rms_norm_eps": lay.pt.rms_norm_eps},
        "padded_vocab": {"pair_vocab_size": lay.pt.vocab_size, "final_norm_weight": PAD_NORM, "lm_head_value": PAD_ROW},
        "layers": {"target": lay.tlayers, "drafter": lay.dlayers},
        "rope_theta": lay.pt.rope_theta,
        "deviations": [f"rope_theta {lay.pt.rope_theta:g} (the pair's, so the rotary frequencies are the pair's), "
                       "not the real model's (Qwen3-8B: 1e6)",
                       f"rms_norm_eps {lay.eps:.6g} (sentinel construction), not 1e-6; q_norm/k_norm share it",
                       "bf16 rounds the rescaled norm weights (sqrt(d/D), the q_norm fold): fp32 twins compute the "
                       "pair's logits to fp32 noise, bf16 ones to less than bf16 arithmetic itself moves them"],
        "pair": {"target": {"path": _shown(pair_target), "files": dir_digests(pair_target)},
                 "drafter": {"path": _shown(pair_drafter), "files": dir_digests(pair_drafter)}},
    }


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _same(a: dict, b: dict) -> bool:
    """One recipe: where the pair lay on disk is not part of it, its files' contents are."""
    def recipe(r: dict) -> dict:
        return {**r, "pair": {k: (v or {}).get("files") for k, v in (r.get("pair") or {}).items()}}
    keys = ("version", "shape", "numbers", "seed", "dtype", "sentinel", "padded_vocab", "layers", "pair")
    a, b = recipe(a), recipe(b)
    return all(a.get(k) == b.get(k) for k in keys)


def complete(out: Path, want: dict) -> bool:
    """OUT holds a finished twin of the same recipe (files present at their recorded sizes)."""
    try:
        have = json.loads((out / "twin.json").read_text())
    except (OSError, ValueError):
        return False
    if not _same(have, want):
        return False
    return all((out / f).is_file() and (out / f).stat().st_size == n for f, n in have.get("sizes", {}).items())


def build(shape: str, out: str | Path | None = None, seed: int = 0, dtype: str = "bf16",
          pair_target: str | Path | None = None, pair_drafter: str | Path | None = None, device=None,
          shard_bytes: int = SHARD_BYTES, log=None) -> Path:
    """Write the twin to OUT (default .twins/SHAPE-sSEED) and return OUT; a complete matching OUT is reused."""
    if dtype not in DTYPES:
        raise TwinError(f"dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    pair_target, pair_drafter = Path(pair_target or PAIR_TARGET), Path(pair_drafter or PAIR_DRAFTER)
    lay = layout(shape, pair_target, pair_drafter)
    out = Path(out) if out is not None else default_out(shape, seed)
    want = record(lay, seed, dtype, pair_target, pair_drafter)
    if out.exists():
        if complete(out, want):
            return out
        raise TwinError(f"{out}: exists and is not a complete twin of this recipe ({shape}, seed {seed}, {dtype}); "
                        "remove it or name another OUT")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    log = log or (lambda msg: None)
    raw_t = json.loads((pair_target / "config.json").read_text())
    raw_d = json.loads((pair_drafter / "config.json").read_text())
    tcfg, dcfg = configs(lay, raw_t, raw_d, dtype)
    maker = Maker(lay, load_pair_state(pair_target), load_pair_state(pair_drafter), seed, DTYPES[dtype], device)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:   # written aside, renamed whole: an OUT is complete or absent
        files = {}
        for role, cfg, cls, make in (("target", tcfg, Target, maker.target), ("drafter", dcfg, Drafter, maker.drafter)):
            d = tmp / role
            d.mkdir(parents=True)
            log(f"twin {shape}: writing {role}")
            names = tensor_shapes(cls.config_class.from_hf(cfg, f"{role} config"), cls)
            digests = write_model(d, names, make, DTYPES[dtype], shard_bytes)
            digests["config.json"] = _write_json(d / "config.json", cfg)
            for f in TOKENIZER_FILES:   # the pair's tokenizer, in both: each directory loads alone
                if (pair_target / f).is_file():
                    shutil.copyfile(pair_target / f, d / f)
                    digests[f] = sha256_file(d / f)
            files.update({f"{role}/{k}": v for k, v in sorted(digests.items())})
        rec = {**want, "files": files, "sizes": {f: (tmp / f).stat().st_size for f in files}}
        _write_json(tmp / "twin.json", rec)
        try:
            os.rename(tmp, out)
        except OSError:
            if not complete(out, want):   # else another build of the same recipe finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m refengine.twin", description=__doc__.splitlines()[0])
    ap.add_argument("shape", help=f"one of: {', '.join(SHAPES)}")
    ap.add_argument("out", nargs="?", help="output directory (default .twins/SHAPE-sSEED)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    ap.add_argument("--device", default=None, help="where seeded values are made (default cuda when there is one)")
    ap.add_argument("--pair-target", type=Path, default=None, help="default: the shipped pair's target")
    ap.add_argument("--pair-drafter", type=Path, default=None, help="default: the shipped pair's drafter")
    ap.add_argument("--shard-gb", type=float, default=SHARD_BYTES / 1e9)
    a = ap.parse_args(argv)
    try:
        out = build(a.shape, a.out, a.seed, a.dtype, a.pair_target, a.pair_drafter, a.device,
                    int(a.shard_gb * 1e9), log=lambda m: print(m, file=sys.stderr))
    except (TwinError, ConfigError) as e:
        print(f"twin: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
