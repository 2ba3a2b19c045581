"""Artifacts and payloads as their pages read them: an artifact with its record, compile and payload; a payload by
its hash and the artifacts that carry it; the start of an artifact's payload for a diff; a payload's text."""

from __future__ import annotations

import sqlite3

from tlindex.answers.sql import dicts, one


def artifact_row(conn: sqlite3.Connection, artifact: int) -> dict | None:
    """An artifact with its payload's text, its record's line, time and log, and its compile; None when none."""
    return one(conn, """
        SELECT a.*, p.text, e.line, e.time, e.source_id, f.name AS file, c.compile_id, c.co_name, c.run_id
        FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id JOIN sources s ON s.id = e.source_id
        JOIN files f ON f.id = s.file_id LEFT JOIN payloads p ON p.hash = a.payload
        LEFT JOIN compiles c ON c.id = a.compile WHERE a.id = ?""", (artifact,))


def payload_row(conn: sqlite3.Connection, digest: str) -> dict | None:
    """A payload's hash, size and text; None when no payload has this hash."""
    return one(conn, "SELECT hash, size, text FROM payloads WHERE hash = ?", (digest,))


def payload_text(conn: sqlite3.Connection, digest: str) -> str | None:
    """A payload's text; None when no payload has this hash."""
    row = conn.execute("SELECT text FROM payloads WHERE hash = ?", (digest,)).fetchone()
    return row[0] if row else None


def payload_artifacts(conn: sqlite3.Connection, digest: str, limit: int) -> list[dict]:
    """The first `limit` artifacts that carry a payload, each with its compile."""
    return dicts(conn.execute("""
        SELECT a.id, a.kind, a.name, c.compile_id, c.id AS compile, c.rank FROM artifacts a
        LEFT JOIN compiles c ON c.id = a.compile WHERE a.payload = ? ORDER BY a.id LIMIT ?""",
        (digest, limit)))


def artifact_start(conn: sqlite3.Connection, artifact: int, chars: int) -> dict | None:
    """An artifact, its compile and run, and the first `chars` characters of its payload (`text`); None when none."""
    return one(conn, """
        SELECT a.id, a.kind, a.name, a.encoding, a.size, a.payload, c.id AS compile, c.compile_id, c.rank,
               c.co_name, c.status, c.run_id, r.label AS run_label, substr(p.text, 1, ?) AS text
        FROM artifacts a LEFT JOIN compiles c ON c.id = a.compile LEFT JOIN runs r ON r.id = c.run_id
        LEFT JOIN payloads p ON p.hash = a.payload WHERE a.id = ?""", (chars, artifact))
