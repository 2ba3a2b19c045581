"""What a team's server says of the logs posted to it: an upload's status, the queue, the uploads of a run."""

from __future__ import annotations

import json
import sqlite3

from tlindex.answers.sql import dicts, one


def upload(conn: sqlite3.Connection, upload_id: int) -> dict | None:
    """An upload's row, its facts and verdict read (None: no such upload)."""
    row = one(conn, "SELECT * FROM uploads WHERE id = ?", (upload_id,))
    if row is None:
        return None
    row["facts"] = json.loads(row["facts"]) if row["facts"] else {}
    row["verdict"] = json.loads(row["verdict"]) if row["verdict"] else None
    return row


def queued(conn: sqlite3.Connection) -> list[dict]:
    """The uploads waiting to be ingested, oldest first."""
    return dicts(conn.execute("SELECT id, digest FROM uploads WHERE state = 'queued' ORDER BY id"))


def waiting(conn: sqlite3.Connection) -> int:
    """How many uploads are queued or being ingested."""
    return conn.execute("SELECT count(*) FROM uploads WHERE state IN ('queued', 'ingesting')").fetchone()[0]


def of_runs(conn: sqlite3.Connection, run_ids: list[int]) -> list[str]:
    """The digests of the uploads that became these runs."""
    marks = ",".join("?" * len(run_ids))
    return [row[0] for row in conn.execute(f"SELECT digest FROM uploads WHERE run_id IN ({marks})", run_ids)]


def recorded(conn: sqlite3.Connection) -> set[str]:
    """The digests of every upload the database records."""
    return {row[0] for row in conn.execute("SELECT digest FROM uploads")}
