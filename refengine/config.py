"""Model configs read from and written to HF-format config.json files.

    TargetConfig.load(dir) / .to_hf()     a Qwen3 decoder ("Qwen3ForCausalLM")
    DrafterConfig.load(dir) / .to_hf()    a DFlash drafter ("DFlashDraftModel", z-lab's layout)

A missing or malformed field raises ConfigError naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    pass


@dataclass
class TargetConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 40960
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None

    architecture = "Qwen3ForCausalLM"

    @classmethod
    def from_hf(cls, raw: dict, source: str = "config") -> TargetConfig:
        return cls(**_fields(cls, raw, source))

    @classmethod
    def load(cls, directory: str | Path) -> TargetConfig:
        path = Path(directory) / "config.json"
        return cls.from_hf(_read(path), str(path))

    def to_hf(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("rope_theta",)}
        out.update(architectures=[self.architecture], model_type="qwen3", hidden_act="silu",
                   rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
                   use_sliding_window=False, torch_dtype="float32")
        return out


@dataclass
class DrafterConfig(TargetConfig):
    block_size: int = 16
    num_target_layers: int = 0
    target_layer_ids: list[int] = field(default_factory=list)
    mask_token_id: int = 0
    # Optional knobs that z-lab's loader honours when a checkpoint sets them.
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None

    architecture = "DFlashDraftModel"

    @classmethod
    def from_hf(cls, raw: dict, source: str = "config") -> DrafterConfig:
        flat = dict(raw)
        flat.update(raw.get("dflash_config") or {})
        for name in ("block_size", "num_target_layers", "target_layer_ids", "mask_token_id"):
            if name not in flat:
                raise ConfigError(f"{source}: field '{name}' is missing (needed by a DFlash drafter)")
        cfg = cls(**_fields(cls, flat, source))
        if not cfg.target_layer_ids or any(not 0 <= i < cfg.num_target_layers for i in cfg.target_layer_ids):
            raise ConfigError(f"{source}: field 'dflash_config.target_layer_ids' = {cfg.target_layer_ids} "
                              f"must be non-empty ids in [0, num_target_layers={cfg.num_target_layers})")
        if cfg.block_size < 2:
            raise ConfigError(f"{source}: field 'block_size' = {cfg.block_size} must be >= 2")
        return cfg

    def to_hf(self) -> dict:
        out = super().to_hf()
        for name in ("target_layer_ids", "mask_token_id", "input_embedding_scale",
                     "output_multiplier", "final_logit_softcapping"):
            out.pop(name)
        out["dflash_config"] = {"target_layer_ids": self.target_layer_ids, "mask_token_id": self.mask_token_id}
        for name, default in (("input_embedding_scale", 1.0), ("output_multiplier", 1.0),
                              ("final_logit_softcapping", None)):
            if getattr(self, name) != default:
                out["dflash_config"][name] = getattr(self, name)
        return out


def _read(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (a checkpoint directory needs config.json)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from e


def _fields(cls, raw: dict, source: str) -> dict:
    raw = _normalized(raw, source)
    names = {f.name: f for f in cls.__dataclass_fields__.values()}
    out = {}
    for name, f in names.items():
        if name in raw and raw[name] is not None:
            out[name] = raw[name]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ConfigError(f"{source}: field '{name}' is missing")
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "head_dim"):
        if not isinstance(out[name], int) or out[name] <= 0:
            raise ConfigError(f"{source}: field '{name}' = {out[name]!r} must be a positive integer")
    if out["num_attention_heads"] % out["num_key_value_heads"]:
        raise ConfigError(f"{source}: field 'num_key_value_heads' = {out['num_key_value_heads']} "
                          f"must divide num_attention_heads = {out['num_attention_heads']}")
    return out


def _normalized(raw: dict, source: str) -> dict:
    """config.json as this engine reads it: RoPE's theta from either spelling of its parameters, head_dim
    derived where absent; what the engine does not implement (other RoPE kinds, sliding windows) refused."""
    raw = dict(raw)
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise ConfigError(f"{source}: field 'rope_parameters.rope_type' = {kind!r} is not supported (only 'default')")
    if "rope_theta" in rope:
        raw.setdefault("rope_theta", rope["rope_theta"])
    if raw.get("use_sliding_window"):
        raise ConfigError(f"{source}: field 'use_sliding_window' = true is not supported")
    if "head_dim" not in raw and "hidden_size" in raw and "num_attention_heads" in raw:
        raw["head_dim"] = raw["hidden_size"] // raw["num_attention_heads"]
    return raw
