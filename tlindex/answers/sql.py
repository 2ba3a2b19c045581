"""Rows as dicts: what every answer's SQL returns; a condition several answers write alike."""

from __future__ import annotations

import sqlite3


def dicts(cursor: sqlite3.Cursor) -> list[dict]:
    """A cursor's rows as dicts, by column name."""
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def one(conn: sqlite3.Connection, sql: str, params=()) -> dict | None:
    """The first row of a query as a dict, or None."""
    found = dicts(conn.execute(sql, params))
    return found[0] if found else None


def of_one_rank(column: str, rank: int | None) -> tuple[str, tuple]:
    """The condition that keeps one rank's rows (none for every rank), written so that SQLite answers it through the
    (run_id, rank) index: `? IS NULL OR rank = ?` read every rank's rows of the run for each rank's page."""
    return ("", ()) if rank is None else (f" AND {column} = ?", (rank,))
