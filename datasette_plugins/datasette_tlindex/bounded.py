"""The SQL Datasette runs for a request on a tlindex database, run in tlindex's worker processes (tlindex.served_sql):
`bound(datasette, db)` gives the database's `Database` object an `execute` of the same signature and answers (Results,
QueryInterrupted, SQLite's errors) whose statement a worker runs within the same time limit, killed past it, its memory
and its response bounded. Only tlindex's databases get it; Datasette's own and any other database are untouched."""

from __future__ import annotations

import asyncio
import atexit
import sqlite3
import sys

from tlindex.served_sql import GRACE_S, Limits, Refused, Row, Workers

ERRORS = {"OperationalError": sqlite3.OperationalError, "IntegrityError": sqlite3.IntegrityError,
          "ProgrammingError": sqlite3.ProgrammingError, "DataError": sqlite3.DataError}


def _plain(params) -> dict | list:
    """The parameters a statement binds, as values (Datasette's canned queries carry functions too, its CSRF token's:
    a worker binds only what SQLite can)."""
    if params is None:
        return {}
    if isinstance(params, dict):
        return {key: value for key, value in params.items() if isinstance(value, (str, int, float, bytes, type(None)))}
    return list(params)


def workers_of(datasette) -> Workers:
    """The server's worker processes (made once, stopped when the process exits)."""
    found = datasette.__dict__.get("_tlindex_sql_workers")
    if found is None:
        config = datasette.plugin_config("tlindex") or {}
        limits = Limits(memory_bytes=int(config.get("sql_memory_mb", Limits.memory_bytes >> 20)) << 20,
                        response_bytes=int(config.get("max_response_mb", Limits.response_bytes >> 20)) << 20)
        found = datasette.__dict__["_tlindex_sql_workers"] = Workers(limits=limits)
        atexit.register(found.stop)
    return found


def bound(datasette, db) -> None:
    """Make `db` (a tlindex database Datasette serves from a file) run its `execute` statements in the workers."""
    if getattr(db.execute, "bounded", False) or not getattr(db, "path", None) or getattr(db, "is_memory", False):
        return
    workers = workers_of(datasette)

    async def execute(sql, params=None, truncate=False, custom_time_limit=None, page_size=None, log_sql_errors=True):
        from datasette.database import QueryInterrupted, Results

        ds = db.ds
        page_size = page_size or ds.page_size
        time_limit_ms = ds.sql_time_limit_ms
        if custom_time_limit and custom_time_limit < time_limit_ms:
            time_limit_ms = custom_time_limit
        max_returned_rows = ds.max_returned_rows
        if max_returned_rows == page_size:
            max_returned_rows += 1
        limit = max_returned_rows + 1 if max_returned_rows and truncate else None
        request = {"path": str(db.path), "sql": sql, "params": _plain(params), "time_limit_ms": time_limit_ms,
                   "max_rows": limit}
        try:
            answer = await asyncio.to_thread(workers.run, request, time_limit_ms / 1000 + GRACE_S)
        except Refused as error:
            raise sqlite3.OperationalError(f"tlindex: {error}") from None
        if answer.get("error") == "interrupted":
            raise QueryInterrupted(sqlite3.OperationalError("interrupted"), sql, params)
        if "error" in answer:
            if log_sql_errors:
                sys.stderr.write(f"ERROR: sql = {sql!r}, params = {params}: {answer['message']}\n")
            raise ERRORS.get(answer.get("type"), sqlite3.OperationalError)(answer["message"])
        keys = tuple(d[0] for d in answer["description"] or ())
        rows = [Row(row, keys) for row in answer["rows"]]
        truncated = bool(limit) and len(rows) > max_returned_rows
        return Results(rows[:max_returned_rows] if truncated else rows, truncated, answer["description"])

    execute.bounded = True  # type: ignore[attr-defined]
    db.execute = execute
