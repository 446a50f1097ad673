"""SIGTERM as SystemExit, for every loadtests entry point (python -m loadtests, ui, peer, accuracy)."""

from __future__ import annotations

import signal
import sys


def exit_on_sigterm() -> None:
    """SIGTERM becomes SystemExit, so the cleanup of Locust and servers in finally blocks runs."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
