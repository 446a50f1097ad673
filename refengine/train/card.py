"""Model cards for the pair, written from the training and evaluation records in the work dir."""

from __future__ import annotations

import json
from pathlib import Path

from refengine.train import tau as tau_mod
from refengine.train.corpus import load_manifest

REBUILD = "just train-models   # = python -m refengine.train all --size h200 --seed {seed}"


def load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def loss_table(history: list[dict], cols: list[str], rows: int = 12) -> str:
    picks = {round(i * (len(history) - 1) / (rows - 1)) for i in range(rows)}
    keep = [r for i, r in enumerate(history) if i in picks or "val_loss" in r]  # every validation row
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |\n" for r in keep)


def _fmt(v) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def prompt_mix(size: dict) -> str:
    """The drafter's training prompts, in words, from its size settings as run."""
    cuts = f"{size.get('prompts', '?')} cuts of {size.get('prompt_len', '?')} tokens from the training split's files"
    repeat = size.get("request_repeat", 0)
    if not repeat:
        return cuts
    return (f"{cuts}, plus every chat-shaped request of `refengine/train/requests.py` (a training-split "
            f"docstring through the chat template) {repeat} times over")


def tau_section(result: dict | None, block_size: int) -> str:
    if not result:
        return "No tau measured yet (run `python -m refengine.train tau`).\n"
    t = result["table"]
    groups = [g for g in ("file", "chat") if g in t[f"linear-b{block_size}"]]
    cats = sorted(k for k in t[f"linear-b{block_size}"] if k.startswith("chat:"))
    src = f"{result['file_prompts']} prompts of {result['file_prompt_len']} tokens cut from held-out files"
    if result.get("chat_prompts"):
        name = Path(result["chat_source"]).name
        src += f", and {result['chat_prompts']} chat prompts from `{name}` through the chat template"
        if result.get("chat_sha256"):
            src += f" (sha256 `{result['chat_sha256'][:16]}...`)"
    else:
        src += "; the load-test chat prompt set was not available, so no chat figures"
    out = [f"T=0, {result['new_tokens']} new tokens per prompt, {src}. Device {result['device']} ({result['dtype']}). "
           "tau = committed tokens / verify steps, token-weighted, simulated exactly over the target's greedy "
           "continuation (`refengine/train/tau.py`). Top-k 1 is a chain; its depth is capped at block size - 1 = "
           f"{block_size - 1}, so chain budgets above that equal chain-b{block_size - 1}.\n"]
    for g in groups:
        out.append(f"\n**{g} prompts**, linear-b{block_size} tau = {t[f'linear-b{block_size}'][g]:.3f}\n\n")
        ks = tau_mod.TOPKS
        out.append("| budget \\ top-k | " + " | ".join(map(str, ks)) + " |\n|---|" + "---|" * len(ks) + "\n")
        for b in tau_mod.BUDGETS:
            cells = [t[f"chain-b{b}" if k == 1 else f"tree-b{b}-k{k}"][g] for k in tau_mod.TOPKS]
            out.append(f"| {b} | " + " | ".join(f"{c:.3f}" for c in cells) + " |\n")
    if cats:
        arms = [f"linear-b{block_size}", "tree-b15-k8", "tree-b63-k8"]
        out.append("\n**Per chat category**\n\n| category | " + " | ".join(arms) + " |\n")
        out.append("|---|" + "---|" * len(arms) + "\n")
        for c in cats:
            out.append(f"| {c.split(':', 1)[1]} | " + " | ".join(f"{t[a][c]:.3f}" for a in arms) + " |\n")
    return "".join(out)


