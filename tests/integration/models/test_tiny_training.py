"""The whole training pipeline at the tiny size, as real subprocesses on a CPU: corpus manifest,
tokenizer, token streams, target, greedy data, drafter, tau and model cards, then the outputs load
through transformers and dflash. A few dozen steps only: this checks the plumbing, not quality."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[3]
MANIFEST = json.loads((REPO / "refengine" / "train" / "corpus_manifest.json").read_text())


def small_stdlib(dst: Path) -> None:
    """Some held-out and some training files of the pinned manifest (or this Python's stdlib)."""
    from refengine.train import corpus
    root = Path(MANIFEST["root"])
    if not root.is_dir():
        root = corpus.stdlib_root()
    files = sorted((f for f in corpus.collect(root) if 3_000 < f["bytes"] < 20_000), key=lambda f: f["path"])
    held = [f for f in files if f["split"] == "heldout"][:3]
    train = [f for f in files if f["split"] == "train"][:24]
    assert held and train, f"{root}: too few small files to build a tiny corpus"
    for f in held + train:
        (dst / f["path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f["path"], dst / f["path"])


@pytest.mark.slow
def test_tiny_pipeline_end_to_end(tmp_path):
    lib, work, models = tmp_path / "lib", tmp_path / "work", tmp_path / "models"
    small_stdlib(lib)
    prompts = tmp_path / "chat.jsonl"
    prompts.write_text("\n".join(json.dumps(p) for p in [
        {"id": "c1", "category": "code", "messages": [{"role": "user", "content": "Parse a config file."}]},
        {"id": "j1", "category": "json", "messages": [{"role": "user", "content": "Emit JSON for a user."}]},
    ]) + "\n")
    cmd = [sys.executable, "-m", "refengine.train", "all", "--size", "tiny", "--device", "cpu",
           "--stdlib", str(lib), "--manifest", str(tmp_path / "manifest.json"), "--new-manifest",
           "--work", str(work), "--models", str(models), "--target-name", "t", "--drafter-name", "d",
           "--target-steps", "30", "--drafter-steps", "20", "--prompts", str(prompts),
           "--eval-prompts", "3", "--eval-new-tokens", "12"]
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert len(manifest["files"]) == 27 and {f["split"] for f in manifest["files"]} == {"train", "heldout"}
    hist = json.loads((work / "target_train.json").read_text())["history"]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    assert hist[-1]["step"] == 30 and "val_loss" in hist[-1]
    starts = np.load(work / "greedy_starts.npy")  # file cuts start their continuation at 16; requests sooner
    assert (starts == 16).sum() >= 64 and (starts < 16).any(), res.stdout[-2000:]
    tau = json.loads((work / "tau.json").read_text())
    assert tau["table"]["linear-b8"] == tau["table"]["chain-b7"]
    assert {"file", "chat", "chat:code", "chat:json", "all"} <= set(tau["table"]["tree-b15-k8"])
    assert all(v >= 1.0 for arm in tau["table"].values() for v in arm.values())
    for d in ("t", "d"):
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"):
            assert (models / d / name).is_file(), f"{d}/{name} missing"
    assert "## Loss curve" in (models / "t" / "README.md").read_text()
    assert "chat-shaped request of `refengine/train/requests.py`" in (models / "d" / "README.md").read_text()

    from dflash.model import DFlashDraftModel, dflash_generate
    from transformers import AutoModelForCausalLM
    target = AutoModelForCausalLM.from_pretrained(models / "t", dtype=torch.float32).eval()
    drafter = DFlashDraftModel.from_pretrained(models / "d", dtype=torch.float32).eval()
    prompt = torch.tensor([[1, 5, 6, 7, 8]])
    want = target.generate(prompt, max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0)
    got = dflash_generate(drafter, target, prompt, 10, None, temperature=0.0)
    assert got[0].tolist() == want[0].tolist()
