"""Markers come from the directory a test lives in; GPU tests skip, visibly, without CUDA."""

import json
from pathlib import Path

import pytest

_TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config, items):
    have_cuda = _cuda_available()
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier in _TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
        if "gpu" in item.keywords and not have_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; none on this machine"))


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


WORD_VOCAB = 256


def write_word_tokenizer(directory: Path, vocab: int = WORD_VOCAB) -> None:
    """A word-level tokenizer whose every token decodes to a whole ASCII word ("w17"), so no text
    is held back for an incomplete UTF-8 character and each verify step is exactly one chunk."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<eos>", "<bos>"] + [f"w{i}" for i in range(vocab - 3)] + ["<mask>"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(directory / "tokenizer.json"))
    config = {"bos_token": "<bos>", "eos_token": "<eos>", "model_max_length": 512,
              "chat_template": "{{ bos_token }}{% for m in messages %} {{ m['content'] }}{% endfor %}"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


@pytest.fixture(scope="session")
def word_pair_dir(tmp_path_factory) -> Path:
    """A small random target + drafter (HF layout) with the word tokenizer: pair/target, pair/drafter."""
    from refengine.pair import random_pair, save_pair

    d = tmp_path_factory.mktemp("pair")
    # an EOS id the random target picks sometimes, so some outputs end by EOS
    target, drafter = random_pair(seed=1, vocab_size=WORD_VOCAB, eos_token_id=0, std=0.3)
    save_pair(target, drafter, d)
    for sub in ("target", "drafter"):
        write_word_tokenizer(d / sub)
    return d
