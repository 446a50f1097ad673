"""A byte-level BPE over the corpus, shipped in the standard HF layout.

Special tokens come first so their ids are stable across retrains. Documents are wrapped as
<|bos|> text <|endoftext|>. The chat template turns a chat request into what the model saw in
training: a module docstring holding the request, after which the model writes code.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS, BOS, IM_START, IM_END, MASK = "<|endoftext|>", "<|bos|>", "<|im_start|>", "<|im_end|>", "<|mask|>"
SPECIALS = [EOS, BOS, IM_START, IM_END, MASK]
VOCAB_SIZE = 8192

# A user (or system) turn becomes a module docstring; an assistant turn is code that follows it.
# Triple quotes inside a request are swapped so they cannot close the docstring early.
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- message['content'] + '\\n\\n' -}}"
    "{%- else -%}"
    "{{- '\"\"\"' + message['content'] | replace('\"\"\"', \"'''\") | trim + '\\n\"\"\"\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)


def train(texts: list[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def save(tok: Tokenizer, out_dir: Path, model_max_length: int = 2048) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    added = {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                       "single_word": False, "special": True} for t in SPECIALS}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS, "eos_token": EOS, "pad_token": EOS, "unk_token": None,
        "mask_token": MASK, "additional_special_tokens": [IM_START, IM_END],
        "added_tokens_decoder": added,
        "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "chat_template": CHAT_TEMPLATE,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special_map = {"bos_token": BOS, "eos_token": EOS, "pad_token": EOS, "mask_token": MASK,
                   "additional_special_tokens": [IM_START, IM_END]}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2) + "\n")


def load(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path / "tokenizer.json") if path.is_dir() else str(path))


def special_ids(tok: Tokenizer) -> dict[str, int]:
    return {name: tok.token_to_id(t) for name, t in
            (("eos", EOS), ("bos", BOS), ("im_start", IM_START), ("im_end", IM_END), ("mask", MASK))}


def render_chat(messages: list[dict]) -> str:
    """The chat template, in Python, for the GPU machine where jinja may be missing; tests pin the two equal."""
    parts = [BOS]
    for m in messages:
        if m["role"] == "assistant":
            parts.append(m["content"] + "\n\n")
        else:
            parts.append('"""' + m["content"].replace('"""', "'''").strip() + '\n"""\n\n')
    return "".join(parts)
