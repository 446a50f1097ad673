"""What to run: an arm of the reference engine, parsed from its short id.

    ar              no speculation
    linear-b16      DFlash, block 16: draft 15, verify 16
    chain-b15       DDTree with top-k 1 and budget 15, drafting a block of 16 (<= the drafter's block)
    tree-b15-k8     DDTree, budget 15 nodes (root excluded), top-k 8
    ...-d0.2        optional per-edge depth bonus (log-prob units), like SGLANG_DDTREE_DEPTH_BONUS
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ID = re.compile(r"^(ar|linear|chain|tree)(?:-b(\d+))?(?:-k(\d+))?(?:-d([0-9.]+))?$")


@dataclass(frozen=True)
class Plan:
    kind: str
    block_size: int | None = None  # drafter block; for chain/tree None = the drafter's own
    budget: int | None = None
    topk: int | None = None
    depth_bonus: float = 0.0

    def __post_init__(self):
        if self.kind not in ("ar", "linear", "chain", "tree"):
            raise ValueError(f"plan field 'kind' = {self.kind!r} must be ar, linear, chain or tree")
        if self.kind == "linear" and (self.block_size is None or self.block_size < 2):
            raise ValueError(f"plan field 'block_size' = {self.block_size} must be >= 2 for linear")
        if self.kind in ("chain", "tree") and (self.budget is None or self.budget < 1):
            raise ValueError(f"plan field 'budget' = {self.budget} must be >= 1 for {self.kind}")
        if self.kind == "chain" and self.topk not in (None, 1):
            raise ValueError(f"plan field 'topk' = {self.topk}: a chain has top-k 1")
        if self.kind == "tree" and (self.topk is None or self.topk < 1):
            raise ValueError(f"plan field 'topk' = {self.topk} must be >= 1 for a tree")

    @property
    def speculative(self) -> bool:
        return self.kind != "ar"

    @property
    def width(self) -> int:
        """Tree top-k (1 for a chain)."""
        return 1 if self.kind == "chain" else (self.topk or 1)

    @classmethod
    def parse(cls, arm_id: str) -> Plan:
        m = _ID.match(arm_id)
        if not m:
            raise ValueError(f"arm id {arm_id!r} is not one of ar, linear-b<N>, chain-b<N>, tree-b<N>-k<K>[-d<bonus>]")
        kind, b, k, d = m.groups()
        bonus = float(d) if d else 0.0
        if kind == "ar":
            if b or k or d:
                raise ValueError(f"arm id {arm_id!r}: 'ar' takes no parameters")
            return cls("ar")
        if b is None:
            raise ValueError(f"arm id {arm_id!r} needs -b<N>")
        if kind == "linear":
            if k or d:
                raise ValueError(f"arm id {arm_id!r}: 'linear' takes only -b<block>")
            return cls("linear", block_size=int(b))
        if kind == "chain":
            return cls("chain", block_size=int(b) + 1, budget=int(b), topk=1, depth_bonus=bonus)
        if k is None:
            raise ValueError(f"arm id {arm_id!r}: a tree needs -k<topk>")
        return cls("tree", budget=int(b), topk=int(k), depth_bonus=bonus)
