"""Servers this process owns are stopped when it ends: at exit, on SIGINT (Ctrl-C) and on SIGTERM.

A server started for the length of a sweep must not outlive the sweep, however it ends;
one started detached (`ddbench up`) is not owned, and `ddbench down` stops it later.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading

_owned: dict[int, object] = {}
_previous: dict[int, object] = {}
_installed = False


def own(server) -> None:
    global _installed
    if not _installed:
        atexit.register(stop_all)
        _install_handlers()
        _installed = True
    _owned[id(server)] = server


def disown(server) -> None:
    _owned.pop(id(server), None)


def disown_where(predicate) -> None:
    for key, server in list(_owned.items()):
        if predicate(server):
            del _owned[key]


def stop_all() -> None:
    # one server that cannot be reached (its Docker host gone, say) must not keep the others running
    for server in list(_owned.values()):
        try:
            server.stop()
        except Exception as e:
            print(f"ddbench: could not stop {getattr(server, 'ident', server)}: {type(e).__name__}: {e}",
                  file=sys.stderr)
        finally:
            disown(server)


def _handler(signum, frame):
    stop_all()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif signum == signal.SIGINT:
        raise KeyboardInterrupt
    else:
        sys.exit(128 + signum)


def _gevent_patched() -> bool:
    """A gevent process (Locust's web UI): its signal handlers run in the event loop, where stopping a server
    (a blocking wait) is impossible. There the process's own quit path stops what it owns, and atexit the rest."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_anything_patched()


def _install_handlers() -> None:
    if threading.current_thread() is not threading.main_thread() or _gevent_patched():
        return  # handlers can only be set from the main thread, or gevent's loop owns them; atexit cleans up
    for sig in (signal.SIGINT, signal.SIGTERM):
        _previous[sig] = signal.getsignal(sig)
        signal.signal(sig, _handler)
