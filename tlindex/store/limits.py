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

import math
import re
import sqlite3
import threading
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
    """Bound the length of any string or blob the connection's statements build, read or write, and the
    time printf spends on a width or precision no value could have (bounded_printf)."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    for name in ("printf", "format"):  # an application's function of a built-in's name takes its place
        conn.create_function(name, -1, bounded_printf, deterministic=True)
    return conn


# A conversion of SQLite's printf: %, flags, width (digits or *), precision (.digits or .*), its type.
CONVERSION_RE = re.compile(r"%[-+ 0#,!]*(\*|\d+)?(?:\.(\*|\d+))?(.)", re.S)
_SIDE = threading.local()  # a plain connection per thread, whose own printf does the formatting


def _number(value: object) -> int:
    """A '*' argument as SQLite reads it: an integer, a number's integer part, a text's leading integer."""
    if isinstance(value, bool) or value is None:
        return int(bool(value))
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 1 << 62
    match = re.match(r"\s*([-+]?\d+)", value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value))
    return int(match.group(1)) if match else 0


def bounded_printf(fmt: object, *args: object) -> object:
    """SQLite's printf, but a width or precision past MAX_VALUE_BYTES answers NULL at once, as SQLite answers a
    value past the limit. SQLite 3.40 repeats %c one character per turn, up to its precision, and goes on
    turning once the value has passed the limit: `printf('%.*c', 2000000000, 'x')` spent 3.5 s building
    nothing, out of reach of a time limit (a progress handler runs between steps, never within one)."""
    if isinstance(fmt, str) and "%" not in fmt:
        return fmt  # nothing to convert (a long text: no copy made through the other connection)
    if isinstance(fmt, bytes) and b"%" not in fmt:
        return fmt.decode("utf-8", "replace")  # a blob's bytes, as the text printf makes of them
    if isinstance(fmt, (str, bytes)):
        text = fmt.decode("utf-8", "replace") if isinstance(fmt, bytes) else fmt
        used = total = 0
        for width, precision, kind in CONVERSION_RE.findall(text):
            for part in (width, precision):
                if part == "*":
                    size = _number(args[used]) if used < len(args) else 0
                    used += 1
                else:
                    size = int(part) if part else 0
                total += min(abs(size), 1 << 62)
                if total > MAX_VALUE_BYTES:  # together past the limit: each would still count to its own
                    return None
            used += kind != "%"
    side = getattr(_SIDE, "conn", None)
    if side is None:
        side = _SIDE.conn = sqlite3.connect(":memory:")
        side.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    marks = "".join(", ?" for _ in args)
    return side.execute(f"SELECT printf(?{marks})", (fmt, *args)).fetchone()[0]


def connect(database: str | Path, **kwargs) -> sqlite3.Connection:
    """sqlite3.connect, limited: the only place tlindex opens a SQLite connection."""
    return limit_connection(sqlite3.connect(database, **kwargs))


def too_big_message(error: sqlite3.Error) -> str | None:
    """One line for SQLite's "string or blob too big", naming the limit; None for any other error."""
    if str(error) != "string or blob too big":
        return None
    return (f"a value would exceed {MAX_VALUE_BYTES >> 20} MiB, the longest string or blob a statement may "
            f"build here (longer than any value the database stores)")


def fits_the_limit(conn: sqlite3.Connection) -> bool:
    """Whether every value a connection's database holds is known to fit the limit: a tlindex database's (the
    ingest stores none longer), an in-memory one's (Datasette's _memory and _internal hold nothing that long),
    one whose schema cannot be read (nothing can be read from it); not a database file tlindex did not make."""
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_tlindex_migrations'").fetchone():
            return True
        return not any(file for _, name, file in conn.execute("PRAGMA database_list") if name == "main")
    except sqlite3.Error:
        return True
