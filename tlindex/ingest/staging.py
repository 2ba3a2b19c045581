"""The writer's first half: rows of one ingest task into a private staging database.

Workers parse logs in parallel; each writes its rows into its own temporary
SQLite file (same schema, no indexes, no journal). The main process then merges
a finished staging database into traces.db in one transaction (tlindex.ingest.merge),
so an interrupted ingest never leaves half a source behind.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Collection

from tlindex.ingest.reader import MAX_RECORD_BYTES
from tlindex.store.compression import pack, register
from tlindex.store.db import staging_image
from tlindex.store.limits import connect
from tlindex.store.tables import COLUMNS

# Buffers a worker holds before writing them (memory is the sum over workers): 500 rows per table, 1 MB
# of payload text (held as text until the flush looks their hashes up in the main database in one query,
# and compresses the rest), 512 KB of SQLite page cache per connection. Halving them from 1,000 rows, 2 MB
# and the default 2 MB cache took ~3.5 MB off each worker at no measurable cost in time.
FLUSH_ROWS = 500
FLUSH_BYTES = 1 << 20
CACHE_KB = 512


def storable(value: object) -> object:
    """A value SQLite can bind: ints past 64 bits, lists and objects become their text."""
    if value is None or isinstance(value, (str, float, bytes)):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 63) else str(value)
    try:
        return json.dumps(value, default=repr)
    except (ValueError, RecursionError):
        return repr(value)


def cut_text(text: str) -> str:
    """The text's first MAX_RECORD_BYTES of UTF-8 (a character cut in two dropped)."""
    return text.encode("utf-8")[:MAX_RECORD_BYTES].decode("utf-8", "ignore")


def within_record(row: tuple) -> tuple:
    """The row, its longest texts and blobs NULL until the rest fits in MAX_RECORD_BYTES.

    Every connection refuses a value (or row) past tlindex.store.limits.MAX_VALUE_BYTES, so that what is
    stored can always be read. Values read from one record fit; only a value the normalizer made longer
    than its record (JSON written again: `1e15` is `1000000000000000.0`) can be refused, and is then not
    stored rather than failing the ingest."""
    sizes = {i: len(v.encode("utf-8", "surrogatepass")) if isinstance(v, str) else len(v)
             for i, v in enumerate(row) if isinstance(v, (str, bytes))}
    values, total = list(row), sum(sizes.values())
    for i in sorted(sizes, key=sizes.get, reverse=True):
        if total <= MAX_RECORD_BYTES:
            break
        values[i], total = None, total - sizes[i]
    return tuple(values)


