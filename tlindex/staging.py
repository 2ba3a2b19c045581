"""The writer's first half: rows of one ingest task into a private staging database.

Workers parse logs in parallel; each writes its rows into its own temporary
SQLite file (same schema, no indexes, no journal). The main process then merges
a finished staging database into traces.db in one transaction (tlindex.merge),
so an interrupted ingest never leaves half a source behind.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .db import apply_schema
from .tables import COLUMNS

FLUSH_ROWS = 1000
FLUSH_BYTES = 2 << 20


class StagingWriter:
    """Buffer rows per table and write them with executemany in one transaction."""

    def __init__(self, path: str | Path, main_db: str | Path | None = None):
        self.path = Path(path)
        # Payloads the main database holds already (other ranks' graphs, an earlier
        # run's code) are not written again: a read-only look-up is far cheaper.
        self.main = sqlite3.connect(f"file:{main_db}?mode=ro", uri=True) if main_db else None
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=OFF")
        self.conn.execute("PRAGMA synchronous=OFF")
        apply_schema(self.conn)
        for (index,) in self.conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL").fetchall():
            self.conn.execute(f"DROP INDEX {index}")
        self.conn.execute("BEGIN")
        self.buffers: dict[str, list[tuple]] = {table: [] for table in COLUMNS}
        verb = {"payloads": "INSERT OR IGNORE", "strings": "INSERT OR REPLACE"}
        self.statements = {
            table: f"{verb.get(table, 'INSERT')} INTO {table} ({', '.join(cols)}) "
                   f"VALUES ({', '.join('?' * len(cols))})"
            for table, cols in COLUMNS.items()
        }
        self.buffered_bytes = 0

    def add(self, table: str, row: tuple) -> None:
        """Queue one row (a tuple in COLUMNS[table] order)."""
        buffer = self.buffers[table]
        buffer.append(row)
        if len(buffer) >= FLUSH_ROWS:
            self.flush(table)

    def add_payload(self, digest: str, text: str, size: int) -> None:
        """Queue one payload unless the main database has it; flushed by size, not only by count."""
        if self.main is not None and self.main.execute(
                "SELECT 1 FROM payloads WHERE hash = ?", (digest,)).fetchone():
            return
        self.buffers["payloads"].append((digest, size, text))
        self.buffered_bytes += size
        if self.buffered_bytes >= FLUSH_BYTES or len(self.buffers["payloads"]) >= FLUSH_ROWS:
            self.flush("payloads")

    def flush(self, table: str | None = None) -> None:
        for name in [table] if table else list(self.buffers):
            rows = self.buffers[name]
            if rows:
                self.conn.executemany(self.statements[name], rows)
                rows.clear()
                if name == "payloads":
                    self.buffered_bytes = 0

    def close(self) -> None:
        self.flush()
        self.conn.execute("COMMIT")
        self.conn.close()
        if self.main is not None:
            self.main.close()
