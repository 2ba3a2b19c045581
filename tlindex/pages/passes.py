"""The pass-by-pass page: a compile's (or one vLLM piece compile's) graph snapshots in order, each against the
one before it."""

from __future__ import annotations

import sqlite3

from tlindex.answers.artifacts import payload_text
from tlindex.answers.passes import segment
from tlindex.errors import NotFound
from tlindex.pages.hunks import changed_lines, hunks
from tlindex.pages.languages import language
from tlindex.pages.rows import Args


def _text(conn: sqlite3.Connection, digest: str | None) -> str:
    return (payload_text(conn, digest) if digest else None) or ""


def _ways(conn: sqlite3.Connection, compile: int | None = None, piece: int | None = None) -> dict | None:
    found = segment(conn, compile, piece)
    if found is None:
        return None
    ways = []
    for way in found.ways:
        steps = []
        for step in way:
            shown = {"step": step, "hunks": None, "changed": 0, "lang": None}
            if step.compared:
                after, before = _text(conn, step.payload), _text(conn, step.before_payload)
                shown["lang"] = language(step.kind, step.name, None, after)
                shown["hunks"] = hunks(before, after)
                shown["changed"] = changed_lines(shown["hunks"])
            steps.append(shown)
        ways.append(steps)
    return {"compile": found.compile, "piece": found.piece, "pieces": found.pieces, "ways": ways}


def passes_data(conn: sqlite3.Connection, args: Args, compile: int) -> dict:
    """The graph snapshots of a compile, outside its vLLM pieces (each piece has its own page)."""
    found = _ways(conn, compile=compile)
    if found is None:
        raise NotFound(f"No compile {compile}")
    return found


def piece_passes_data(conn: sqlite3.Connection, args: Args, piece: int) -> dict:
    """The graph snapshots of one vLLM piece compile."""
    found = _ways(conn, piece=piece)
    if found is None:
        raise NotFound(f"No piece compile {piece}")
    return found
