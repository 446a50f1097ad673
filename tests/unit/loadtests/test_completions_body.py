"""workload.api: the chat body carries messages, the completions body the prompt's raw text; both streams fold
into the same record."""

from ddbench.core.prompts import Message, Prompt
from loadtests.client import PATHS, chat_body, take

PROMPT = Prompt(id="p", category="c", messages=[Message(role="system", content="Be brief."),
                                                Message(role="user", content="Name a prime.")])


def test_the_body_follows_the_api():
    chat = chat_body(PROMPT, model="m", max_tokens=8, temperature=0)
    assert chat["messages"][1] == {"role": "user", "content": "Name a prime."} and "prompt" not in chat
    raw = chat_body(PROMPT, model="m", max_tokens=8, temperature=0, api="completions")
    assert raw["prompt"] == "Be brief.\n\nName a prime." and "messages" not in raw
    assert raw["max_tokens"] == 8 and raw["stream"] is True
    assert PATHS == {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def test_a_completions_stream_folds_like_a_chat_stream():
    out = {"chunks": [], "output_token_ids": None, "finish_reason": None, "usage": None, "spec": None,
           "error": None}
    take('{"choices": [{"index": 0, "text": " 7", "token_ids": [22]}]}', 1, out)
    take('{"choices": [{"index": 0, "delta": {"content": " 11"}, "finish_reason": "length"}]}', 2, out)
    assert [c.text for c in out["chunks"]] == [" 7", " 11"] and out["output_token_ids"] == [22]
    assert out["finish_reason"] == "length" and take("[DONE]", 3, out) is True
