"""The limits every connection tlindex opens or serves carries: how long a value a statement may build, and how long
one step may run (tlindex.store.costly); and in a process that answers requests, how much SQLite may hold at once.

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

from tlindex.store import costly

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
    return bound_time(conn)


def bound_time(conn: sqlite3.Connection) -> sqlite3.Connection:
    """What one step of a statement may cost in time (tlindex.store.costly: the functions whose cost is the product
    of their arguments' lengths); it changes no answer, so Datasette sets it on every database it serves."""
    return costly.register(conn, side_connection, MAX_VALUE_BYTES)


# What SQLite may hold at once in a process that answers requests (the server, `tlindex query`): each value is
# bounded by MAX_VALUE_BYTES, but a statement can hold many (a GROUP BY of fifty 60 MB values merged its sorted
# runs at 3.2 GB). Sixteen values of the limit: room for Datasette's three request threads at the four values a
# call holds at most (tests/test_huge_values.py); past it, a statement fails with "out of memory", the server lives.
HEAP_LIMIT_BYTES = 16 * MAX_VALUE_BYTES


def heap_message() -> str:
    """What the heap limit refused, in one line."""
    return (f"the statement would hold more than {HEAP_LIMIT_BYTES >> 20} MiB at once, the most SQLite may hold here "
            f"(many long values: keep fewer, or shorter ones)")


def cap_heap(conn: sqlite3.Connection) -> None:
    """SQLite's hard heap limit for the whole process, set (or lowered) to HEAP_LIMIT_BYTES."""
    current = conn.execute("PRAGMA hard_heap_limit").fetchone()[0]
    if not current or current > HEAP_LIMIT_BYTES:
        conn.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")


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
    marks = "".join(", ?" for _ in args)
    return side_connection().execute(f"SELECT printf(?{marks})", (fmt, *args)).fetchone()[0]


def side_connection() -> sqlite3.Connection:
    """This thread's plain in-memory connection, limited in length: SQLite's own functions, where a function of the
    same name takes their place on the connections tlindex opens (bounded_printf, tlindex.store.costly)."""
    side = getattr(_SIDE, "conn", None)
    if side is None:
        side = _SIDE.conn = sqlite3.connect(":memory:")
        side.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    return side


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
