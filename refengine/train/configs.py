"""Named sizes for the pair. `h200` is what ships; `tiny` trains on a CPU in minutes, for tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TargetSize:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    seq_len: int
    batch: int
    steps: int
    lr: float


@dataclass(frozen=True)
class DrafterSize:
    layers: int
    block_size: int
    anchors: int       # blocks per training sequence
    gamma: float       # position-weight decay: exp(-(k-1)/gamma)
    batch: int
    steps: int
    lr: float
    prompts: int       # greedy sequences generated for training from cuts of files
    prompt_len: int
    gen_len: int
    request_repeat: int  # times each chat-shaped request's sequence appears in the training set (0: none)


TARGETS = {
    "h200": TargetSize(hidden=384, layers=6, heads=6, kv_heads=2, intermediate=1024,
                       seq_len=512, batch=48, steps=3000, lr=2e-3),
    "tiny": TargetSize(hidden=64, layers=4, heads=2, kv_heads=1, intermediate=128,
                       seq_len=128, batch=8, steps=150, lr=3e-3),
}
DRAFTERS = {
    "h200": DrafterSize(layers=3, block_size=16, anchors=32, gamma=7.0, batch=128, steps=10000,
                        lr=6e-4, prompts=393216, prompt_len=64, gen_len=128, request_repeat=3),
    "tiny": DrafterSize(layers=1, block_size=8, anchors=8, gamma=4.0, batch=8, steps=100,
                        lr=1e-3, prompts=64, prompt_len=16, gen_len=32, request_repeat=1),
}
