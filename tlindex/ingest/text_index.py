"""Full-text search indexes (SQLite FTS5) on the text people search.

Datasette shows a search box on a table that has one. The indexes are
external-content tables filled after each ingest rather than kept by triggers,
which would slow the bulk load: new rows are appended to them (those past the last rowid an index holds), a row
leaves them in the transaction that deletes it (`unindex`), and a compile a grown log's merge rewrites in place leaves
and joins again in its merge: an index holds exactly its table's rows up to its last rowid, whatever stopped when,
and an ingest costs what it changed, not what the database holds.

Payload text (graphs, generated code, guards) has an index of its own, `payloads_fts`, over each distinct
payload once, kept by every ingest as the others are. Its tokenizer is FTS5's default, as the other indexes': words
split at `_`, `.` and `::`, so a term is found where its words follow each other (`fused_add` in
`triton_poi_fused_add_0`, `aten.mm`), and the search then keeps the payloads that hold it as typed. FTS5's trigram
tokenizer would also find `used_ad`, at 8 times the cost: 0.13 s per MB of payload text, as long as the ingest
itself, and an index twice the text; this one costs 0.016 s per MB and a quarter of the text.
"""

from __future__ import annotations

import sqlite3

from tlindex.store.compression import register
from tlindex.store.db import immediate

FTS_COLUMNS: dict[str, list[str]] = {
    "compiles": ["co_name", "co_filename", "fail_type", "fail_reason", "recompile_reason"],
    "failed_guards": ["reason"],
    "graph_break_events": ["reason", "user_file"],
    "guards": ["text", "user_code", "source"],
    "artifacts": ["name"],
    "ingest_errors": ["kind", "message", "excerpt"],
}


PAYLOAD_INDEX = "payloads_fts"
# Tables whose rows no later step of the same ingest rewrites (compiles are replaced as a split log's chunks are
# fitted, ingest_errors by a grown log's merge): their indexes can be brought up to date between merges.
APPEND_ONLY = ("guards", "artifacts", "failed_guards", "graph_break_events")


def _has(conn: sqlite3.Connection, index: str) -> bool:
    return conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = ?", (index,)).fetchone() is not None


def _held_rows(conn: sqlite3.Connection, table: str, where: str, params, command: str) -> None:
    """FTS5's `command` ('delete', or none: insert) for the rows of `table` (or the payloads) that `where` picks and
    its index holds (up to its last rowid), given their columns as they are."""
    index, columns, key = (PAYLOAD_INDEX, ["text"], "id") if table == "payloads" else \
        (f"{table}_fts", FTS_COLUMNS[table], "rowid")
    if not _has(conn, index):
        return
    register(conn)  # (the payloads view inflates them)
    names = ", ".join(f"[{c}]" for c in columns)
    first, value = (f"[{index}], ", f"'{command}', ") if command else ("", "")
    conn.execute(f"INSERT INTO main.[{index}] ({first}rowid, {names}) SELECT {value}{key}, {names} FROM main.[{table}] "
                 f"WHERE ({where}) AND {key} <= (SELECT coalesce(max(id), 0) FROM main.[{index}_docsize])", params)


def unindex(conn: sqlite3.Connection, table: str, where: str, params=()) -> None:
    """Take the rows of `table` (or of the payloads) that `where` picks out of its full-text index before they are
    deleted or rewritten: those it holds, as they were indexed (no step rewrites an indexed column of an indexed row
    but a merge that took it out first)."""
    _held_rows(conn, table, where, params, "delete")


def reindex(conn: sqlite3.Connection, table: str, where: str, params=()) -> None:
    """Put back rows `unindex` took out and a merge rewrote, as they are now (those past the index's last rowid join
    with the new rows after the ingest)."""
    _held_rows(conn, table, where, params, "")


def index_again(conn: sqlite3.Connection, table: str) -> None:
    """`table`'s index made again from its rows, if it has one (a migration rewrote indexed columns)."""
    if _has(conn, f"{table}_fts"):
        conn.execute(f"INSERT INTO main.[{table}_fts] ([{table}_fts]) VALUES ('rebuild')")


def has_payload_index(conn) -> bool:
    return _has(conn, PAYLOAD_INDEX)


def index_payloads(conn) -> None:
    """The payload index made if it is missing (or a trigram one an older tlindex made), and brought up to date
    (payloads are keyed by hash; their rowids only grow), in the caller's transaction."""
    register(conn)  # the index reads the payloads view
    made = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (PAYLOAD_INDEX,)).fetchone()
    if made is not None and "trigram" in made[0]:
        conn.execute(f"DROP TABLE {PAYLOAD_INDEX}")
        made = None
    if made is None:
        conn.execute(f"CREATE VIRTUAL TABLE {PAYLOAD_INDEX} USING FTS5 (text, content='payloads', content_rowid='id')")
    if made is None:
        conn.execute(f"INSERT INTO {PAYLOAD_INDEX} ({PAYLOAD_INDEX}) VALUES ('rebuild')")
    else:
        conn.execute(f"INSERT INTO {PAYLOAD_INDEX} (rowid, text) SELECT id, text FROM payloads "
                     f"WHERE id > (SELECT coalesce(max(id), 0) FROM {PAYLOAD_INDEX}_docsize)")


def refresh_fts(conn: sqlite3.Connection, tables: tuple[str, ...] | None = None) -> None:
    """Create the FTS indexes if missing and index the rows added since; only those of `tables` when given (then
    not the payload index).

    Each table's index is created and filled under a write lock taken first, so ingests
    running at once wait for each other instead of failing on a lock upgrade. The index is
    the one sqlite-utils' enable_fts makes (external content, FTS5), so its tools and
    Datasette's search box see it.
    """
    for table, columns in FTS_COLUMNS.items():
        if tables is not None and table not in tables:
            continue
        names = ", ".join(f"[{c}]" for c in columns)
        with immediate(conn):
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (f"{table}_fts",)).fetchone()
            if not exists:
                conn.execute(f"CREATE VIRTUAL TABLE [{table}_fts] USING FTS5 ({names}, content=[{table}])")
            if not exists:
                conn.execute(f"INSERT INTO [{table}_fts] ([{table}_fts]) VALUES ('rebuild')")
            else:
                # An external-content index answers max(rowid) from its content table;
                # its _docsize shadow table holds one row per document actually indexed.
                conn.execute(f"INSERT INTO [{table}_fts] (rowid, {names}) SELECT rowid, {names} FROM [{table}] "
                             f"WHERE rowid > (SELECT coalesce(max(id), 0) FROM [{table}_fts_docsize])")
    if tables is None:
        with immediate(conn):
            index_payloads(conn)
