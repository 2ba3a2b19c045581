"""Rows written into a staging database attached to the main one (as `staging`) while it is fitted."""

from __future__ import annotations

import sqlite3

from .tables import COLUMNS


def insert_rows(conn: sqlite3.Connection, table: str, rows: list[tuple]) -> None:
    columns = COLUMNS[table]
    conn.executemany(f"INSERT INTO staging.{table} ({', '.join(columns)}) "
                     f"VALUES ({', '.join('?' * len(columns))})", rows)


def next_staging_id(conn: sqlite3.Connection, table: str) -> int:
    """The first id not used yet in a staging table."""
    return conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM staging.{table}").fetchone()[0]
