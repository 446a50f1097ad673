"""The target's own greedy continuations: the drafter's training targets and tau's ground truth."""

from __future__ import annotations

import numpy as np
import torch

from refengine.train.target import autocast


@torch.no_grad()
def continue_greedy(model, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """prompts (N, P) of equal length -> (N, P + new_tokens). End-of-text does not stop it (ignore_eos)."""
    model.eval()
    dev = next(model.parameters()).device
    x = prompts.to(dev)
    with autocast(dev):
        out = model(x, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
        seq = [x, nxt[:, None]]
        for _ in range(new_tokens - 1):
            out = model(nxt[:, None], past_key_values=past, use_cache=True)
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


def generate(model, prompts: np.ndarray, new_tokens: int, batch: int) -> np.ndarray:
    rows = [continue_greedy(model, torch.from_numpy(prompts[i:i + batch].astype(np.int64)), new_tokens)
            for i in range(0, len(prompts), batch)]
    return torch.cat(rows).numpy().astype(np.uint16)
