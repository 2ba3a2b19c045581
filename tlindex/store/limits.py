"""The one limit every connection tlindex opens or serves carries: how long a value a statement may build.

SQLite checks SQLITE_LIMIT_LENGTH wherever a string or blob grows (printf, replace, hex, ||,
group_concat, a function's result, a row written or read), so with it set no statement can build a
value past MAX_VALUE_BYTES, whatever functions it calls: `printf('%.*c', 999999999, 'x')` answers
NULL at once instead of building 1 GB, and `hex()` of a long text is refused before it allocates.
Each step of a statement is then bounded too, which is what lets a progress handler's time limit
(Datasette's) hold: it is only called between steps.

Open connections with `connect` (it takes sqlite3.connect's arguments), or pass one made elsewhere
(Datasette's) to `limit_connection`; `tests/test_huge_values.py` fails for a `sqlite3.connect(` made
anywhere else in tlindex or its plugin.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

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


def connect(database: str | Path, **kwargs) -> sqlite3.Connection:
    """sqlite3.connect, limited: the only place tlindex opens a SQLite connection."""
    return limit_connection(sqlite3.connect(database, **kwargs))


def too_big_message(error: sqlite3.Error) -> str | None:
    """One line for SQLite's "string or blob too big", naming the limit; None for any other error."""
    if str(error) != "string or blob too big":
        return None
    return (f"a value would exceed {MAX_VALUE_BYTES >> 20} MiB, the longest string or blob a statement may "
            f"build here (longer than any value the database stores)")
