"""Open a tlindex database and bring its schema up to date."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from .resources import schema_files

if TYPE_CHECKING:
    import sqlite_utils

MIGRATIONS_TABLE = "_tlindex_migrations"


def apply_schema(conn: sqlite3.Connection) -> list[str]:
    """Apply every schema/NNN_*.sql file not yet applied; return the names applied.

    Each file is one migration, recorded in _tlindex_migrations, so a database
    made by an older tlindex is upgraded in place the next time it is opened.
    """
    conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT)")
    done = {row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")}
    applied = []
    for path in schema_files():
        if path.stem in done:
            continue
        # executescript commits first; wrap the file in its own transaction.
        conn.executescript("BEGIN;\n" + path.read_text() + f"\nINSERT INTO {MIGRATIONS_TABLE} VALUES "
                           f"('{path.stem}', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));\nCOMMIT;")
        applied.append(path.stem)
    return applied


def open_db(path: str | Path) -> "sqlite_utils.Database":
    """Open (creating if needed) a tlindex database with the current schema, in WAL mode.

    WAL lets Datasette read the database while an ingest writes to it.
    """
    import sqlite_utils  # not in workers: they only need apply_schema

    db = sqlite_utils.Database(path)
    db.conn.execute("PRAGMA journal_mode=WAL")
    db.conn.execute("PRAGMA synchronous=NORMAL")
    apply_schema(db.conn)
    return db
