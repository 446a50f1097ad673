"""The engine: a target (and optionally a drafter), their batched KV caches, and the fixed-shape forwards.

    engine = Engine(target, drafter, capacity=4096, batch=8, graphs=False)
    out = engine.generate(prompt_ids, Plan.parse("tree-b15-k8"), Sampling(), max_tokens=128, stop_ids={eos})

Row r of both caches belongs to the r-th running request (refengine.batch keeps the running
requests in rows 0..n-1). The arms (ar.py, linear.py, ddtree.py) step all n requests at once
through the three forwards below: `decode` (AR, 1 token per row), `verify` (T tokens per row,
explicit positions and visibility) and `draft` (one drafter block per row). With graphs=True
each is captured as a CUDA graph per (shape, batch bucket) and replayed; a batch of n rows
runs in the smallest captured bucket >= n, padded with idle rows (SGLang pads its decode
batches to its captured sizes the same way). graphs=False is SGLang's --disable-cuda-graph.
Prefill is always eager, one request at a time.
"""

from __future__ import annotations

import time

import torch

from refengine import ar, ddtree, linear
from refengine.drafter import Drafter
from refengine.graphs import Graphed
from refengine.kvcache import KVCache
from refengine.model import Target
from refengine.output import Output
from refengine.plan import Plan
from refengine.request import Request
from refengine.sampling import Sampling, pick

STEPS = {"ar": ar.step, "linear": linear.step, "chain": ddtree.step, "tree": ddtree.step}


def buckets(batch: int) -> list[int]:
    """Captured batch sizes: 1, 2, 4, 8, then every 8, and `batch` itself."""
    sizes = [b for b in (1, 2, 4) if b < batch] + list(range(8, batch, 8))
    return sizes + [batch]


