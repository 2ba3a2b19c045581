"""The pass-by-pass page: a compile's (or one piece compile's) graph snapshots in order, each against the one before."""

from __future__ import annotations

import sqlite3

from datasette.utils.asgi import NotFound

from tlindex.answers.passes import segment

from ..database import int_var, open_database, render
from ..highlight import language
from ..sidebyside import hunks


def _text(conn: sqlite3.Connection, digest: str) -> str:
    row = conn.execute("SELECT text FROM payloads WHERE hash = ?", (digest,)).fetchone()
    return row[0] if row and row[0] is not None else ""


def passes_data(conn: sqlite3.Connection, compile_row: int | None = None, piece: int | None = None) -> dict | None:
    found = segment(conn, compile_row, piece)
    if found is None:
        return None
    ways = []
    for way in found.ways:
        steps = []
        for step in way:
            shown = {"step": step, "hunks": None, "changed": 0}
            if step.compared:
                after = _text(conn, step.payload)
                before = _text(conn, step.before_payload)
                shown["hunks"] = hunks(before, after, language(step.kind, step.name, None, after))
                shown["changed"] = sum(1 for hunk in shown["hunks"] for row in hunk if row.tag != "equal")
            steps.append(shown)
        ways.append(steps)
    return {"compile": found.compile, "piece": found.piece, "pieces": found.pieces, "ways": ways}


async def passes_page(datasette, request):
    """The graph snapshots of a compile, outside its vLLM pieces (each piece has its own page)."""
    opened = await open_database(datasette, request)
    compile_row = int_var(request, "compile")
    data = await opened.db.execute_fn(lambda conn: passes_data(conn, compile_row=compile_row))
    if data is None:
        raise NotFound(f"No compile {compile_row}")
    return await render(datasette, request, "passes.html", {"database": opened.db.name, "u": opened.urls, **data})


async def piece_passes_page(datasette, request):
    """The graph snapshots of one vLLM piece compile."""
    opened = await open_database(datasette, request)
    piece = int_var(request, "piece")
    data = await opened.db.execute_fn(lambda conn: passes_data(conn, piece=piece))
    if data is None:
        raise NotFound(f"No piece compile {piece}")
    return await render(datasette, request, "passes.html", {"database": opened.db.name, "u": opened.urls, **data})
