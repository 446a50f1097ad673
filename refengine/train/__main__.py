"""python -m refengine.train <stage> [options]; `all` runs every stage in order.

    corpus     write the corpus manifest (files + sha256 + split) from this CPython's stdlib
    tokenizer  train the byte-level BPE on the training split
    tokens     encode both splits into uint16 token streams, and the training split's docstrings
               as chat-shaped requests (refengine/train/requests.py)
    target     train the Qwen3 target (a GPU for the h200 size)
    greedy     generate the target's greedy continuations for drafter training
    drafter    train the DFlash drafter against the frozen target
    tau        simulate linear / chain / tree decoding at T=0 and write the tau table
    card       write both model cards
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "refengine" / "train" / "corpus_manifest.json"
STAGES = ("corpus", "tokenizer", "tokens", "target", "greedy", "drafter", "tau", "card")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m refengine.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", choices=(*STAGES, "all"))
    p.add_argument("--size", choices=("h200", "tiny"), default="h200")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--work", type=Path, default=REPO / ".cache" / "train", help="intermediate outputs")
    p.add_argument("--models", type=Path, default=REPO / "models")
    p.add_argument("--target-name", default="qwen3-stdlib-13m")
    p.add_argument("--drafter-name", default="qwen3-stdlib-13m-dflash-b16")
    p.add_argument("--manifest", type=Path, default=MANIFEST)
    p.add_argument("--stdlib", type=Path, default=None, help="corpus root; default: this Python's stdlib")
    p.add_argument("--new-manifest", action="store_true", help="corpus: write a new manifest instead of checking")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="training: end the schedule at this wall time if the steps take longer")
    p.add_argument("--target-steps", type=int, default=None, help="override the size's target steps")
    p.add_argument("--drafter-steps", type=int, default=None, help="override the size's drafter steps")
    p.add_argument("--prompts", type=Path, default=REPO / "loadtests" / "prompts" / "chat.jsonl")
    p.add_argument("--eval-prompts", type=int, default=128, help="tau: prompts cut from held-out files")
    p.add_argument("--eval-new-tokens", type=int, default=128)
    return p.parse_args(argv)


def device_of(args) -> str:
    import torch
    return args.device or ("cuda" if torch.cuda.is_available() else "cpu")


def stage_corpus(args):
    from refengine.train import corpus
    root = args.stdlib or corpus.stdlib_root()
    built = corpus.build_manifest(root)
    if args.new_manifest or not args.manifest.exists():
        corpus.write_manifest(built, args.manifest)
        print(f"wrote {args.manifest}: {len(built['files'])} files, hash {built['hash']}")
        return
    pinned = corpus.load_manifest(args.manifest)
    if built["hash"] != pinned["hash"]:
        raise SystemExit(f"{root}: corpus hash {built['hash']} differs from {args.manifest} ({pinned['hash']}, "
                         f"Python {pinned['python']}); use that CPython, or --new-manifest to re-pin")
    print(f"corpus matches {args.manifest}: hash {pinned['hash']}")


def stage_tokenizer(args):
    from refengine.train import corpus, tokenizer
    m = corpus.load_manifest(args.manifest)
    texts = [t for _, t in corpus.read_texts(m, args.stdlib or Path(m["root"]), "train")]
    vocab = tokenizer.VOCAB_SIZE if args.size == "h200" else 1024
    tok = tokenizer.train(texts, vocab)
    tokenizer.save(tok, args.work / "tokenizer")
    print(f"tokenizer: {tok.get_vocab_size()} tokens -> {args.work / 'tokenizer'}")


def stage_tokens(args):
    from refengine.train import corpus, requests, tokenizer, tokens
    from refengine.train.configs import DRAFTERS
    m = corpus.load_manifest(args.manifest)
    tok = tokenizer.load(args.work / "tokenizer")
    root = args.stdlib or Path(m["root"])
    for split in ("train", "heldout"):
        texts = [t for _, t in corpus.read_texts(m, root, split)]
        if args.size == "tiny":
            texts = texts[: 40 if split == "train" else 8]  # minutes on a CPU, not hours
        stream, starts = tokens.encode_docs(tok, texts)
        tokens.save(args.work / "tokens", split, stream, starts)
        print(f"{split}: {len(texts)} files, {len(stream)} tokens")
        if split == "train":
            asks = requests.docstring_requests(texts)
            fit = DRAFTERS[args.size].prompt_len
            stream, starts = requests.encode(tok, asks, fit)
            tokens.save(args.work / "tokens", "requests", stream, starts)
            print(f"requests: {len(starts)} of {len(asks)} docstring requests fit {fit} tokens")


def stage_target(args):
    import torch

    from refengine.train import target, tokenizer, tokens
    from refengine.train.configs import TARGETS
    size = replace(TARGETS[args.size], steps=args.target_steps or TARGETS[args.size].steps)
    tok = tokenizer.load(args.work / "tokenizer")
    train_s, _ = tokens.load(args.work / "tokens", "train")
    val_s, _ = tokens.load(args.work / "tokens", "heldout")
    cfg = target.make_config(size, tok.get_vocab_size(), tokenizer.special_ids(tok))
    dev = device_of(args)
    t0 = time.time()
    model, hist = target.train(size, train_s, val_s, cfg, dev, args.seed, max_minutes=args.max_minutes,
                               log_every=10 if args.size == "tiny" else 100,
                               eval_every=50 if args.size == "tiny" else 1000)
    out = args.models / args.target_name
    target.save(model, out)
    copy_tokenizer(args, out)
    info = {"history": hist, "wall_seconds": round(time.time() - t0, 1), "device": device_name(dev),
            "params": sum(p.numel() for p in model.parameters()), "steps": hist[-1]["step"],
            "size": args.size, "config": asdict(size), "seed": args.seed, "torch": torch.__version__,
            "argv": sys.argv[1:]}
    write_json(args.work / "target_train.json", info)
    print(f"target: {info['params']} params, val loss {hist[-1]['val_loss']:.4f} -> {out}")


def stage_greedy(args):
    import numpy as np

    from refengine.train import greedy, tokens
    from refengine.train.configs import DRAFTERS
    size = DRAFTERS[args.size]
    dev = device_of(args)
    target = load_target(args, dev)
    stream, starts = tokens.load(args.work / "tokens", "train")
    cuts = greedy.cut_prompts(stream, starts, size.prompts, size.prompt_len, np.random.default_rng(args.seed))
    prompts = list(cuts)
    if size.request_repeat:
        prompts += tokens.unpack(*tokens.load(args.work / "tokens", "requests"))
    t0 = time.time()
    seqs = greedy.generate_to(target, prompts, size.prompt_len + size.gen_len, batch=4096 if dev == "cuda" else 64,
                              log=print)
    n_req = len(prompts) - len(cuts)  # requests are few and chat-shaped: seen request_repeat times as often
    rows = np.concatenate([np.arange(len(cuts)), np.tile(np.arange(len(cuts), len(prompts)), size.request_repeat)])
    np.save(args.work / "greedy.npy", seqs[rows])
    np.save(args.work / "greedy_starts.npy", np.asarray([len(prompts[i]) for i in rows], dtype=np.int64))
    print(f"greedy: {len(cuts)} file cuts + {n_req} requests x {size.request_repeat} -> {len(rows)} sequences "
          f"in {time.time() - t0:.1f}s -> {args.work / 'greedy.npy'}")


def stage_drafter(args):
    import numpy as np
    import torch

    from refengine.train import drafter, tokenizer
    from refengine.train.configs import DRAFTERS
    from refengine.train.draft_model import DraftModel, drafter_config
    size = replace(DRAFTERS[args.size], steps=args.drafter_steps or DRAFTERS[args.size].steps)
    dev = device_of(args)
    target = load_target(args, dev)
    tok = tokenizer.load(args.work / "tokenizer")
    cfg = drafter_config(target.config.to_dict(), size.layers, size.block_size, tokenizer.special_ids(tok)["mask"])
    seqs, begins = np.load(args.work / "greedy.npy"), np.load(args.work / "greedy_starts.npy")
    torch.manual_seed(args.seed)
    model = DraftModel(cfg)
    t0 = time.time()
    hist = drafter.train(size, model, target, seqs, begins, dev, args.seed, max_minutes=args.max_minutes,
                         log_every=10 if args.size == "tiny" else 100)
    out = args.models / args.drafter_name
    drafter.save(model, out)
    copy_tokenizer(args, out)
    info = {"history": hist, "wall_seconds": round(time.time() - t0, 1), "device": device_name(dev),
            "params": drafter.param_count(model), "steps": hist[-1]["step"], "sequences": int(len(seqs)),
            "sequence_len": int(seqs.shape[1]), "size": args.size, "config": asdict(size), "seed": args.seed,
            "torch": torch.__version__, "argv": sys.argv[1:]}
    write_json(args.work / "drafter_train.json", info)
    print(f"drafter: {info['params']} params, final loss {hist[-1]['loss']} -> {out}")


def stage_tau(args):
    from refengine.train import evaluate
    dev = device_of(args)
    result = evaluate.run(args.models / args.target_name, args.models / args.drafter_name,
                          args.work / "tokens", args.prompts, dev, args.seed,
                          args.eval_prompts, args.eval_new_tokens)
    write_json(args.work / "tau.json", result)
    print(json.dumps(result["table"], indent=1))


def stage_card(args):
    from refengine.train import card
    card.write_all(args)


def load_target(args, dev):
    from transformers import AutoModelForCausalLM
    path = args.models / args.target_name
    if not (path / "config.json").is_file():
        raise SystemExit(f"{path}: no target checkpoint; run the 'target' stage first")
    return AutoModelForCausalLM.from_pretrained(path, dtype="float32").to(dev).eval()


def copy_tokenizer(args, out: Path):
    for name in TOKENIZER_FILES:
        shutil.copy2(args.work / "tokenizer" / name, out / name)


def device_name(dev: str) -> str:
    import torch
    if dev.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(dev))
    return f"CPU ({platform.processor() or platform.machine()})"


def write_json(path: Path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def main(argv=None):
    args = parse(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    stages = STAGES if args.stage == "all" else (args.stage,)
    for s in stages:
        t0 = time.time()
        print(f"== {s}", flush=True)
        globals()[f"stage_{s}"](args)
        print(f"== {s} done in {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
