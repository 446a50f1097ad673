"""Wait for a server: /v1/models, then /health, within a timeout; or say exactly why not.

A failure reads, first line, what happened (exited with code N / not ready after T s), then
the Python traceback found in the log if any, then the log's last 50 lines, so the cause of
a server that never came up is on screen instead of behind a hung sweep.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx

TAIL_LINES = 50
POLL_S = 0.25
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)


class BringUpError(RuntimeError):
    """A server that did not come up; str() is the one-line summary, then traceback and log tail."""

    def __init__(self, summary: str, log: str = ""):
        self.summary = summary
        self.log_tail = tail(log)
        self.traceback = last_traceback(log)
        super().__init__(summary)

    def __str__(self) -> str:
        parts = [self.summary]
        if self.traceback:
            parts += ["", "Python traceback:", self.traceback]
        parts += ["", f"last {TAIL_LINES} log lines:", self.log_tail or "(the server wrote nothing)"]
        return "\n".join(parts)


    @property
    def cause(self) -> str | None:
        """The one line that most likely says why: a traceback's exception line, else the log's last line."""
        lines = (self.traceback or self.log_tail or "").strip().splitlines()
        return lines[-1].strip()[:300] if lines else None

    def naming(self, log_path) -> BringUpError:
        """The same failure, its summary carrying the cause and where the whole log is (a cell's reason)."""
        self.summary = (self.summary + (f"; it said: {self.cause}" if self.cause else "")
                        + f"; its log: {log_path}")
        return self


def tail(text: str, n: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-n:])


def last_traceback(text: str) -> str | None:
    """The last traceback in a log, through its final exception line (indented lines, then one more)."""
    starts = [m.start() for m in _TRACEBACK.finditer(text)]
    if not starts:
        return None
    lines = text[starts[-1]:].splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        out.append(line)
        if not line.startswith((" ", "\t")) and not line.startswith(("During handling", "The above exception")) \
                and line.strip():
            break
    return "\n".join(out)


def probe(client: httpx.Client, url: str) -> tuple[bool, str]:
    try:
        r = client.get(url)
    except httpx.HTTPError as e:
        return False, f"{type(e).__name__}: {e}"
    return r.status_code == 200, f"HTTP {r.status_code}"


def wait_ready(base_url: str, *, exited: Callable[[], str | None], logs: Callable[[], str],
               timeout_s: float, what: str = "server") -> float:
    """Seconds until ready. `exited` says how the server ended (None while it runs); `logs` reads its log."""
    t0 = time.monotonic()
    last = "no answer yet"
    with httpx.Client(timeout=5.0) as client:
        for path in ("/v1/models", "/health"):
            while True:
                gone = exited()
                if gone is not None:
                    raise BringUpError(f"{what} {gone} before it was ready (waiting for {path}; last probe: {last})",
                                       logs())
                ok, last = probe(client, base_url + path)
                if ok:
                    break
                if time.monotonic() - t0 > timeout_s:
                    raise BringUpError(f"{what} not ready after {timeout_s:.0f} s ({base_url}{path}: {last})", logs())
                time.sleep(POLL_S)
    return time.monotonic() - t0
