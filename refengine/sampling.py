"""Sampling parameters and the one function that turns target logits into tokens.

Temperature 0 is greedy. Otherwise: temperature, then top-k, then top-p (nucleus), then a
draw from the request's own torch.Generator, so a fixed seed repeats a run exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"sampling field 'temperature' = {self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"sampling field 'top_p' = {self.top_p} must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError(f"sampling field 'top_k' = {self.top_k} must be >= 0 (0 = off)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def generator(self, device: torch.device | str) -> torch.Generator | None:
        if self.greedy:
            return None
        gen = torch.Generator(device=device)
        if self.seed is None:
            gen.seed()
        else:
            gen.manual_seed(self.seed)
        return gen


def probs(logits: torch.Tensor, s: Sampling) -> torch.Tensor:
    """Sampling distribution [..., V] after temperature, top-k and top-p."""
    scores = logits.float() / s.temperature
    if 0 < s.top_k < scores.shape[-1]:
        kth = scores.topk(s.top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    p = scores.softmax(-1)
    if s.top_p < 1:
        sorted_p, order = p.sort(-1, descending=True)
        # keep a token while the mass before it is below top_p: the top token always stays
        drop = (sorted_p.cumsum(-1) - sorted_p) >= s.top_p
        p = p.masked_fill(drop.scatter(-1, order, drop), 0.0)
        p = p / p.sum(-1, keepdim=True)
    return p


def pick(logits: torch.Tensor, s: Sampling, gen: torch.Generator | None) -> torch.Tensor:
    """One token per row of logits [..., V]: argmax, or an independent draw per row."""
    if s.greedy:
        return logits.argmax(-1)
    p = probs(logits, s)
    flat = p.reshape(-1, p.shape[-1])
    return torch.multinomial(flat, 1, generator=gen).reshape(p.shape[:-1])


def pick_rows(logits: torch.Tensor, reqs, lengths: list[int] | None = None) -> torch.Tensor:
    """pick() for each running request: logits [n, ..., V] -> tokens [n, ...].

    Row i draws only over its first lengths[i] positions (a padded tree), with its own sampling
    and generator, so a request draws exactly what it would draw running alone.
    """
    if all(r.sampling.greedy for r in reqs):
        return logits.argmax(-1)
    out = torch.zeros(logits.shape[:-1], dtype=torch.long, device=logits.device)
    for i, r in enumerate(reqs):
        if lengths is None:
            out[i] = pick(logits[i], r.sampling, r.generator)
        else:
            out[i, :lengths[i]] = pick(logits[i, :lengths[i]], r.sampling, r.generator)
    return out
