"""Workload shaping against a real reference-engine server serving the shipped pair (DFlash, on the CPU):
drawn output lengths are generated exactly (ignore_eos), and random prompts have exactly their targeted
length as the server counts it (usage.prompt_tokens, the served tokenizer with its chat template)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddbench.core.profile import Load, Workload
from loadtests.cell import run_cell
from loadtests.recorder import read_records

REPO = Path(__file__).resolve().parents[3]
TARGET, DRAFTER = REPO / "models" / "qwen3-stdlib-13m", REPO / "models" / "qwen3-stdlib-13m-dflash-b16"
USERS, PER_USER = 4, 6


@pytest.fixture(scope="module")
def server(module_refengine_servers, tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    return module_refengine_servers.start(log, "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                                          str(DRAFTER), "--context-length", "512")


def _cell(url: str, tmp_path: Path, workload: dict, tokenizer=None) -> list:
    wl = Workload.model_validate(workload)
    load = Load(concurrency=[USERS], warmup_requests=1, requests_per_user=PER_USER, seed=3)
    status = run_cell(wl, load, url=url, cell_dir=tmp_path / "cell", arm="linear-b16", concurrency=USERS,
                      repetition=1, tokenizer=tokenizer)
    assert status.status == "ok", status.reason
    records = read_records(tmp_path / "cell")
    assert len(records) == USERS * (1 + PER_USER) and all(r.ok for r in records)
    return records


def test_drawn_output_lengths_are_generated_exactly_and_spread(server, tmp_path):
    records = _cell(server, tmp_path, {"prompt_set": "loadtests/prompts/chat.jsonl",
                                       "output": {"kind": "uniform", "min": 8, "max": 24}})
    targets = [r.target_output_tokens for r in records]
    assert all(r.max_tokens == r.target_output_tokens for r in records)
    assert [r.usage.completion_tokens for r in records] == targets
    assert all(8 <= t <= 24 for t in targets)
    # 28 draws from 17 values: a fixed length, or a draw stuck at one end, would fail these
    assert len(set(targets)) >= 8 and min(targets) <= 12 and max(targets) >= 20


def test_random_prompts_have_their_length_as_the_server_counts_it(server, tmp_path):
    records = _cell(server, tmp_path, {"prompt_set": "random:8", "max_tokens": 8,
                                       "input": {"kind": "uniform", "min": 16, "max": 200}}, tokenizer=TARGET)
    targets = [r.target_input_tokens for r in records]
    assert all(t is not None and 16 <= t <= 200 for t in targets)
    assert [r.usage.prompt_tokens for r in records] == targets
    assert len(set(targets)) >= 4   # eight prompts of drawn lengths, not one length
    assert all(r.category == "random" and r.prompt_id.startswith("random-") for r in records)


def test_random_prompts_without_a_tokenizer_fail_before_any_load(server, tmp_path):
    wl = Workload(prompt_set="random", max_tokens=8, input={"kind": "fixed", "tokens": 32})
    load = Load(concurrency=[1], requests_per_user=1)
    with pytest.raises(ValueError, match="tokenizer"):
        run_cell(wl, load, url=server, cell_dir=tmp_path / "cell", arm="ar", concurrency=1, repetition=1)
    assert not (tmp_path / "cell").exists()
