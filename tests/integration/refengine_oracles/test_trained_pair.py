"""The shipped trained pair (models/, from the model-pair issue), when present: T=0 losslessness
and commit = depth + 1 with real, partial acceptance on real prompts through the chat template."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from refengine.drafter import Drafter
from refengine.engine import Engine
from refengine.model import Target
from refengine.plan import Plan
from refengine.tokenizer import Tokenizer

MODELS = Path(__file__).resolve().parents[3] / "models"
TARGET, DRAFTER = MODELS / "qwen3-stdlib-13m", MODELS / "qwen3-stdlib-13m-dflash-b16"
PROMPTS = ["Write a Python function that reverses a string.", "import os\n\ndef walk(path):",
           "Explain what a context manager is."]

pytestmark = pytest.mark.skipif(not (TARGET / "config.json").is_file() or not (DRAFTER / "config.json").is_file(),
                                reason="the trained pair is not in models/")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    tok = Tokenizer.from_pretrained(TARGET)
    engine = Engine(Target.from_pretrained(TARGET), Drafter.from_pretrained(DRAFTER), capacity=512)
    prompts = [tok.encode(tok.chat_prompt([{"role": "user", "content": p}])) for p in PROMPTS]
    return engine, prompts, tok.eos_ids


def test_trained_pair_is_lossless_with_partial_accepts(setup):
    engine, prompts, eos = setup
    commits = []
    for p in prompts:
        ar = engine.generate(p, Plan("ar"), max_tokens=48, stop_ids=eos)
        for arm in ("linear-b16", "chain-b15", "tree-b15-k8"):
            out = engine.generate(p, Plan.parse(arm), max_tokens=48, stop_ids=eos)
            assert out.tokens == ar.tokens, arm
            for s in out.steps[:-1]:
                assert s.committed == s.depth + 1
            commits += [s.committed for s in out.steps[:-1]]
    assert any(1 < c < 16 for c in commits)
