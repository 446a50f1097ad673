"""HF checkpoint layout: config.json + model.safetensors (or shards named by an index, or any *.safetensors)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from refengine.config import ConfigError

_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def shard_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [directory / n for n in names]
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{directory}: no *.safetensors weights found")
    return files


def load_state(model: torch.nn.Module, directory: str | Path, dtype: torch.dtype, device) -> None:
    directory = Path(directory)
    state = {}
    for f in shard_files(directory):
        state.update(load_file(str(f), device="cpu"))
    tied = getattr(model.config, "tie_word_embeddings", False) and hasattr(model, "lm_head")
    if tied:
        state.pop("lm_head.weight", None)
    expected = {k for k in model.state_dict() if not (tied and k == "lm_head.weight")}
    missing = sorted(expected - state.keys())
    if missing:
        raise ConfigError(f"{directory}: weights missing from the safetensors files: {missing[:5]}"
                          + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    extra = sorted(state.keys() - expected)
    if extra:
        raise ConfigError(f"{directory}: unexpected weights in the safetensors files: {extra[:5]}")
    model.load_state_dict({k: v.to(device=device, dtype=dtype) for k, v in state.items()},
                          strict=False, assign=True)
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight


def save_state(model: torch.nn.Module, cfg, directory: str | Path) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if getattr(cfg, "tie_word_embeddings", False) and hasattr(model, "lm_head"):
        state.pop("lm_head.weight", None)
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    raw = cfg.to_hf()
    raw["torch_dtype"] = _DTYPE_NAMES.get(next(iter(state.values())).dtype, "float32")
    (directory / "config.json").write_text(json.dumps(raw, indent=2) + "\n")


class Pretrained:
    """from_pretrained / save_pretrained for a module with `config_class` and `config` (HF layout)."""

    @classmethod
    def from_pretrained(cls, directory: str | Path, dtype: torch.dtype = torch.float32, device="cpu"):
        cfg = cls.config_class.load(directory)
        with torch.device("meta"):  # no throwaway random init: the weights come from the files
            model = cls(cfg)
        load_state(model, directory, dtype, device)
        return model.eval()

    def save_pretrained(self, directory: str | Path) -> None:
        save_state(self, self.config, directory)
