"""A shared-prefix prompt set: N system prompts of a set length, each followed by M questions.

    python -m loadtests.shared_prefix OUT.jsonl --systems 4 --questions 8 --prefix-tokens 1024
                                      [--questions-from loadtests/prompts/chat.jsonl] [--tokenizer DIR] [--seed 0]

Requests that share a long system prompt are where a server's prefix cache and a long context change a
verify step's cost: the cache spares the prefill, and every verify attends over the whole context. System
prompt i is a numbered list of instructions drawn from a fixed vocabulary (seeded by i and --seed), cut
to exactly --prefix-tokens tokens of the target's tokenizer (the shipped pair's by default); the questions
are the first M user turns of --questions-from. Prompt ids are 'sp<i>-<question id>' and each system
prompt is its own category (prefix-<i>), so the report's per-category view shows the spread between them.
Each cell flushes the cache before it starts (load.flush_cache), so reuse is within a cell.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from ddbench.core.profile import REPO_ROOT, caller_path
from ddbench.core.prompts import load_prompts

VERBS = ["Answer", "Check", "Explain", "Prefer", "Avoid", "Quote", "Summarise", "Cite", "Keep", "Flag", "Use",
         "Name", "List", "Compare", "Note", "Return", "Write", "Split", "Mark", "Ask"]
OBJECTS = ["units", "sources", "edge cases", "assumptions", "the user's terms", "short sentences", "examples",
           "numbers", "dates", "code blocks", "error messages", "trade-offs", "defaults", "names", "limits",
           "steps", "risks", "versions", "the question's scope", "open issues"]
MANNERS = ["before anything else", "where it matters", "in plain words", "once per answer", "when unsure",
           "with care", "in order", "without filler", "as a list", "at the end"]


def instructions(rng: random.Random):
    n = 0
    while True:
        n += 1
        yield f"{n}. {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(MANNERS)}."


def system_prompt(i: int, tokens: int, seed: int, tok) -> str:
    """Exactly `tokens` tokens of the tokenizer: the header, then instructions until long enough, then cut."""
    rng = random.Random(f"shared-prefix/{seed}/{i}")
    text = f"You are assistant {i}. Follow these house rules in every answer.\n"
    for line in instructions(rng):
        text += line + "\n"
        if len(tok.encode(text)) >= tokens + 8:
            break
    ids = tok.encode(text)
    # a cut inside a merge re-encodes to another length: try the cuts nearby for one that keeps it
    for k in sorted(range(tokens - 4, tokens + 5), key=lambda k: abs(k - tokens)):
        out = tok.decode(ids[:k])
        if len(tok.encode(out)) == tokens:
            return out
    raise ValueError(f"--prefix-tokens {tokens}: no cut of system prompt {i} re-encodes to that length")


def make(systems: int, questions: list, tokens: int, seed: int, tok) -> list[dict]:
    out = []
    for i in range(systems):
        system = system_prompt(i, tokens, seed, tok)
        for q in questions:
            user = next(m.content for m in q.messages if m.role == "user")
            out.append({"id": f"sp{i}-{q.id}", "category": f"prefix-{i}",
                        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtests.shared_prefix", description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the JSONL file to write")
    ap.add_argument("--systems", type=int, default=4, help="system prompts (default 4)")
    ap.add_argument("--questions", type=int, default=8, help="questions after each (default 8)")
    ap.add_argument("--prefix-tokens", type=int, default=1024, help="each system prompt's length (default 1024)")
    ap.add_argument("--questions-from", default="loadtests/prompts/chat.jsonl", help="where the questions come from")
    ap.add_argument("--tokenizer", default="models/qwen3-stdlib-13m", help="the target's tokenizer directory")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from refengine.tokenizer import Tokenizer  # light: tokenizers + jinja2, no torch

    src = Path(a.questions_from)
    src = src if src.is_absolute() else REPO_ROOT / src
    qs = load_prompts(src)[:a.questions]
    if a.systems < 1 or len(qs) < a.questions or a.questions < 1 or a.prefix_tokens < 16:
        print(f"shared_prefix: need --systems >= 1, 1 <= --questions <= {len(qs)} ({src}), --prefix-tokens >= 16",
              file=sys.stderr)
        return 1
    tok_dir = Path(a.tokenizer)
    tok = Tokenizer.from_pretrained(str(tok_dir if tok_dir.is_absolute() else REPO_ROOT / tok_dir))
    try:
        rows = make(a.systems, qs, a.prefix_tokens, a.seed, tok)
    except ValueError as e:
        print(f"shared_prefix: {e}", file=sys.stderr)
        return 1
    out = caller_path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {out}: {len(rows)} prompts, {a.systems} system prompts of {a.prefix_tokens} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