class StagingWriter:
    """Buffer rows per table and write them with executemany in one transaction."""

    def __init__(self, path: str | Path, main_db: str | Path | None = None, staged_before: Collection[str] = ()):
        """`staged_before`: payloads that earlier chunks of the same file staged (merged before this one is), with
        `main_db` (then payloads may be left to the main database): not staged again."""
        self.path = Path(path)
        self.staged_before = staged_before if main_db else ()
        self.staged: list[str] = []  # the payloads this writer staged
        # Payloads the main database holds already (other ranks' graphs, an earlier
        # run's code) are not written again: a read-only look-up is far cheaper.
        self.main = connect(f"file:{main_db}?mode=ro", uri=True) if main_db else None
        self.conn = register(connect(self.path, isolation_level=None))
        for conn in filter(None, (self.main, self.conn)):
            conn.execute(f"PRAGMA cache_size = -{CACHE_KB}")
        self.conn.execute("PRAGMA journal_mode=OFF")
        self.conn.execute("PRAGMA synchronous=OFF")
        staging_image().backup(self.conn)  # the schema without its indexes
        self.conn.execute("BEGIN")
        self.buffers: dict[str, list[tuple]] = {table: [] for table in COLUMNS}
        verb = {"payload_data": "INSERT OR IGNORE", "strings": "INSERT OR REPLACE"}
        self.statements = {
            table: f"{verb.get(table, 'INSERT')} INTO {table} ({', '.join(cols)}) "
                   f"VALUES ({', '.join('?' * len(cols))})"
            for table, cols in COLUMNS.items()
        }
        self.payloads: list[tuple[str, str, int]] = []  # (hash, text, size), looked up and compressed at the flush
        self.buffered_bytes = 0  # of the queued payloads

    def add(self, table: str, row: tuple) -> None:
        """Queue one row (a tuple in COLUMNS[table] order)."""
        buffer = self.buffers[table]
        buffer.append(row)
        if len(buffer) >= FLUSH_ROWS:
            self.flush(table)

    def add_payload(self, digest: str, text: str, size: int) -> None:
        """Queue one payload; flushed by size, not only by count."""
        self.payloads.append((digest, text, size))
        self.buffered_bytes += size
        if self.buffered_bytes >= FLUSH_BYTES or len(self.payloads) >= FLUSH_ROWS:
            self.flush("payload_data")

    def _pack_payloads(self) -> None:
        """The queued payloads the main database lacks (one look-up per batch), compressed, as rows."""
        queued, self.payloads = self.payloads, []
        self.buffered_bytes = 0
        before = self.staged_before
        if before:
            queued = [payload for payload in queued if payload[0] not in before]
        known = self._known([digest for digest, _, _ in queued]) if self.main is not None else ()
        rows = self.buffers["payload_data"]
        for digest, text, size in queued:
            if digest in known:
                continue
            self.staged.append(digest)
            text_size, data = pack(text)
            if text_size > MAX_RECORD_BYTES:  # only a text widened past its record (U+FFFD for invalid UTF-8 bytes)
                text_size, data = pack(cut_text(text))
            rows.append((digest, size, text_size, data))

    def _known(self, digests: list[str]) -> set[str]:
        """Which of these payloads the main database holds."""
        found: set[str] = set()
        for at in range(0, len(digests), FLUSH_ROWS):
            batch = digests[at:at + FLUSH_ROWS]
            found.update(digest for (digest,) in self.main.execute(
                f"SELECT hash FROM payload_data WHERE hash IN ({', '.join('?' * len(batch))})", batch))
        return found

    def flush(self, table: str | None = None) -> None:
        if self.payloads and table in (None, "payload_data"):
            self._pack_payloads()
        for name in [table] if table else list(self.buffers):
            rows = self.buffers[name]
            if rows:
                try:
                    self.conn.executemany(self.statements[name], rows)
                except (OverflowError, sqlite3.InterfaceError, sqlite3.ProgrammingError, sqlite3.DataError):
                    # A value SQLite cannot bind (an int past 64 bits, a list where a log had a
                    # number) or one past the connection's limit (DataError: see within_record): the
                    # batch again, such values stored as their text, too long ones NULL. The rows before
                    # the bad one are in already (no journal: no rollback), so the retry replaces
                    # by key; `volume` has no key, but its values come from the reader, all bindable.
                    retry = self.statements[name].replace("INSERT INTO", "INSERT OR REPLACE INTO", 1)
                    self.conn.executemany(retry, [within_record(tuple(map(storable, row))) for row in rows])
                rows.clear()

    def close(self) -> None:
        self.flush()
        self.conn.execute("COMMIT")
        self.discard()

    def discard(self) -> None:
        """Close the connections (what was not committed is dropped)."""
        self.conn.close()
        if self.main is not None:
            self.main.close()


# Rows written into a staging database attached to the main one (as `staging`) while it is fitted.
def insert_rows(conn: sqlite3.Connection, table: str, rows: list[tuple]) -> None:
    columns = COLUMNS[table]
    conn.executemany(f"INSERT INTO staging.{table} ({', '.join(columns)}) "
                     f"VALUES ({', '.join('?' * len(columns))})", rows)


def next_staging_id(conn: sqlite3.Connection, table: str) -> int:
    """The first id not used yet in a staging table."""
    return conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM staging.{table}").fetchone()[0]
