from collections import Counter
from pathlib import Path

import pytest

from ddbench.core.prompts import PromptSetError, load_prompts

PROMPTS = Path(__file__).resolve().parents[3] / "loadtests" / "prompts"
STUDY_CATEGORIES = {"code", "explanation", "arithmetic", "json", "creative"}


def test_chat_set_has_the_five_study_categories_with_eight_prompts_each():
    counts = Counter(p.category for p in load_prompts(PROMPTS / "chat.jsonl"))
    assert set(counts) == STUDY_CATEGORIES
    assert min(counts.values()) >= 8


def test_study5_is_exactly_the_studys_five_prompts():
    ps = load_prompts(PROMPTS / "study5.jsonl")
    assert [(p.id, p.category) for p in ps] == [
        ("fibonacci", "code"), ("quicksort", "code"), ("arithmetic", "arithmetic"),
        ("json_parse", "json"), ("haiku", "creative")]


def test_long_set_is_long_context():
    ps = load_prompts(PROMPTS / "long.jsonl")
    assert len(ps) >= 8
    lengths = [sum(len(m.content) for m in p.messages) for p in ps]
    assert min(lengths) >= 3000


def test_categories_filter_keeps_only_those():
    ps = load_prompts(PROMPTS / "chat.jsonl", ["json"])
    assert ps and {p.category for p in ps} == {"json"}


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = (PROMPTS / "study5.jsonl").read_text().splitlines()[0]
    bad.write_text(good + "\n" + '{"id": "x", "category": "code", "messages": []}\n')
    with pytest.raises(PromptSetError, match=rf"{bad}:2: messages"):
        load_prompts(bad)
