"""Train the Qwen3 target with transformers' own Qwen3ForCausalLM, so the checkpoint is HF-native.

Batches are random windows of the training stream; validation is the held-out stream cut into
consecutive windows, so its loss is the same number on every run.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from refengine.train.configs import TargetSize


def make_config(size: TargetSize, vocab: int, ids: dict[str, int]) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=vocab, hidden_size=size.hidden, intermediate_size=size.intermediate,
        num_hidden_layers=size.layers, num_attention_heads=size.heads, num_key_value_heads=size.kv_heads,
        head_dim=size.hidden // size.heads, max_position_embeddings=2048, tie_word_embeddings=True,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["eos"],
        architectures=["Qwen3ForCausalLM"])


def windows(stream: np.ndarray, seq_len: int, batch: int, gen: np.random.Generator) -> torch.Tensor:
    starts = gen.integers(0, len(stream) - seq_len, size=batch)
    return torch.from_numpy(np.stack([stream[s:s + seq_len] for s in starts]).astype(np.int64))


@torch.no_grad()
def val_loss(model, stream: np.ndarray, seq_len: int, device, max_windows: int = 512, batch: int = 32) -> float:
    n = min(max_windows, (len(stream) - 1) // seq_len)
    if n == 0:
        raise ValueError(f"held-out stream of {len(stream)} tokens is shorter than one window of {seq_len}")
    x = torch.from_numpy(stream[: n * seq_len].astype(np.int64)).view(n, seq_len)
    model.eval()
    total = 0.0
    for i in range(0, n, batch):
        xb = x[i:i + batch].to(device)
        with autocast(device):
            logits = model(xb).logits.float()
        total += torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), xb[:, 1:].reshape(-1), reduction="sum").item()
    model.train()
    return total / (n * (seq_len - 1))


def autocast(device):
    dev = torch.device(device)
    return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")


def lr_at(progress: float, peak: float, warmup_frac: float = 0.04, floor: float = 0.1) -> float:
    """Linear warmup, then cosine down to floor * peak; progress runs from 0 to 1."""
    if progress < warmup_frac:
        return peak * max(progress, 1e-3) / warmup_frac
    t = (progress - warmup_frac) / (1 - warmup_frac)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


class Schedule:
    """Progress through a run of `steps` steps, or of `max_minutes` when that comes first, so a
    time-capped run still anneals its learning rate fully instead of stopping mid-schedule."""

    def __init__(self, steps: int, max_minutes: float | None):
        self.steps, self.limit, self.t0 = steps, (max_minutes * 60 if max_minutes else None), time.time()

    def progress(self, step: int) -> float:
        p = step / self.steps
        if self.limit:
            p = max(p, (time.time() - self.t0) / self.limit)
        return p

    def elapsed(self) -> float:
        return round(time.time() - self.t0, 1)


def train(size: TargetSize, train_stream: np.ndarray, val_stream: np.ndarray, config: Qwen3Config,
          device: str, seed: int, log_every: int = 100, eval_every: int = 1000, max_minutes: float | None = None):
    """Returns (model, history). history rows: step, train loss, val loss (when evaluated), seconds."""
    torch.manual_seed(seed)
    gen = np.random.default_rng(seed)
    model = Qwen3ForCausalLM(config).to(device)
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=size.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=torch.device(device).type == "cuda")
    history, running, sched = [], [], Schedule(size.steps, max_minutes)
    step = 0
    while (p := sched.progress(step)) < 1:
        for g in opt.param_groups:
            g["lr"] = lr_at(p, size.lr)
        x = windows(train_stream, size.seq_len + 1, size.batch, gen).to(device, non_blocking=True)
        with autocast(device):
            logits = model(x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        running.append(loss.detach())
        step += 1
        last = sched.progress(step) >= 1
        if step % log_every == 0 or last:
            row = {"step": step, "train_loss": torch.stack(running).mean().item(), "seconds": sched.elapsed()}
            running = []
            if step % eval_every == 0 or last:
                row["val_loss"] = val_loss(model, val_stream, size.seq_len, device)
            history.append(row)
            print(json.dumps(row), flush=True)
    return model, history


def save(model, out_dir: Path, dtype=torch.bfloat16) -> None:
    """HF layout; top-level rope_theta too, for readers older than transformers 5's rope_parameters."""
    model = model.to(dtype)
    model.config.use_cache = True
    model.save_pretrained(out_dir, safe_serialization=True)
    cfg_path = out_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["rope_theta"] = cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
    cfg["torch_dtype"] = str(dtype).removeprefix("torch.")
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    gen_cfg = out_dir / "generation_config.json"
    if gen_cfg.exists():
        gen_cfg.unlink()  # decoding settings belong to the profile, not the checkpoint
