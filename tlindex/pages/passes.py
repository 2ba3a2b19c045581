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
                shown.update(_compared(conn, step))
            steps.append(shown)
        ways.append(steps)
    return {"compile": found.compile, "piece": found.piece, "pieces": found.pieces, "ways": ways}


COMPARED: dict[tuple, dict] = {}  # two snapshots compared, by their payloads' hashes (which name their content):
COMPARED_KEPT = 64  # every rank of a job logs the same graphs, so a report compares each pair once per process


def _compared(conn: sqlite3.Connection, step) -> dict:
    """A snapshot against the one before it: its language, its hunks, how many lines changed."""
    key = (step.kind, step.name, step.before_payload, step.payload)
    found = COMPARED.get(key) if step.payload and step.before_payload else None
    if found is None:
        after, before = _text(conn, step.payload), _text(conn, step.before_payload)
        found = {"lang": language(step.kind, step.name, None, after), "hunks": hunks(before, after)}
        found["changed"] = changed_lines(found["hunks"])
        if step.payload and step.before_payload:
            if len(COMPARED) >= COMPARED_KEPT:
                COMPARED.clear()
            COMPARED[key] = found
    return found


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
