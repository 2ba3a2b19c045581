"""The runs page: every run of the database."""

from __future__ import annotations

import sqlite3

from tlindex.findings import findings, problems

from ..database import dicts, one, open_database, render


def runs_data(conn: sqlite3.Connection) -> list[dict]:
    runs = dicts(conn.execute("""
        SELECT r.*, (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.compile_id != '-/-') AS compiles,
               (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.status = 'error') AS errors,
               (SELECT sum(bytes) FROM sources s WHERE s.run_id = r.id) AS bytes
        FROM runs r ORDER BY r.start_time, r.id"""))
    for run in runs:
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
    runs = await db.execute_fn(runs_data)
    return await render(datasette, request, "runs.html", {"database": db.name, "runs": runs, "u": urls})
