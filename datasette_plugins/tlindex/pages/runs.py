"""The runs page: every run of the database."""

from __future__ import annotations

import sqlite3

from ..database import dicts, open_database, render


def runs_data(conn: sqlite3.Connection) -> list[dict]:
    return dicts(conn.execute("""
        SELECT r.*, (SELECT count(*) FROM compiles c WHERE c.run_id = r.id) AS compiles,
               (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.status = 'error') AS errors,
               (SELECT sum(bytes) FROM sources s WHERE s.run_id = r.id) AS bytes
        FROM runs r ORDER BY r.start_time, r.id"""))


async def runs_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    runs = await db.execute_fn(runs_data)
    return await render(datasette, request, "runs.html", {"database": db.name, "runs": runs, "u": urls})
