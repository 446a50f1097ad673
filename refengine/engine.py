"""The engine: a target (and optionally a drafter), their KV caches, and the fixed-shape forwards.

    engine = Engine(target, drafter, capacity=4096, graphs=False)
    out = engine.generate(prompt_ids, Plan.parse("tree-b15-k8"), Sampling(), max_tokens=128, stop_ids={eos})

The arms (ar.py, linear.py, ddtree.py) hold the decoding logic and call the three forwards
below: `decode` (AR, 1 token), `verify` (T tokens, explicit positions and visibility) and
`draft` (one drafter block). With graphs=True each is captured once per shape as a CUDA graph
and replayed (SGLang's --disable-cuda-graph is graphs=False). Prefill is always eager.
"""

from __future__ import annotations

import time

import torch

from refengine import ar, ddtree, linear
from refengine.drafter import Drafter
from refengine.graphs import Graphed
from refengine.model import Target
from refengine.output import Output
from refengine.plan import Plan
from refengine.request import Request
from refengine.sampling import Sampling, pick

_STEPS = {"ar": ar.step, "linear": linear.step, "chain": ddtree.step, "tree": ddtree.step}


class Engine:
    def __init__(self, target: Target, drafter: Drafter | None = None, capacity: int = 4096,
                 graphs: bool = False):
        self.target, self.drafter = target.eval(), drafter.eval() if drafter is not None else None
        self.device = target.device
        if graphs and self.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device; the target is on {self.device}")
        self.graphs = graphs
        if drafter is not None:
            _check_pair(target, drafter)
        self.tcache = target.new_cache(1, capacity)
        self.dcache = drafter.new_cache(1, capacity) if drafter is not None else None
        self._captured: dict[tuple, Graphed] = {}

    def clock(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    @torch.inference_mode()
    def generate(self, prompt: list[int], plan: Plan, sampling: Sampling | None = None,
                 max_tokens: int = 128, stop_ids=()) -> Output:
        sampling = sampling or Sampling()
        self._check(prompt, plan, max_tokens)
        req = Request(list(prompt), sampling, max_tokens, frozenset(stop_ids), sampling.generator(self.device))
        t0 = self.clock()
        self.prefill(req, plan.speculative)
        t1 = self.clock()
        step = _STEPS[plan.kind]
        while not req.done:
            step(self, req, plan)
        t2 = self.clock()
        return Output(req.tokens, req.finish_reason, len(prompt), t1 - t0, t2 - t1, req.steps)

    def prefill(self, req: Request, features: bool) -> None:
        self.tcache.set_length(0, 0)
        if self.dcache is not None:
            self.dcache.set_length(0, 0)
        ids = torch.tensor([req.prompt], device=self.device)
        positions = torch.arange(len(req.prompt), device=self.device)[None]
        layers = self.drafter.target_layer_ids if features else ()
        logits, feats = self.target(ids, positions, cache=self.tcache, layers=layers, last_only=True)
        self.tcache.commit(0, len(req.prompt))
        req.features = feats
        req.commit([pick(logits[0, -1], req.sampling, req.generator).item()])

    # -- the fixed-shape forwards ------------------------------------------------------------

    def decode(self, token: int, position: int) -> torch.Tensor:
        """Logits [V] for one token; its KV entry is tentative until tcache.commit."""
        ids = torch.tensor([[token]], device=self.device)
        pos = torch.tensor([[position]], device=self.device)
        if not self.graphs:
            return self.target(ids, pos, cache=self.tcache)[0][0, 0]
        run = self._graph(("decode",), lambda i, p: self.target(i, p, cache=self.tcache, static=True)[0],
                          ids, pos)
        return run(ids, pos)[0, 0]

    def verify(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor | None):
        """Logits [T, V] and features [T, K*D] of T tokens; visible [T, T] (None = causal)."""
        t = ids.shape[0]
        layers = self.drafter.target_layer_ids
        ids, positions = ids[None].to(self.device), positions[None].to(self.device)
        if visible is not None:
            visible = visible[None].to(self.device)
        if not self.graphs:
            logits, feats = self.target(ids, positions, cache=self.tcache, visible=visible, layers=layers)
            return logits[0], feats[0]
        if visible is None:
            visible = torch.ones(1, t, t, dtype=torch.bool, device=self.device).tril()
        run = self._graph(("verify", t), lambda i, p, v: self.target(
            i, p, cache=self.tcache, visible=v, layers=layers, static=True), ids, positions, visible)
        logits, feats = run(ids, positions, visible)
        return logits[0], feats[0]

    def draft(self, req: Request, depth: int, block: int | None = None) -> torch.Tensor:
        """Drafter logits [depth, V] for positions start+1 .. start+depth; caches the new context first."""
        d, block = self.drafter, block or self.drafter.block_size
        start = req.start
        ids = torch.tensor([[req.root] + [d.mask_token_id] * (block - 1)], device=self.device)
        block_pos = torch.arange(start, start + block, device=self.device)[None]
        c = req.features.shape[1]
        ctx_pos = torch.arange(start - c, start, device=self.device)[None]
        if not self.graphs:
            hidden = d(d.embed(self.target, ids), torch.cat([ctx_pos, block_pos], 1), req.features, self.dcache)
            req.features = None
            return d.logits(self.target, hidden[0, 1:1 + depth])
        d.append_context(req.features, ctx_pos, self.dcache)
        req.features = None
        run = self._graph(("draft", block), lambda i, p: d.logits(
            self.target, d(d.embed(self.target, i), p, cache=self.dcache, static=True)[:, 1:]), ids, block_pos)
        return run(ids, block_pos)[0, :depth]

    def _graph(self, key: tuple, fn, *inputs) -> Graphed:
        if key not in self._captured:
            self._captured[key] = Graphed(fn, *inputs)
        return self._captured[key]

    def _check(self, prompt: list[int], plan: Plan, max_tokens: int) -> None:
        vocab = self.target.config.vocab_size
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"request field 'prompt': token ids {bad[:5]} are outside the vocabulary [0, {vocab})")
        if plan.speculative and self.drafter is None:
            raise ValueError(f"arm {plan.kind!r} needs a drafter; this engine has none")
        width = 1
        if plan.speculative and (plan.block_size or 0) > self.drafter.block_size:
            raise ValueError(f"plan field 'block_size' = {plan.block_size} exceeds the drafter's "
                             f"block_size {self.drafter.block_size}")
        if plan.kind == "linear":
            width = plan.block_size
        elif plan.speculative:
            width = plan.budget + 1
        need = len(prompt) + max_tokens + width
        if need > self.tcache.capacity:
            raise ValueError(f"prompt ({len(prompt)}) + max_tokens ({max_tokens}) + verify width ({width}) "
                             f"= {need} exceeds the engine's KV capacity {self.tcache.capacity}")


def _check_pair(target: Target, drafter: Drafter) -> None:
    t, d = target.config, drafter.config
    for name in ("hidden_size", "vocab_size"):
        if getattr(t, name) != getattr(d, name):
            raise ValueError(f"drafter config field '{name}' = {getattr(d, name)} differs from the "
                             f"target's {getattr(t, name)}")
    if d.num_target_layers != t.num_hidden_layers:
        raise ValueError(f"drafter config field 'num_target_layers' = {d.num_target_layers} differs from "
                         f"the target's num_hidden_layers {t.num_hidden_layers}")
