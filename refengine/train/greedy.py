"""The target's own greedy continuations: the drafter's training targets and tau's ground truth."""

from __future__ import annotations

import time

import numpy as np
import torch

from refengine.train.target import autocast


@torch.no_grad()
def continue_greedy(model, prompts: torch.Tensor, new_tokens: int, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """prompts (N, P) -> (N, P + new_tokens). End-of-text does not stop it (ignore_eos). With
    lengths, row i is left-padded and its prompt is its last lengths[i] tokens: the padding is
    masked out and positions count from the first real token, as if the prompt stood alone."""
    model.eval()
    dev = next(model.parameters()).device
    x = prompts.to(dev)
    kw = {}
    if lengths is not None:
        mask = (torch.arange(x.shape[1], device=dev) >= x.shape[1] - lengths.to(dev)[:, None]).long()
        kw = {"attention_mask": mask, "position_ids": (mask.cumsum(1) - 1).clamp(min=0)}
    with autocast(dev):
        out = model(x, use_cache=True, **kw)
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
        seq = [x, nxt[:, None]]
        for _ in range(new_tokens - 1):
            if kw:
                kw = {"attention_mask": torch.cat([kw["attention_mask"], torch.ones_like(nxt)[:, None]], 1),
                      "position_ids": kw["position_ids"][:, -1:] + 1}
            out = model(nxt[:, None], past_key_values=past, use_cache=True, **kw)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
            seq.append(nxt[:, None])
    return torch.cat(seq, 1).cpu()


def cut_prompts(stream: np.ndarray, starts: np.ndarray, count: int, length: int,
                gen: np.random.Generator, doc_start_frac: float = 0.25) -> np.ndarray:
    """Prompts of `length` tokens: some from a document's first token (as a chat request starts,
    with <|bos|> and a docstring), the rest from random places."""
    ends = np.append(starts[1:], len(stream))
    ok = np.flatnonzero(ends - starts > length)
    if len(ok) == 0:
        raise ValueError(f"no document longer than the prompt length {length}")
    out = np.empty((count, length), dtype=np.uint16)
    for i in range(count):
        d = ok[gen.integers(len(ok))]
        lo, hi = starts[d], ends[d] - length
        s = lo if gen.random() < doc_start_frac else gen.integers(lo, hi + 1)
        out[i] = stream[s:s + length]
    return out


def generate_to(model, prompts: list[np.ndarray], length: int, batch: int, log=None) -> np.ndarray:
    """Prompts of any length below `length`, each continued to `length` tokens. Batches hold
    prompts of near lengths (sorted), left-padded and masked; a batch of one length has no padding."""
    for i, p in enumerate(prompts):
        if not 0 < len(p) < length:
            raise ValueError(f"prompt {i} has {len(p)} tokens; continuing to {length} needs 1 .. {length - 1}")
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out = np.empty((len(prompts), length), dtype=np.uint16)
    t0 = time.time()
    for s in range(0, len(order), batch):
        idx = order[s:s + batch]
        lens = np.asarray([len(prompts[i]) for i in idx])
        width = int(lens.max())
        rows = np.zeros((len(idx), width), dtype=np.int64)
        for r, i in enumerate(idx):
            rows[r, width - lens[r]:] = prompts[i]
        ragged = torch.from_numpy(lens) if lens.min() < width else None
        seq = continue_greedy(model, torch.from_numpy(rows), length - int(lens.min()), ragged).numpy()
        for r, i in enumerate(idx):
            out[i] = seq[r, width - lens[r]:width - lens[r] + length]
        if log:
            log(f"greedy: {s + len(idx)} of {len(order)} prompts ({lens.min()}-{width} tokens) "
                f"continued to {length} ({time.time() - t0:.1f}s)", flush=True)
    return out
