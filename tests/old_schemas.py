"""Databases as an earlier tlindex made them: the migrations up to N applied, then the rows of a fresh ingest of real
logs copied in, table by table, in the columns that schema has (an ingest by that tlindex would have written them).

`older_database(fresh, target, n)` makes one; `EARLIER` lists every N before the last migration. What that
tlindex could not have stored (a column or table added since) is missing or empty, as it would be.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tlindex.store import redact
from tlindex.store.compression import register
from tlindex.store.db import _migrate
from tlindex.store.limits import connect
from tlindex.store.resources import schema_files

MIGRATIONS = [path.stem for path in schema_files()]
EARLIER = MIGRATIONS[:-1]


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA {schema}.table_xinfo({table})") if row[5] >= 0 and row[6] == 0]


def older_database(fresh: Path, target: Path, last: str) -> Path:
    """A database made by the migrations up to `last`, holding the fresh database's rows that its schema can hold."""
    files = schema_files()[:MIGRATIONS.index(last) + 1]
    conn = register(connect(str(target)))
    redact.register(conn)  # the functions migration 016 redacts with (apply_schema registers them too)
    conn.isolation_level = None
    _migrate(conn, files, whole=False, steps=None)
    conn.execute("ATTACH DATABASE ? AS fresh", (f"file:{fresh}?mode=ro",))
    objects = {name for (name,) in conn.execute("SELECT name FROM fresh.sqlite_master WHERE type IN ('table', 'view')")}
    tables = [name for (name, sql) in conn.execute(
        "SELECT name, sql FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' AND name != "
        "'_tlindex_migrations'") if "VIRTUAL TABLE" not in (sql or "") and not _shadow(conn, name)]
    conn.execute("BEGIN")
    for table in tables:
        if table not in objects:
            continue
        source = set(_columns(conn, "fresh", table)) if _is_table(conn, table) else _view_columns(conn, table)
        shared = [c for c in _columns(conn, "main", table) if c in source]
        names = ", ".join(f'"{c}"' for c in shared)
        conn.execute(f'INSERT INTO main."{table}" ({names}) SELECT {names} FROM fresh."{table}"')
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE fresh")
    conn.close()
    return target


def _is_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT type FROM fresh.sqlite_master WHERE name = ?", (name,)).fetchone()[0] == "table"


def _view_columns(conn: sqlite3.Connection, name: str) -> set[str]:
    return {row[0] for row in conn.execute(f'SELECT * FROM fresh."{name}" LIMIT 0').description}


def _shadow(conn: sqlite3.Connection, name: str) -> bool:
    """A full-text index's own table (its rows are the index's: made again, not copied)."""
    return any(name.startswith(f"{vt}_") for (vt,) in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'"))
