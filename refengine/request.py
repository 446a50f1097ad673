"""One request's decoding state, and the one rule for committing tokens (stop token, max_tokens)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from refengine.output import Step
from refengine.sampling import Sampling


@dataclass(eq=False)  # a request is itself: batches find it by identity
class Request:
    prompt: list[int]
    sampling: Sampling
    max_tokens: int
    stop_ids: frozenset[int]
    generator: torch.Generator | None = None
    tokens: list[int] = field(default_factory=list)
    # Target features of committed tokens whose drafter context entries are not yet cached.
    features: torch.Tensor | None = None
    finish_reason: str | None = None
    steps: list[Step] = field(default_factory=list)

    def __post_init__(self):
        if not self.prompt:
            raise ValueError("request field 'prompt' is empty: at least one token is needed")
        if self.max_tokens < 1:
            raise ValueError(f"request field 'max_tokens' = {self.max_tokens} must be >= 1")

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def root(self) -> int:
        """The last committed token: its KV entry is written by the next verify/decode forward."""
        return self.tokens[-1]

    @property
    def start(self) -> int:
        """Position of the root = tokens in the target cache."""
        return len(self.prompt) + len(self.tokens) - 1

    def commit(self, new: list[int]) -> int:
        """Append tokens up to a stop token or max_tokens; return how many were kept."""
        kept = 0
        for tok in new:
            self.tokens.append(tok)
            kept += 1
            if tok in self.stop_ids:
                self.finish_reason = "stop"
                break
            if len(self.tokens) >= self.max_tokens:
                self.finish_reason = "length"
                break
        return kept
