"""workload.api 'completions': a cell against the reference engine's /v1/completions, the prompts' text sent as
written; its records are whole (text, token ids, verify steps) and the server counted the raw text, not a chat
template's rendering of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ddbench.core.prompts import load_prompts
from loadtests.client import raw_text
from loadtests.recorder import read_records
from refengine.tokenizer import Tokenizer

REPO = Path(__file__).resolve().parents[3]


def test_a_cell_on_the_completions_endpoint(refengine_servers, write_profile, tmp_path):
    url = refengine_servers.start(tmp_path / "linear.log", "--max-running-requests", "2",
                                  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                                  "models/qwen3-stdlib-13m-dflash-b16")
    prof = write_profile({"concurrency": [1], "warmup_requests": 1, "requests_per_user": 3},
                         {"api": "completions", "max_tokens": 24, "ignore_eos": True, "temperature": 0})
    cell = tmp_path / "linear-b16" / "c1-r1"
    p = subprocess.run([sys.executable, "-m", "loadtests", "run", "--profile", str(prof), "--arm", "ar",
                        "--concurrency", "1", "--url", url, "--cell-dir", str(cell)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = read_records(cell)
    assert len(recs) == 4 and all(r.ok for r in recs)
    for r in recs:
        assert r.usage.completion_tokens == 24 and "".join(c.text for c in r.chunks)
        assert len(r.output_token_ids or []) == 24 and r.spec["spec_verify_ct"] >= 1
    # the server counted the prompt as the raw text, not the chat template's rendering of it
    tok = Tokenizer.from_pretrained(str(REPO / "models/qwen3-stdlib-13m"))
    prompts = {p.id: p for p in load_prompts(REPO / "loadtests/prompts/study5.jsonl")}
    for r in recs:
        text = raw_text(prompts[r.prompt_id])
        assert r.usage.prompt_tokens == len(tok.encode(text)) < len(tok.chat_ids([{"role": "user", "content": text}]))
