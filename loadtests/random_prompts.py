"""Prompts of random tokens, each exactly as long as targeted in the target's own tokens.

A random prompt's length counts what the server counts: the request's one user message rendered with the
tokenizer's chat template and encoded (usage.prompt_tokens), so that records can be checked against it.
Random token ids do not survive decode -> encode unchanged (byte-level pieces merge or split), so the
content is adjusted until the rendered prompt has the targeted length: cut where it is long, extended with
more random ids where it is short.

The tokenizer must be at hand on the load generator: a local directory with tokenizer.json (and the chat
template in tokenizer_config.json), the profile's models.tokenizer or else models.target. A hub id that
is not a local directory is not fetched: neither SGLang's OpenAI server nor ours offers a tokenize call
this tool relies on, so random prompts then need models.tokenizer pointing at a local copy.

Random prompts overstate speculative acceptance (SPEED-Bench, arXiv 2604.09557: by about 23%); the
report says so wherever a run used them.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

from ddbench.core.profile import Length, repo_path
from ddbench.core.prompts import Message, Prompt, PromptSetError, RandomPrompts

CATEGORY = "random"
ADJUSTMENTS = 64   # rounds of cut/extend before a fresh draw; a few suffice in practice
DRAWS = 16         # fresh draws before giving up on a length


def tokenizer_dir(tokenizer: str | None, target: str | None) -> Path:
    """Where the load generator reads the target's tokenizer: models.tokenizer, else models.target."""
    if not (tokenizer or target):   # an external profile may name no model
        raise PromptSetError("workload.input: random prompts need the target's tokenizer: set models.tokenizer "
                             "(or models.target) to a local directory with tokenizer.json")
    return repo_path(tokenizer or target)


@lru_cache(maxsize=4)
def _tokenizer(directory: str):
    from refengine.tokenizer import Tokenizer  # light: tokenizers + jinja2, no torch

    try:
        tok = Tokenizer.from_pretrained(directory)
    except (FileNotFoundError, ValueError) as e:
        raise PromptSetError(f"random prompts need the target's tokenizer here: {e} (set models.tokenizer to "
                             "a local directory with tokenizer.json)") from None
    if tok.template is None:
        raise PromptSetError(f"{directory}: tokenizer_config.json has no chat_template; random prompts are "
                             "measured as the server renders them")
    return tok


def _ordinary_ids(tok) -> list[int]:
    """Ids a random prompt may hold: the base vocabulary, without added (special) tokens such as <|im_end|>."""
    added = set(tok.hf.get_added_tokens_decoder())
    return sorted(i for i in tok.hf.get_vocab(with_added_tokens=False).values() if i not in added)


def _length(tok, content: str) -> int:
    return len(tok.chat_ids([{"role": "user", "content": content}]))


def _content(tok, n: int, rng: random.Random, pool: list[int], overhead: int) -> str:
    """Text whose rendered chat prompt is exactly n tokens long."""
    for _ in range(DRAWS):
        ids = [rng.choice(pool) for _ in range(n - overhead)]
        for _ in range(ADJUSTMENTS):
            text = tok.decode(ids)
            got = _length(tok, text)
            if got == n:
                return text
            ids = tok.encode(text)   # work from what the text really encodes to
            if got > n:
                ids = ids[:max(len(ids) - (got - n), 1)]
            else:
                ids += [rng.choice(pool) for _ in range(n - got)]
    raise PromptSetError(f"input: no random prompt of exactly {n} tokens found in {DRAWS} draws")


@lru_cache(maxsize=8)
def make(count: int, length: Length, seed: int, tokenizer: str) -> tuple[Prompt, ...]:
    """count random prompts; prompt i's length and tokens come from (seed, i) alone, so every arm, repetition
    and Locust process makes the same ones."""
    tok = _tokenizer(tokenizer)
    pool = _ordinary_ids(tok)
    overhead = _length(tok, "")
    out = []
    for i in range(count):
        n = length.sample(random.Random(f"input/{seed}/{i}"))
        if n <= overhead:
            raise PromptSetError(f"input: {n} tokens leaves no room for content: the chat template alone takes "
                                 f"{overhead} tokens of {tokenizer}")
        text = _content(tok, n, random.Random(f"random-prompt/{seed}/{i}"), pool, overhead)
        out.append(Prompt(id=f"random-{i:04d}", category=CATEGORY, messages=[Message(role="user", content=text)],
                          input_tokens=n))
    return tuple(out)


def maker(length: Length | None, seed: int, tokenizer: str | Path | None) -> RandomPrompts | None:
    """The reader of random sources for load_prompt_set, or None where the workload has no input lengths."""
    if length is None:
        return None
    if tokenizer is None:
        return _no_tokenizer
    return lambda count: list(make(count, length, seed, str(tokenizer)))


def _no_tokenizer(count: int) -> list[Prompt]:
    raise PromptSetError("random prompts need the target's tokenizer, and none was given to the load generator")


def profile_tokenizer(profile) -> Path | None:
    """The tokenizer directory a profile's load generator needs: only where its workload has random prompts."""
    m = profile.models
    return tokenizer_dir(m.tokenizer, m.target) if profile.workload.input is not None else None


def for_profile(profile) -> RandomPrompts | None:
    """The random prompts a profile's cells send."""
    wl, m = profile.workload, profile.models
    return maker(wl.input, profile.load.seed, tokenizer_dir(m.tokenizer, m.target)) if wl.input else None
