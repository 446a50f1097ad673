"""Tau of the shipped pair at T=0 on two prompt sources: cuts of held-out files, and the load-test
chat prompts rendered through the chat template (when the prompt set exists)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from refengine.train import drafter as drafter_io
from refengine.train import greedy, tau, tokenizer, tokens

FILE_PROMPT_LEN = 64


def chat_prompts(path: Path) -> list[dict]:
    """[{id, category, messages}] from a prompt set; validated by ddbench's schema where it is installed."""
    try:
        from ddbench.core.prompts import load_prompts
    except ImportError:  # the GPU machine has no pydantic; the schema is checked on the CPU side
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [p.model_dump() for p in load_prompts(path)]


def cases_for(target, model, seqs: np.ndarray, start: int, new_tokens: int, categories: list[str], batch: int):
    out = []
    for i in range(0, len(seqs), batch):
        chunk = seqs[i:i + batch]
        ids, lp = tau.marginals(model, target, torch.from_numpy(chunk.astype(np.int64)), start)
        for j in range(len(chunk)):
            out.append({"category": categories[i + j], "seq": chunk[j], "start": start,
                        "new_tokens": new_tokens, "ids": ids[j], "logp": lp[j]})
    return out


def run(target_dir: Path, drafter_dir: Path, tokens_dir: Path, prompts_path: Path | None, device: str,
        seed: int, n_file: int, new_tokens: int) -> dict:
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype="float32").to(device).eval()
    model = drafter_io.load(drafter_dir, device)
    tok = tokenizer.load(target_dir)
    batch = 32 if device.startswith("cuda") else 4
    stream, starts = tokens.load(tokens_dir, "heldout")
    prompts = greedy.cut_prompts(stream, starts, n_file, FILE_PROMPT_LEN, np.random.default_rng(seed + 1))
    seqs = greedy.generate_to(target, list(prompts), FILE_PROMPT_LEN + new_tokens, batch=256)
    cases = cases_for(target, model, seqs, FILE_PROMPT_LEN, new_tokens, ["file"] * len(seqs), batch)
    n_chat = 0
    if prompts_path is not None and prompts_path.is_file():
        for p in chat_prompts(prompts_path):
            ids = tok.encode(tokenizer.render_chat(p["messages"]), add_special_tokens=False).ids
            seq = greedy.generate_to(target, [np.asarray(ids, dtype=np.uint16)], len(ids) + new_tokens, batch=1)
            cases += cases_for(target, model, seq, len(ids), new_tokens, ["chat:" + p["category"]], 1)
            n_chat += 1
    table = tau.tau_table(cases, model.block_size)
    return {"table": table, "file_prompts": n_file, "file_prompt_len": FILE_PROMPT_LEN,
            "chat_prompts": n_chat, "chat_source": str(prompts_path) if n_chat else None,
            "chat_sha256": hashlib.sha256(prompts_path.read_bytes()).hexdigest() if n_chat else None,
            "new_tokens": new_tokens, "device": device,
            "dtype": "bfloat16 autocast" if device.startswith("cuda") else "float32",
            "seed": seed}
