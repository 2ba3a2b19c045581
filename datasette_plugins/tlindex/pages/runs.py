"""The runs page: every run of the database."""

from __future__ import annotations

import sqlite3

from tlindex.answers.findings import findings, problems
from tlindex.ingest.runs import rank_decisions, ranks_text

from ..database import dicts, int_value, one, open_database, render


def runs_data(conn: sqlite3.Connection, only: list[int] | None = None) -> list[dict]:
    """Every run (or those of `only`), with its counts, worst finding and biggest compile."""
    runs = dicts(conn.execute("""
        SELECT r.*, (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.compile_id != '-/-') AS compiles,
               (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.status = 'error') AS errors,
               (SELECT sum(bytes) FROM sources s WHERE s.run_id = r.id) AS bytes
        FROM runs r ORDER BY r.start_time, r.id"""))
    if only is not None:
        runs = [run for run in runs if run["id"] in only]
    for run in runs:
        run["ranks_text"] = ranks_text(run["world_size"], run["source_count"] or 0, rank_decisions(conn, run["id"]))
        found = findings(conn, run["id"])
        run["worst"] = (problems(found) or [None])[0]
        run["problem_count"] = len(problems(found))
    for run in runs:  # the compile that emitted the most log bytes: one click from here
        run["biggest"] = one(conn, """
            SELECT id, compile_id, co_name, rank, envelope_bytes + payload_bytes AS bytes FROM compiles
            WHERE run_id = ? AND compile_id != '-/-' ORDER BY bytes DESC, id LIMIT 1""", (run["id"],))
    return runs


async def runs_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    only = [int_value("run", text) for text in request.args.getlist("run")] or None
    runs = await db.execute_fn(lambda conn: runs_data(conn, only))
    return await render(datasette, request, "runs.html", {"database": db.name, "runs": runs, "u": urls})