class Engine:
    def __init__(self, target: Target, drafter: Drafter | None = None, capacity: int = 4096,
                 graphs: bool = False, batch: int = 1):
        self.target, self.drafter = target.eval(), drafter.eval() if drafter is not None else None
        self.device = target.device
        if graphs and self.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device; the target is on {self.device}")
        self.graphs, self.batch, self.capacity = graphs, batch, capacity
        if drafter is not None:
            _check_pair(target, drafter)
        # a drafter row also takes a padded context append of up to one block past its length
        slack = drafter.block_size if drafter is not None else 0
        self._tcache = target.new_cache(batch, capacity)
        self._dcache = drafter.new_cache(batch, capacity + slack) if drafter is not None else None
        self._buckets = buckets(batch)
        self._captured: dict[tuple, Graphed] = {}
        self._views: dict[int, tuple[KVCache, KVCache | None]] = {}
        self.use_rows(1)

    def use_rows(self, n: int) -> None:
        """The next steps run rows 0..n-1: `tcache`/`dcache` are views of those rows."""
        if not 1 <= n <= self.batch:
            raise ValueError(f"{n} running requests; this engine has {self.batch} cache rows")
        if n not in self._views:  # made once per batch size: use_rows runs every step
            self._views[n] = (self._tcache.rows(0, n), self._dcache.rows(0, n) if self._dcache is not None else None)
        self.n = n
        self.tcache, self.dcache = self._views[n]

    def move_row(self, src: int, dst: int) -> None:
        self._tcache.move_row(src, dst)
        if self._dcache is not None:
            self._dcache.move_row(src, dst)

    def free_row(self, row: int) -> None:
        """An idle row holds nothing: graph replays pad batches with idle rows, and write into them."""
        self._tcache.rows(row, row + 1).set_lengths([0])
        if self._dcache is not None:
            self._dcache.rows(row, row + 1).set_lengths([0])

    def clock(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    @torch.inference_mode()
    def generate(self, prompt: list[int], plan: Plan, sampling: Sampling | None = None,
                 max_tokens: int = 128, stop_ids=()) -> Output:
        """One request alone, in row 0."""
        sampling = sampling or Sampling()
        req = Request(list(prompt), sampling, max_tokens, frozenset(stop_ids), sampling.generator(self.device))
        self.check(req, plan)
        t0 = self.clock()
        self.prefill(req, plan.speculative, row=0)
        t1 = self.clock()
        self.use_rows(1)
        while not req.done:
            STEPS[plan.kind](self, [req], plan)
        t2 = self.clock()
        return Output(req.tokens, req.finish_reason, len(prompt), t1 - t0, t2 - t1, req.steps)

    def prefill(self, req: Request, features: bool, row: int) -> None:
        """Fill cache row `row` with the prompt (and the drafter's context), and commit the first token."""
        tcache = self._tcache.rows(row, row + 1)
        tcache.set_lengths([0])
        ids = torch.tensor([req.prompt], device=self.device)
        positions = torch.arange(len(req.prompt), device=self.device)[None]
        layers = self.drafter.target_layer_ids if features else ()
        logits, feats = self.target(ids, positions, cache=tcache, layers=layers, last_only=True)
        tcache.advance([len(req.prompt)])
        if features:
            dcache = self._dcache.rows(row, row + 1)
            dcache.set_lengths([0])
            self.drafter.append_context(feats, positions, dcache)
        req.commit([pick(logits[0, -1], req.sampling, req.generator).item()])

    # -- the fixed-shape forwards, over rows 0..n-1 -------------------------------------------

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [n, V] for one token per row; its KV entry is tentative until tcache.advance."""
        ids, pos = tokens[:, None].to(self.device), positions[:, None].to(self.device)
        if not self.graphs:
            return self.target(ids, pos, cache=self.tcache)[0][:, 0]
        return self._replay("decode", lambda c, i, p: self.target(i, p, cache=c, static=True)[0][:, 0],
                            self._tcache, ids, pos)

    def verify(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor | None):
        """Logits [n, T, V] and features [n, T, K*D]; visible [n, T, T] (None = causal)."""
        layers = self.drafter.target_layer_ids
        ids, positions = ids.to(self.device), positions.to(self.device)
        if not self.graphs:
            visible = None if visible is None else visible.to(self.device)
            return self.target(ids, positions, cache=self.tcache, visible=visible, layers=layers)
        if visible is None:
            t = ids.shape[1]
            visible = torch.ones(t, t, dtype=torch.bool, device=self.device).tril().expand(ids.shape[0], t, t)
        return self._replay(("verify", ids.shape[1]), lambda c, i, p, v: self.target(
            i, p, cache=c, visible=v, layers=layers, static=True), self._tcache, ids, positions,
            visible.to(self.device))

    def draft(self, reqs: list[Request], depth: int, block: int | None = None) -> torch.Tensor:
        """Drafter logits [n, depth, V] for positions start+1 .. start+depth of each row.

        First caches each row's new context (the features of the tokens its last step committed).
        """
        d, block = self.drafter, block or self.drafter.block_size
        dev = self.device
        starts = torch.tensor([r.start for r in reqs], device=dev)
        counts = [0 if r.features is None else r.features.shape[1] for r in reqs]
        # eager: the widest new context; graphed: always a whole block (a step commits <= block
        # tokens), so that the context append is part of the captured forward
        width = d.block_size if self.graphs else max(counts)
        if width:  # eager, right after prefill no row has new context: prefill cached the prompt's
            dim = self.target.config.hidden_size * len(d.target_layer_ids)
            feats = torch.zeros(len(reqs), width, dim, dtype=d.dtype, device=dev)
            for i, r in enumerate(reqs):
                if counts[i]:
                    feats[i, :counts[i]] = r.features[0]
                r.features = None
            # row i's new context sits just before its root: positions start - count .. start - 1
            ctx_pos = starts[:, None] - torch.tensor(counts, device=dev)[:, None] + torch.arange(width, device=dev)
        ids = torch.full((len(reqs), block), d.mask_token_id, device=dev)
        ids[:, 0] = torch.tensor([r.root for r in reqs], device=dev)
        block_pos = starts[:, None] + torch.arange(block, device=dev)
        if not self.graphs:
            if width:
                d.append_context(feats, ctx_pos, self.dcache, counts)
            hidden = d(d.embed(self.target, ids), block_pos, cache=self.dcache)
            return d.logits(self.target, hidden[:, 1:1 + depth])
        out = self._replay(("draft", block), lambda c, f, cp, n, i, p: d.logits(self.target, d(
            d.embed(self.target, i), torch.cat([cp, p], 1), f, cache=c, static=True, counts=n)[:, 1:]),
            self._dcache, feats, ctx_pos, torch.tensor(counts, device=dev), ids, block_pos)
        self.dcache.advance(counts)
        return out[:, :depth]

    def _replay(self, key, fn, cache: KVCache, *inputs: torch.Tensor):
        """Run fn(cache rows, *inputs) as the CUDA graph of the smallest bucket >= n, padding idle rows."""
        n = inputs[0].shape[0]
        size = next(b for b in self._buckets if b >= n)
        if size > n:  # idle rows: token 0 at position 0, seeing itself only; their outputs are dropped
            inputs = [torch.cat([x, _idle(x, size - n)]) for x in inputs]
        graph = self._captured.get((key, size))
        if graph is None:
            rows = cache.rows(0, size)
            graph = self._captured[(key, size)] = Graphed(lambda *xs: fn(rows, *xs), *inputs)
        out = graph(*inputs)
        return tuple(o[:n] for o in out) if isinstance(out, tuple) else out[:n]

    def check(self, req: Request, plan: Plan) -> None:
        vocab = self.target.config.vocab_size
        bad = [t for t in req.prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"request field 'prompt': token ids {bad[:5]} are outside the vocabulary [0, {vocab})")
        if plan.speculative and self.drafter is None:
            raise ValueError(f"arm {plan.kind!r} needs a drafter; this engine has none")
        if plan.speculative and (plan.block_size or 0) > self.drafter.block_size:
            raise ValueError(f"plan field 'block_size' = {plan.block_size} exceeds the drafter's "
                             f"block_size {self.drafter.block_size}")
        need = len(req.prompt) + req.max_tokens + verify_width(plan)
        if need > self.capacity:
            raise ValueError(f"prompt ({len(req.prompt)}) + max_tokens ({req.max_tokens}) + verify width "
                             f"({verify_width(plan)}) = {need} exceeds the engine's KV capacity {self.capacity}")


def verify_width(plan: Plan) -> int:
    """Tentative KV entries of one step beyond the committed ones: the widest forward of the arm."""
    return {"ar": 1, "linear": plan.block_size or 0}.get(plan.kind, (plan.budget or 0) + 1)


def _idle(x: torch.Tensor, rows: int) -> torch.Tensor:
    if x.dtype == torch.bool:  # a visibility mask: each idle token sees itself
        return torch.eye(x.shape[1], dtype=torch.bool, device=x.device).expand(rows, -1, -1)
    return torch.zeros((rows, *x.shape[1:]), dtype=x.dtype, device=x.device)


def _check_pair(target: Target, drafter: Drafter) -> None:
    t, d = target.config, drafter.config
    for name in ("hidden_size", "vocab_size"):
        if getattr(t, name) != getattr(d, name):
            raise ValueError(f"drafter config field '{name}' = {getattr(d, name)} differs from the "
                             f"target's {getattr(t, name)}")
    if d.num_target_layers != t.num_hidden_layers:
        raise ValueError(f"drafter config field 'num_target_layers' = {d.num_target_layers} differs from "
                         f"the target's num_hidden_layers {t.num_hidden_layers}")