def write_all(args) -> None:
    work, models = args.work, args.models
    manifest = load_manifest(args.manifest)
    tgt, drf, tau = load(work / "target_train.json"), load(work / "drafter_train.json"), load(work / "tau.json")
    if not tgt or not drf:
        raise SystemExit(f"{work}: target_train.json and drafter_train.json are needed; run the training stages")
    tcfg = json.loads((models / args.target_name / "config.json").read_text())
    dcfg = json.loads((models / args.drafter_name / "config.json").read_text())
    corpus = (f"CPython {manifest['python']} standard library, {len(manifest['files'])} `.py` files; "
              f"manifest `refengine/train/corpus_manifest.json`, hash `{manifest['hash']}`; split by path hash, "
              f"{sum(f['split'] == 'heldout' for f in manifest['files'])} files held out and never trained on.")
    val = tgt["history"][-1]["val_loss"]
    common = {"seed": tgt["seed"], "corpus": corpus, "rebuild": REBUILD.format(seed=tgt["seed"])}
    tau_md = tau_section(tau, dcfg["block_size"])
    notes = work / "notes.md"  # findings of this particular run, written by whoever ran it
    if notes.is_file():
        tau_md += "\n## Notes on this run\n\n" + notes.read_text()
    (models / args.target_name / "README.md").write_text(TARGET_CARD.format(
        name=args.target_name, params=tgt["params"], cfg=tcfg, val=val, ppl=2.718281828 ** val,
        steps=tgt["steps"], wall=tgt["wall_seconds"], device=tgt["device"], torch=tgt["torch"],
        hyper=", ".join(f"{k} {v}" for k, v in tgt.get("config", {}).items()),
        argv=" ".join(tgt["argv"]), loss=loss_table(tgt["history"], ["step", "train_loss", "val_loss", "seconds"]),
        drafter=args.drafter_name, tau=tau_md, **common))
    (models / args.drafter_name / "README.md").write_text(DRAFTER_CARD.format(
        name=args.drafter_name, target=args.target_name, params=drf["params"], cfg=dcfg,
        layer_ids=dcfg["dflash_config"]["target_layer_ids"], mask=dcfg["dflash_config"]["mask_token_id"],
        steps=drf["steps"], wall=drf["wall_seconds"], device=drf["device"], torch=drf["torch"],
        seqs=drf["sequences"], seqlen=drf["sequence_len"], argv=" ".join(drf["argv"]),
        prompts=prompt_mix(drf.get("config", {})),
        hyper=", ".join(f"{k} {v}" for k, v in drf.get("config", {}).items()),
        loss=loss_table(drf["history"], ["step", "loss", "slot_acc", "seconds"]), tau=tau_md, **common))
    print(f"cards written in {models / args.target_name} and {models / args.drafter_name}")


TARGET_CARD = """# {name}

A small Qwen3 causal LM trained from scratch on Python standard-library source, so that ddbench
has a real target model that runs offline on a CPU. Its DFlash drafter is `models/{drafter}`.

- Architecture: `Qwen3ForCausalLM`, {params:,} parameters: hidden {cfg[hidden_size]},
  {cfg[num_hidden_layers]} layers, {cfg[num_attention_heads]} query / {cfg[num_key_value_heads]} KV heads of
  {cfg[head_dim]}, MLP {cfg[intermediate_size]}, vocabulary {cfg[vocab_size]}, tied embeddings,
  weights in {cfg[torch_dtype]}.
- Corpus: {corpus}
- Tokenizer: byte-level BPE (HF `tokenizers`), special tokens `<|endoftext|>` (eos, pad), `<|bos|>`,
  `<|im_start|>`, `<|im_end|>`, `<|mask|>` (the drafter's mask). Documents are `<|bos|> file text <|endoftext|>`.
- Chat template: a user or system turn becomes a module docstring (`\"\"\"request\\n\"\"\"\\n\\n`), which
  is how most standard-library files open; the model then writes code. Assistant turns are appended as code.
- Training: seed {seed}, {steps} steps, wall time {wall} s on {device} (torch {torch}), bf16 autocast,
  AdamW, cosine schedule. Command: `python -m refengine.train {argv}`
  (with `--max-minutes`, progress is max(step / steps, elapsed / limit); this run ended on steps).
- Size settings as run: {hyper}.
- Held-out validation loss **{val:.4f}** nats/token, perplexity **{ppl:.2f}**.
- Rebuild: `{rebuild}`.

## Loss curve

{loss}
## tau with the drafter

{tau}"""

DRAFTER_CARD = """# {name}

A DFlash block drafter (z-lab layout) for `models/{target}`.

- Architecture `DFlashDraftModel`: {cfg[num_hidden_layers]} Qwen3-style layers over the target's hidden states,
  {params:,} parameters of its own; it reuses the target's embedding and LM head. block_size {cfg[block_size]},
  `target_layer_ids` {layer_ids} (the DFlash rule for {cfg[num_target_layers]} target layers), `mask_token_id` {mask}.
  Weights in {cfg[torch_dtype]}.
- Recipe: frozen target; {seqs} training sequences of {seqlen} tokens, each a prompt followed by the
  target's own greedy continuation (generated on the GPU). Prompts: {prompts}. Random anchors in the
  continuation, each opening a block [token, MASK x {cfg[block_size]}-1] that sees context strictly before it;
  cross-entropy weighted by exp(-(k-1)/gamma) over block slot k; AdamW, cosine schedule, warmup 4%.
- Corpus: {corpus}
- Training: seed {seed}, {steps} steps, wall time {wall} s on {device} (torch {torch}).
  Command: `python -m refengine.train {argv}`. With `--max-minutes` the schedule's progress is
  max(step / steps, elapsed / limit), so a capped run still anneals fully and stops there.
- Size settings as run: {hyper}.
- Rebuild: `{rebuild}`.

## Loss curve (slot_acc: top-1 agreement over all block slots)

{loss}
## tau

{tau}"""
