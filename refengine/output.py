"""What a generation returns: the tokens, why it stopped, and one record per verify step."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Step:
    committed: int  # tokens this step added to the output (after any EOS / max_tokens cut)
    accepted: int  # draft tokens the target accepted (before any cut)
    depth: int  # depth of the deepest accepted tree node; commit length = depth + 1
    nodes: int  # draft tokens verified (tree nodes, root excluded)
    draft_s: float = 0.0
    verify_s: float = 0.0
    bookkeeping_s: float = 0.0  # tree build + walk + KV compaction


@dataclass
class Output:
    tokens: list[int]
    finish_reason: str  # "stop" (a stop token) or "length" (max_tokens)
    prompt_tokens: int
    prefill_s: float
    decode_s: float
    steps: list[Step] = field(default_factory=list)

    @property
    def tau(self) -> float:
        """Committed tokens per verify step (the first token comes from prefill, not a step)."""
        return sum(s.committed for s in self.steps) / len(self.steps) if self.steps else 0.0
