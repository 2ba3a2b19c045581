"""Indexes that a big ingest into an empty database builds once, after its merges, instead of row by row.

Three indexes of `envelopes` (tlindex.store.db.DEFERRED_INDEXES) take keys in no useful order as rows arrive: a
payload's hash, a record's kind and name. Kept up to date row by row, each merge rewrites most of their pages (on
1 GB of log, 30 % of the main process's merge time); built after the last merge, they are one sort each. No merge
looks rows up by them, so an ingest of DEFER_FROM bytes or more into a database without a single envelope drops
them before its first merge and makes them again after its last, before the runs are grouped, and on its way out
when it fails or is stopped. A process killed in between leaves them out: the next command that opens the
database to write makes them (open_db); readers meanwhile get the same answers, slower. A database that holds
rows keeps them up to date: rebuilding would cost what indexing all its runs costs.
"""

from __future__ import annotations

import sqlite3

from tlindex.store.db import deferred_indexes, immediate

DEFER_FROM = 64 << 20  # bytes of input: below, the statements cost about what one sort at the end saves


def defer_indexes(conn: sqlite3.Connection, input_bytes: int) -> bool:
    """Drop the deferred indexes when `input_bytes` of logs go into a database without envelopes; whether they
    were dropped (tlindex.store.db.make_deferred_indexes makes them again)."""
    if input_bytes < DEFER_FROM or conn.execute("SELECT 1 FROM envelopes LIMIT 1").fetchone():
        return False
    with immediate(conn):
        if conn.execute("SELECT 1 FROM envelopes LIMIT 1").fetchone():  # another ingest merged first
            return False
        for name in deferred_indexes(conn, present=True):
            conn.execute(f"DROP INDEX {name}")
    return True
