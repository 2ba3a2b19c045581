"""Rows as dicts: what every answer's SQL returns."""

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
