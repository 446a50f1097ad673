"""A SPEED-Bench file a user has (nvidia/SPEED-Bench, JSONL or the dataset's parquet) is a prompt set as it is:
each row its first turn, its category (domain or entropy tier) kept, and a bad row named by file and line."""

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ddbench.core.prompts import PromptSetError, load_prompt_set, load_prompts, prompt_set_digest

ROWS = [
    {"question_id": "tp1k-0001", "category": "low_entropy", "sub_category": "code_translation",
     "turns": ["Translate this C loop to Python: for (i = 0; i < n; i++) s += a[i];"], "source": "x",
     "src_id": "1", "difficulty": "", "multiturn": False},
    {"question_id": "tp1k-0002", "category": "high_entropy", "sub_category": "story",
     "turns": ["Write a story about a lighthouse.", "Now retell it from the keeper's cat."], "source": "y",
     "src_id": "2", "difficulty": "", "multiturn": True},
    {"question_id": 3, "category": "mixed", "sub_category": "qa", "turns": ["Why is the sky blue?"],
     "source": "z", "src_id": "3", "difficulty": "easy", "multiturn": False},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_speed_bench_file_is_read_as_it_is(tmp_path):
    f = write_jsonl(tmp_path / "speed_bench_throughput_1k.jsonl", ROWS)
    got = load_prompts(f)
    assert [p.id for p in got] == ["speedbench-tp1k-0001", "speedbench-tp1k-0002", "speedbench-3"]
    assert [p.category for p in got] == ["low_entropy", "high_entropy", "mixed"]
    # the first turn alone: a second asks about the model's own first answer, which differs by arm
    assert [len(p.messages) for p in got] == [1, 1, 1] and got[1].messages[0].content.startswith("Write a story")
    assert [p.id for p in load_prompt_set(str(f), ["high_entropy"])] == ["speedbench-tp1k-0002"]
    assert prompt_set_digest(str(f)) == hashlib.sha256(f.read_bytes()).hexdigest()


def test_the_datasets_parquet_reads_the_same(tmp_path):
    f = tmp_path / "qualitative.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "question_id": str(r["question_id"])} for r in ROWS]), f)
    assert [(p.id, p.category, p.messages[0].content) for p in load_prompts(f)] == \
        [(p.id, p.category, p.messages[0].content) for p in load_prompts(write_jsonl(tmp_path / "q.jsonl", ROWS))]


def test_a_row_without_turns_is_named(tmp_path):
    f = write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], {**ROWS[2], "turns": []}])
    with pytest.raises(PromptSetError, match=r"bad.jsonl:2: turns: List should have at least 1 item"):
        load_prompts(f)
