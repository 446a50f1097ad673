"""Prompt sets: JSONL files under loadtests/prompts/, one chat request per line.

    {"id": "code-quicksort", "category": "code", "messages": [{"role": "user", "content": "..."}],
     "max_tokens": 128}

max_tokens is optional and overrides the profile's. Errors name the file and the line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    category: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)


class PromptSetError(ValueError):
    pass


def load_prompts(path: str | Path, categories: list[str] | None = None) -> list[Prompt]:
    path = Path(path)
    if not path.is_file():
        raise PromptSetError(f"{path}: no such prompt set")
    prompts, seen = [], set()
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            p = Prompt.model_validate(json.loads(line))
        except json.JSONDecodeError as e:
            raise PromptSetError(f"{path}:{n}: not valid JSON: {e.msg}") from None
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "<line>"
            raise PromptSetError(f"{path}:{n}: {where}: {first['msg']}") from None
        if p.id in seen:
            raise PromptSetError(f"{path}:{n}: prompt id '{p.id}' repeats")
        seen.add(p.id)
        prompts.append(p)
    if categories:
        unknown = set(categories) - {p.category for p in prompts}
        if unknown:
            raise PromptSetError(f"{path}: no prompts in categories {sorted(unknown)}")
        prompts = [p for p in prompts if p.category in categories]
    if not prompts:
        raise PromptSetError(f"{path}: the prompt set is empty")
    return prompts


def prompt_set_digest(path: str | Path) -> str:
    """Comparisons are only made between runs whose prompt sets hash the same."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
