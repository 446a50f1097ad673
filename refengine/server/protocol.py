"""Requests as the OpenAI API (and SGLang's extensions) define them, validated strictly.

Every way a request can be wrong becomes a BadRequest that names the field, which the app
turns into HTTP 400 with an OpenAI-style error body; the server keeps serving.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError


class BadRequest(ValueError):
    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message, self.param = message, param


def error_body(message: str, param: str | None = None, kind: str = "invalid_request_error", code: int = 400) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = False


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart]

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class Sampled(BaseModel):
    """Fields shared by chat and text completions. Unknown fields are ignored, as OpenAI servers do."""

    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    max_tokens: StrictInt | None = Field(None, ge=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: StrictInt = Field(-1, ge=-1)  # -1 = off (SGLang's convention)
    seed: StrictInt | None = None
    stop: str | list[str] | None = None
    ignore_eos: StrictBool = False
    n: StrictInt = Field(1, ge=1, le=1)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    return_spec_tokens_details: StrictBool = False
    # the generated ids as choices[].token_ids, each event its own (SGLang's field: PR #30917 on
    # /v1/completions, #37365 on chat streams)
    return_token_ids: StrictBool = False

    @property
    def stops(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class ChatRequest(Sampled):
    messages: list[ChatMessage] = Field(min_length=1)


class CompletionRequest(Sampled):
    prompt: str | list[StrictInt] = Field(min_length=1)


def parse(body: bytes, kind: type[Sampled]) -> Sampled:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"request body is not valid UTF-8 (byte {e.start})") from None
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    try:
        return kind.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise BadRequest(f"{param}: {first['msg']}", param) from None
