"""The shared-prefix prompt set: N system prompts of exactly the asked length in the target's tokens, each with
the same M questions, one category per system prompt, the same file from the same seed."""

import json

import pytest

from ddbench.core.profile import REPO_ROOT
from loadtests import shared_prefix
from refengine.tokenizer import Tokenizer

TOK = Tokenizer.from_pretrained(str(REPO_ROOT / "models/qwen3-stdlib-13m"))


@pytest.mark.parametrize("tokens", [16, 100, 257, 1024])
def test_each_system_prompt_has_exactly_the_asked_length(tokens):
    assert len(TOK.encode(shared_prefix.system_prompt(1, tokens, 0, TOK))) == tokens


def test_the_set_crosses_systems_and_questions(tmp_path):
    out = tmp_path / "sp.jsonl"
    assert shared_prefix.main([str(out), "--systems", "3", "--questions", "4", "--prefix-tokens", "64"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12
    assert {r["category"] for r in rows} == {"prefix-0", "prefix-1", "prefix-2"}
    by = {}
    for r in rows:
        by.setdefault(r["category"], set()).add(r["messages"][0]["content"])
    assert all(len(v) == 1 for v in by.values()) and len({next(iter(v)) for v in by.values()}) == 3
    again = tmp_path / "again.jsonl"
    shared_prefix.main([str(again), "--systems", "3", "--questions", "4", "--prefix-tokens", "64"])
    assert again.read_text() == out.read_text()
    assert shared_prefix.main([str(tmp_path / "x.jsonl"), "--questions", "999"]) == 1
