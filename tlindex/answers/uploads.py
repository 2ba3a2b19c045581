"""What a team's server says of the logs posted to it: an upload's status, the queue, the uploads of a run."""

from __future__ import annotations

import json
import sqlite3

from tlindex.answers.sql import dicts, one


def upload(conn: sqlite3.Connection, upload_id: int) -> dict | None:
    """An upload's row, its facts read (None: no such upload)."""
    row = one(conn, "SELECT * FROM uploads WHERE id = ?", (upload_id,))
    if row is None:
        return None
    row["facts"] = json.loads(row["facts"]) if row["facts"] else {}
    return row


def queued(conn: sqlite3.Connection) -> list[dict]:
    """The uploads waiting to be ingested, oldest first."""
    return dicts(conn.execute("SELECT id, digest FROM uploads WHERE state = 'queued' ORDER BY id"))


def waiting(conn: sqlite3.Connection, before: int | None = None) -> int:
    """How many uploads are queued or being ingested (received before upload `before`)."""
    return conn.execute("SELECT count(*) FROM uploads WHERE state IN ('queued', 'ingesting') AND id < ?",
                        (before if before is not None else 1 << 62,)).fetchone()[0]


def posted_as(conn: sqlite3.Connection, run_id: int) -> list[dict]:
    """The uploads a run was made of: their id, the file's name, when they arrived and the token that posted them."""
    return dicts(conn.execute("SELECT id, name, received_at, token FROM uploads WHERE run_id = ? ORDER BY id",
                              (run_id,)))


def of_runs(conn: sqlite3.Connection, run_ids: list[int]) -> list[str]:
    """The digests of the uploads that became these runs."""
    marks = ",".join("?" * len(run_ids))
    return [row[0] for row in conn.execute(f"SELECT digest FROM uploads WHERE run_id IN ({marks})", run_ids)]


def recorded(conn: sqlite3.Connection) -> set[str]:
    """The digests of every upload the database records."""
    return {row[0] for row in conn.execute("SELECT digest FROM uploads")}


def judged(conn: sqlite3.Connection, run: int, baseline: str | None, fail_on: str | None,
           allow_unjudged: bool) -> dict | None:
    """The gate's verdict on an upload's run, judged now (the baseline named as everywhere): {exit_code, lines}, a
    bound or baseline that cannot be read said in its lines; None when no bound was asked for."""
    from tlindex.answers.gate import gate, lines, parse_fail_on
    from tlindex.answers.names import resolve_run
    from tlindex.errors import TlindexError

    if not fail_on:
        return None
    try:
        base = resolve_run(conn, str(baseline))["id"] if baseline else None
        verdict = gate(conn, run, base, parse_fail_on(fail_on), why="uploaded", allow_unjudged=allow_unjudged)
    except TlindexError as error:
        return {"exit_code": 1, "lines": [f"gate: {error}"]}
    return {"exit_code": verdict.exit_code, "lines": lines(verdict)}
