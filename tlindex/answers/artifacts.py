"""Artifacts and payloads as their pages read them: an artifact with its record, compile and payload; a payload by
its hash and the artifacts that carry it; the start of an artifact's payload for a diff; a payload's text; the wrappers
torch 2.15's aot_autograd_runtime_wrappers holds."""

from __future__ import annotations

import re
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


RUNTIME_WRAPPERS = "aot_autograd_runtime_wrappers"  # torch 2.15: the AOT runtime wrappers 2.14 logged one by one
WRAPPER_HEAD_RE = re.compile(r"^# (\w+)$", re.M)  # each wrapper's code starts with `# <its 2.14 artifact name>`


def wrapper_sections(text: str | None) -> list[dict]:
    """The wrappers an aot_autograd_runtime_wrappers payload holds, in order: {"name", "line"} (the line its head is
    on), named as torch 2.14 named their own artifacts (runtime_wrapper_orchestration, backward_prologue, ...)."""
    return [{"name": match.group(1), "line": text.count("\n", 0, match.start()) + 1}
            for match in WRAPPER_HEAD_RE.finditer(text or "")]


def runtime_wrappers(conn: sqlite3.Connection, artifacts: list[dict]) -> dict[int, list[dict]]:
    """The wrappers of each aot_autograd_runtime_wrappers artifact among `artifacts` (rows with id, name, payload)."""
    return {a["id"]: wrapper_sections(payload_text(conn, a["payload"])) for a in artifacts
            if a["name"] == RUNTIME_WRAPPERS and a["payload"]}


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
