"""Server-sent events, one line at a time, as the bytes arrive.

Only `data:` fields matter to OpenAI-style streams; an event ends at a blank line, and a
multi-line `data` is joined with newlines (the SSE rule). Comment lines (`:`) are skipped.
"""

from __future__ import annotations


class EventParser:
    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: bytes) -> str | None:
        """Take one line (with or without its newline); return an event's data when it ends."""
        text = line.decode("utf-8").rstrip("\r\n")
        if not text:
            return self.flush()
        if text.startswith(":"):
            return None
        field, _, value = text.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        """The event in progress, if any (also for a stream that ends without a blank line)."""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data
