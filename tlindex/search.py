"""Full-text search indexes (SQLite FTS5 via sqlite-utils) on the text people search.

Datasette shows a search box on a table that has one. The indexes are
external-content tables filled after each ingest rather than kept by triggers,
which would slow the bulk load: new rows are appended to them, and an ingest
that replaced or rewrote rows (--replace, a grown log) rebuilds them.
"""

from __future__ import annotations

import sqlite3

import sqlite_utils

FTS_COLUMNS: dict[str, list[str]] = {
    "compiles": ["co_name", "co_filename", "fail_type", "fail_reason", "recompile_reason"],
    "failed_guards": ["reason"],
    "graph_break_events": ["reason", "user_file"],
    "guards": ["text", "user_code", "source"],
    "artifacts": ["name"],
    "ingest_errors": ["kind", "message", "excerpt"],
}


def refresh_fts(db: sqlite_utils.Database, rebuild: bool = False) -> None:
    """Create the FTS indexes if missing and index the rows added since (all rows with rebuild)."""
    for table, columns in FTS_COLUMNS.items():
        rebuild_table = rebuild
        if db[table].detect_fts() is None:
            try:
                db[table].enable_fts(columns, create_triggers=False)
                rebuild_table = True
            except sqlite3.OperationalError as error:
                if "already exists" not in str(error):
                    raise  # else a concurrent ingest created it first: append below
        if rebuild_table:
            db[table].rebuild_fts()
            continue
        # An external-content index answers max(rowid) from its content table;
        # its _docsize shadow table holds one row per document actually indexed.
        # Under a write lock taken first: a concurrent ingest appends before or after.
        names = ", ".join(f"[{c}]" for c in columns)
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            db.conn.execute(f"INSERT INTO [{table}_fts] (rowid, {names}) SELECT rowid, {names} FROM [{table}] "
                            f"WHERE rowid > (SELECT coalesce(max(id), 0) FROM [{table}_fts_docsize])")
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
