"""The client asks for the generated token ids and keeps them, in order, when the server returns them."""

import json

from ddbench.core.prompts import Prompt
from ddbench.core.records import RequestRecord
from loadtests.client import chat_body, take

PROMPT = Prompt(id="p", category="c", messages=[{"role": "user", "content": "hi"}])


def event(**choice):
    return json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": None, **choice}]})


def fresh():
    return {"chunks": [], "status": 200, "error": None, "finish_reason": None, "usage": None, "spec": None,
            "headers_ns": 1, "output_token_ids": None}


def test_chat_body_asks_unless_told_not_to():
    assert chat_body(PROMPT, model="m", max_tokens=4, temperature=0)["return_token_ids"] is True
    assert "return_token_ids" not in chat_body(PROMPT, model="m", max_tokens=4, temperature=0, token_ids=False)


def test_ids_of_every_event_are_kept_text_or_not():
    out = fresh()
    take(event(delta={"content": "ab"}, token_ids=[5, 6]), 10, out)
    take(event(token_ids=[7]), 11, out)                      # ids whose text the server held back
    take(event(delta={"content": "c"}, token_ids=[]), 12, out)
    take(event(finish_reason="length"), 13, out)
    assert out["output_token_ids"] == [5, 6, 7] and [c.text for c in out["chunks"]] == ["ab", "c"]


def test_a_server_without_ids_leaves_none_and_the_record_takes_it():
    out = fresh()
    take(event(delta={"content": "ab"}), 10, out)
    assert out["output_token_ids"] is None
    rec = RequestRecord(request_id="r", arm="ar", concurrency=1, repetition=1, warmup=False, prompt_id="p",
                        category="c", worker="w", user=0, max_tokens=4, temperature=0.0, send_ns=0, send_unix_ns=0,
                        **out)
    assert rec.output_token_ids is None
