"""The sweep's progress as lines, for output that is not a terminal (a log file, CI, `| tee`): rich's live bar
draws nothing there until it ends. Same calls as rich.progress.Progress, as far as the sweep uses it."""

from __future__ import annotations

import time

from rich.console import Console


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class ProgressLines:
    def __init__(self, console: Console):
        self.console, self.tasks = console, []

    def __enter__(self) -> ProgressLines:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, description: str, total: int) -> int:
        self.tasks.append({"description": description, "total": total, "done": 0, "t0": time.monotonic()})
        return len(self.tasks) - 1

    def update(self, task: int, description: str) -> None:
        self.tasks[task]["description"] = description

    def advance(self, task: int, advance: int = 1) -> None:
        t = self.tasks[task]
        t["done"] += advance
        self.console.print(self.line(t, time.monotonic() - t["t0"]), highlight=False, soft_wrap=True)

    @staticmethod
    def line(t: dict, elapsed: float) -> str:
        """'[12/80] linear-b16 C=4 r2 done, 0:03:12 elapsed, eta 0:18:40' (eta: at the pace so far)."""
        eta = elapsed / t["done"] * (t["total"] - t["done"]) if t["done"] else None
        return (f"[{t['done']}/{t['total']}] {t['description']} done, {_clock(elapsed)} elapsed"
                + (f", eta {_clock(eta)}" if eta is not None else ""))
