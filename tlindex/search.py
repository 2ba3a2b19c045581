"""Full-text search indexes (SQLite FTS5 via sqlite-utils) on the text people search.

Datasette shows a search box on a table that has one. The indexes are
external-content tables, rebuilt after each ingest: cheaper than triggers on
the bulk-load path, and these tables are small next to envelopes and payloads.
"""

from __future__ import annotations

import sqlite_utils

FTS_COLUMNS: dict[str, list[str]] = {
    "compiles": ["co_name", "co_filename", "fail_type", "fail_reason", "recompile_reason"],
    "failed_guards": ["reason"],
    "graph_break_events": ["reason", "user_file"],
    "guards": ["text", "user_code", "source"],
    "artifacts": ["name"],
    "ingest_errors": ["kind", "message", "excerpt"],
}


def refresh_fts(db: sqlite_utils.Database) -> None:
    """Create the FTS indexes if missing and bring them up to date."""
    for table, columns in FTS_COLUMNS.items():
        if db[table].detect_fts() is None:
            db[table].enable_fts(columns, create_triggers=False)
        db[table].rebuild_fts()
