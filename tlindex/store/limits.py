"""The limit every connection tlindex opens carries: how long a value a statement may build.

SQLite checks SQLITE_LIMIT_LENGTH wherever a string or blob grows (printf, replace, hex, ||, group_concat, a
function's result, a row written or read), so with it set no statement can build a value past MAX_VALUE_BYTES: it
fails with "string or blob too big" instead. It is a setting of the connection (`Connection.setlimit`), not a
function of tlindex's in place of SQLite's: SQLite's own functions run at their own speed. What a served request may
cost beyond that is bounded by the process that runs it (tlindex.served_sql).

Open connections with `connect` (it takes sqlite3.connect's arguments); `tests/test_huge_values.py` fails for a
`sqlite3.connect(` made anywhere else in tlindex or its plugin.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tlindex.stopping import PROGRESS_STEPS, STOP, callback

# The value: every value tlindex stores comes from one record of a log, and the reader holds no record
# past 64 MiB (tlindex.ingest.reader.MAX_RECORD_BYTES), so no payload text, envelope or other value
# read verbatim from a log is longer; the staging writer cuts or drops the few a normalizer could widen
# past it (invalid UTF-8 replaced by U+FFFD, JSON written again). The extra MiB is room for the other
# columns of that value's row (SQLite bounds a whole row by the same limit). Anything far beyond is
# refused: SQLite's default is about 1 GB, and a value near it costs 2-3 times as much memory in the
# statement that builds it, plus its copy in Python.
MAX_VALUE_BYTES = (64 << 20) + (1 << 20)


def limit_connection(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Bound the length of any string or blob the connection's statements build, read or write."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    return conn


class StoppableConnection(sqlite3.Connection):
    """A connection that stays stoppable (tlindex.stopping): an authorizer or progress handler set on it is made safe
    for a stop (`callback`), and a progress handler of one's own still ends its statement when a stop comes; none
    is the stop's handler again."""

    def set_authorizer(self, authorizer_callback):
        super().set_authorizer(None if authorizer_callback is None else callback(authorizer_callback))

    def set_progress_handler(self, progress_handler, n):
        if progress_handler is None:
            super().set_progress_handler(STOP.progress, PROGRESS_STEPS)
        else:
            super().set_progress_handler(callback(lambda: STOP.pending or progress_handler()), n)


def connect(database: str | Path, **kwargs) -> sqlite3.Connection:
    """sqlite3.connect, limited and stoppable (a stop interrupts its statement, and one that comes while SQLite calls
    an authorizer or progress handler set on it is raised once SQLite has returned: StoppableConnection): the only
    place tlindex opens a SQLite connection."""
    conn = limit_connection(sqlite3.connect(database, factory=StoppableConnection, **kwargs))
    conn.set_progress_handler(None, 0)  # (none: the stop's, STOP.progress)
    return conn


def too_big_message(error: sqlite3.Error) -> str | None:
    """One line for SQLite's "string or blob too big", naming the limit; None for any other error."""
    if str(error) != "string or blob too big":
        return None
    return (f"a value would exceed {MAX_VALUE_BYTES >> 20} MiB, the longest string or blob a statement may "
            f"build here (longer than any value the database stores)")
