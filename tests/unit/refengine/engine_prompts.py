"""Random prompts for the engine tests (a module, not a fixture, so tests can vary n and seed)."""

from __future__ import annotations

import torch


def prompts(n: int, vocab: int = 255, seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 24, (n,), generator=gen).tolist()
    return [torch.randint(0, vocab, (k,), generator=gen).tolist() for k in lengths]
