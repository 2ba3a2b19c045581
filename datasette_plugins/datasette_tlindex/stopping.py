"""A server stopped (SIGTERM, SIGINT) stops now: the statements its request threads run are interrupted.

Uvicorn stops gracefully: it waits for the requests in flight, whose threads may be running a statement of SQLite,
which no Python signal handler reaches. When the server runs under Uvicorn's signal handlers, every connection
the plugin prepares is remembered, and the handlers are wrapped to interrupt every one of them first, so the
requests answer at once (an error) and the server exits within a second or two.
"""

from __future__ import annotations

import signal
import sqlite3
import threading

# The connections of a server under Uvicorn (a Datasette made in a test or a script remembers none: a connection
# cannot be referenced weakly, and remembering those would keep them open).
_SERVED: list[sqlite3.Connection] = []
_WATCHING = threading.Event()
_LOCK = threading.Lock()
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def served(conn: sqlite3.Connection) -> None:
    """Remember a connection the server's requests use (under a server's signal handlers only)."""
    if _WATCHING.is_set():
        with _LOCK:
            _SERVED.append(conn)


def interrupt_all() -> int:
    """Interrupt the statement every remembered connection runs (none: nothing happens); how many there are."""
    with _LOCK:
        connections = list(_SERVED)
    for conn in connections:
        try:
            conn.interrupt()
        except sqlite3.ProgrammingError:  # closed meanwhile
            pass
    return len(connections)


def interrupt_on_stop() -> None:
    """Wrap the stopping signals' handlers of a server (Uvicorn's `handle_exit`, installed before the app starts) to
    interrupt every statement first; nothing outside the main thread or when no server's handler is installed."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        handler = signal.getsignal(signum)
        if getattr(handler, "__name__", "") != "handle_exit":  # not a server's (a test's Datasette, a shell's)
            continue

        def interrupting(received: int, frame, handler=handler) -> None:
            interrupt_all()
            handler(received, frame)

        interrupting.__name__ = "interrupting_handle_exit"
        signal.signal(signum, interrupting)
        _WATCHING.set()
