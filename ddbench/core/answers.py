"""How a server's unwanted HTTP answer is worded, wherever ddbench asks one: a status and a one-line reason,
never a page of HTML. A 401 names `api_key_env`, the profile field that sends a key."""

from __future__ import annotations

import re
from http import HTTPStatus

_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")

HINTS = {
    401: "the server wants an API key: name the variable that holds it in the arm's api_key_env",
    403: "the server refused the key it was sent (the arm's api_key_env variable) or the request",
    404: "no such route: is the URL the server's root, without /v1?",
}


def gist(body: str, n: int = 300) -> str:
    """One line of a response body: an HTML page's title (or its text), a JSON or text answer's start."""
    text = body.strip()
    if text[:1] == "<":
        title = _TITLE.search(text)
        text = title.group(1) if title else _TAG.sub(" ", text)
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


def refused(url: str, status: int, body: str = "") -> str:
    """'<url> answered HTTP 401 Unauthorized (...): <hint>' for an answer that is not 200."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "unknown status"
    said = gist(body)
    return (f"{url} answered HTTP {status} {phrase}" + (f" ({said})" if said else "")
            + (f": {HINTS[status]}" if status in HINTS else ""))
