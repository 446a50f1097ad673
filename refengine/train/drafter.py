"""Train the DFlash drafter by its recipe, against a frozen target.

Each step takes greedy sequences (prompt + the target's own continuation), runs the frozen target
once for its features, picks random anchors in the continuation, and asks the drafter to fill each
block [token at anchor, MASK x (b-1)]. Loss is cross-entropy weighted by exp(-(k-1)/gamma) over
block slot k, so early slots, which gate acceptance of everything after them, count most.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from refengine.train.configs import DrafterSize
from refengine.train.draft_model import DraftModel
from refengine.train.target import Schedule, autocast, lr_at


def pick_anchors(starts: torch.Tensor, length: int, count: int, gen: torch.Generator,
                 bounds: tuple[int, int] | None = None) -> torch.Tensor:
    """count distinct anchors per row in [its continuation's start, length - 2], so each block has a label.
    bounds: (lowest, highest) start over all the data, when known, so a step need not read them off the device."""
    lo, hi = bounds or (int(starts.min()), int(starts.max()))
    span = length - 1 - hi
    if count > span:
        raise ValueError(f"{count} anchors do not fit in a continuation of {span} positions")
    # drawn over [lo, length - 2] only, so rows that all start at lo draw exactly as before ragged starts
    r = torch.rand(len(starts), length - 1 - lo, generator=gen, device=starts.device)
    before = torch.arange(lo, length - 1, device=starts.device) < starts[:, None]
    return r.masked_fill(before, 2.0).argsort(1)[:, :count].sort(1).values + lo  # 2.0: never among the smallest


def block_inputs(seqs: torch.Tensor, anchors: torch.Tensor, b: int, mask_id: int):
    """Block token ids (N, A*b), labels (N, A, b-1) and their validity."""
    n, length = seqs.shape
    first = seqs.gather(1, anchors)
    ids = torch.full((*anchors.shape, b), mask_id, dtype=seqs.dtype, device=seqs.device)
    ids[..., 0] = first
    lab_pos = anchors[..., None] + torch.arange(1, b, device=seqs.device)
    valid = lab_pos < length
    labels = seqs.gather(1, lab_pos.clamp(max=length - 1).view(n, -1)).view_as(lab_pos)
    return ids.view(n, -1), labels, valid


def loss_fn(model: DraftModel, target, seqs: torch.Tensor, anchors: torch.Tensor, weights: torch.Tensor):
    b = model.block_size
    with torch.no_grad():
        out = target.model(seqs, output_hidden_states=True)  # features only; skip the LM head
        feats = model.context(out.hidden_states)
        ids, labels, valid = block_inputs(seqs, anchors, b, model.mask_token_id)
        emb = target.get_input_embeddings()(ids)
    h = model(feats, emb, anchors)
    n, a = anchors.shape
    h = h.view(n, a, b, -1)[:, :, 1:]                                  # slot 0 is the known token
    logits = F.linear(h, target.get_output_embeddings().weight).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none").view_as(labels)
    w = weights * valid
    loss = (ce * w).sum() / w.sum()
    acc = ((logits.argmax(-1) == labels) & valid).float().sum() / valid.sum()
    return loss, acc


def train(size: DrafterSize, model: DraftModel, target, seqs: np.ndarray, starts: np.ndarray, device: str,
          seed: int, log_every: int = 100, max_minutes: float | None = None):
    """seqs (N, L) greedy sequences; starts (N,) where each one's continuation begins."""
    torch.manual_seed(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    target.eval().requires_grad_(False)
    model.to(device).train()
    data = torch.from_numpy(seqs.astype(np.int64)).to(device)
    begins = torch.from_numpy(starts.astype(np.int64)).to(device)
    bounds = int(starts.min()), int(starts.max())
    weights = torch.exp(-torch.arange(size.block_size - 1, device=device, dtype=torch.float32) / size.gamma)
    opt = torch.optim.AdamW(model.parameters(), lr=size.lr, betas=(0.9, 0.95), weight_decay=0.01,
                            fused=torch.device(device).type == "cuda")
    history, running, sched = [], [], Schedule(size.steps, max_minutes)
    step = 0
    while (p := sched.progress(step)) < 1:
        for g in opt.param_groups:
            g["lr"] = lr_at(p, size.lr, floor=0.0)
        rows = torch.randint(0, len(data), (size.batch,), generator=gen, device=device)
        batch = data[rows]
        anchors = pick_anchors(begins[rows], batch.shape[1], size.anchors, gen, bounds)
        with autocast(device):
            loss, acc = loss_fn(model, target, batch, anchors, weights)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        running.append(torch.stack([loss.detach(), acc.detach()]))
        step += 1
        if step % log_every == 0 or sched.progress(step) >= 1:
            m = torch.stack(running).mean(0).tolist()
            running = []
            row = {"step": step, "loss": round(m[0], 4), "slot_acc": round(m[1], 4), "seconds": sched.elapsed()}
            history.append(row)
            print(json.dumps(row), flush=True)
    return history


def save(model: DraftModel, out_dir: Path, dtype=torch.bfloat16) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(dtype).contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    cfg = dict(model.cfg, torch_dtype=str(dtype).removeprefix("torch."))
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def load(path: Path, device="cpu", dtype=torch.float32) -> DraftModel:
    from safetensors.torch import load_file
    cfg = json.loads((path / "config.json").read_text())
    model = DraftModel(cfg)
    state = load_file(str(path / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}/model.safetensors: missing {missing}, unexpected {unexpected}")
    return model.to(device, dtype).eval()


def param_count(model) -> int:
    return sum(p.numel() for p in model.parameters())

