"""Payload text stored compressed, in the format of SQLite's archive ("sqlar") functions.

`payload_data.data` holds the payload's UTF-8 text zlib-compressed, or the text itself when
compressing would not make it smaller; `text_size` is its length in bytes. That is exactly what
the sqlite3 shell's built-in `sqlar_uncompress(data, size)` reads, so the view

    payloads(id, hash, size, text) = CAST(sqlar_uncompress(data, text_size) AS TEXT)

works unchanged in the plain `sqlite3` shell; tlindex's connections and the Datasette plugin
register the same function for Python's sqlite3, which lacks the shell's. ISA-L may encode one
text in two valid ways from one run to the next: compare payloads by text, not by `data`.

The registered `sqlar_uncompress` is bounded: any SQL can call it (Datasette's SQL page, `tlindex
query`), so it never inflates more than the largest payload the database holds (at least
INFLATE_FLOOR; looked up again, by the index of migration 008, only when a call asks for more), and
returns NULL when the data does not inflate to exactly the size asked for, as the shell does. A
deflate bomb, nested or not, costs at most that size per call.
"""

from __future__ import annotations

import sqlite3
import zlib

from tlindex.stopping import callback

try:  # ISA-L writes the same zlib streams about 3x faster than zlib itself (and a little smaller)
    from isal import isal_zlib as _deflater

    LEVEL = 2  # ISA-L's levels are 0-3: on real logs' payloads 4.0x smaller at ~300 MB/s per core
except ImportError:  # no wheel for this platform: the standard library's zlib, same format
    _deflater = zlib
    LEVEL = 1  # 3.9x smaller at ~80-90 MB/s per core; level 6 gains 10 % at half the speed


def pack(text: str) -> tuple[int, bytes]:
    """(byte length of the text, what `payload_data.data` stores for it)."""
    raw = text.encode("utf-8")
    packed = _deflater.compress(raw, LEVEL)
    return len(raw), packed if len(packed) < len(raw) else raw


INFLATE_FLOOR = 1 << 20  # bytes sqlar_uncompress may always inflate, whatever the database holds


class InflateRefused(ValueError):
    """A call of sqlar_uncompress that asks for more than any payload stored."""


def sqlar_uncompress(data: bytes | str | None, size: int | None, limit: int | None = None) -> bytes | str | None:
    """The sqlite3 shell's function: `data` as is when its length is `size`, else zlib-inflated to exactly
    `size` bytes (NULL when it does not inflate to that). `limit` bounds `size` (InflateRefused past it)."""
    if data is None or isinstance(data, str) or size is None or len(data) == size:
        return data
    if not isinstance(size, int) or size < 0 or (limit is not None and size > limit):
        raise InflateRefused(f"sqlar_uncompress: refused to inflate {size!r} bytes (at most {limit:,}: the "
                             f"largest payload stored)")
    try:
        inflated = zlib.decompressobj().decompress(data, size + 1)
    except zlib.error:
        return None  # as the shell answers for data it cannot inflate
    return inflated if len(inflated) == size else None


class _BoundedInflate:
    """sqlar_uncompress for one connection, bounded by the largest payload its database holds."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.limit = 0

    def largest(self) -> int:
        try:
            (largest,) = self.conn.execute("SELECT max(text_size) FROM main.payload_data").fetchone()
        except sqlite3.Error:  # a database without payloads (a staging file being created, a foreign one)
            largest = None
        return max(largest or 0, INFLATE_FLOOR)

    def __call__(self, data, size):
        if isinstance(size, int) and size > self.limit:  # more than seen so far: a new payload, or a bomb
            self.limit = self.largest()
        return sqlar_uncompress(data, size, self.limit)


def sqlar_compress(data: bytes | str | None) -> bytes | str | None:
    """The sqlite3 shell's function: zlib-compressed when that is smaller, else as is."""
    if data is None:
        return None
    raw = data.encode("utf-8") if isinstance(data, str) else data
    packed = _deflater.compress(raw, LEVEL)
    return packed if len(packed) < len(raw) else data


def register(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Give a connection the sqlar functions the `payloads` view (and migration 004) use (a stop that comes while one
    runs ends its statement: tlindex.stopping.callback)."""
    conn.create_function("sqlar_uncompress", 2, callback(_BoundedInflate(conn)), deterministic=True)
    conn.create_function("sqlar_compress", 1, callback(sqlar_compress), deterministic=True)
    return conn
