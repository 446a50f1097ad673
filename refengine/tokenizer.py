"""The tokenizer of a checkpoint: HF `tokenizers` (tokenizer.json) and the chat template of
tokenizer_config.json, rendered with jinja2 the way transformers renders it.

    tok = Tokenizer.from_pretrained(dir)
    ids = tok.encode(tok.chat_prompt([{"role": "user", "content": "..."}]))
    text = tok.decode(ids)
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer as HFTokenizer


def _token_text(value) -> str | None:
    return value.get("content") if isinstance(value, dict) else value


def _raise(message: str):
    raise jinja2.TemplateError(message)


class Tokenizer:
    def __init__(self, tokenizer: HFTokenizer, config: dict, source: str):
        self.hf, self.config, self.source = tokenizer, config, source
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        template = config.get("chat_template")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.globals["raise_exception"] = _raise
        self.template = env.from_string(template) if template else None

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> Tokenizer:
        d = Path(directory)
        path = d / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"{d}: no tokenizer.json")
        config_path = d / "tokenizer_config.json"
        config = {}
        if config_path.is_file():
            try:
                config = json.loads(config_path.read_text())
            except json.JSONDecodeError as e:
                raise ValueError(f"{config_path}: not valid JSON: {e}") from None
        return cls(HFTokenizer.from_file(str(path)), config, str(d))

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    @property
    def eos_ids(self) -> list[int]:
        ids = [self.hf.token_to_id(self.eos_token)] if self.eos_token else []
        return [i for i in ids if i is not None]

    def encode(self, text: str) -> list[int]:
        # special tokens in the text (e.g. the template's bos) are matched as special tokens
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode(ids, skip_special_tokens=True)

    def chat_ids(self, messages: list[dict]) -> list[int]:
        """A chat request's prompt ids, rendered and encoded as the server does (analysis re-scores with it)."""
        return self.encode(self.chat_prompt(messages))

    def chat_prompt(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        if self.template is None:
            raise ValueError(f"{self.source}: tokenizer_config.json has no chat_template")
        try:
            return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                        bos_token=self.bos_token or "", eos_token=self.eos_token or "")
        except jinja2.TemplateError as e:
            raise ValueError(f"{self.source}: chat_template failed: {e}") from None
