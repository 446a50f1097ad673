"""CUDA graphs for the fixed-shape forwards (AR decode, verify of T tokens, draft).

A captured forward reads its inputs from static buffers and writes static outputs: a replay
copies the new inputs in, replays, and returns the same output tensors, which the caller must
consume (or copy) before the next replay. The KV caches are captured by address, so an
engine keeps one set of caches for its lifetime.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class Graphed:
    def __init__(self, fn: Callable, *inputs: torch.Tensor, warmup: int = 2):
        self.inputs = [x.clone() for x in inputs]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up kernels (cuBLAS handles, autotuning) off the capture
            for _ in range(warmup):
                fn(*self.inputs)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = fn(*self.inputs)

    def __call__(self, *inputs: torch.Tensor):
        for dst, src in zip(self.inputs, inputs, strict=True):
            dst.copy_(src)
        self.graph.replay()
        return self.outputs
