"""The writer's second half: move a staging database into traces.db in one transaction.

Staging ids start at 1 in every table; the merge offsets them past the main
database's largest id, table by table, and offsets every foreign key the same
way (the foreign keys are read from the schema itself). A negative id in a
staging database names an existing row of the main database (a grown log's
file, sources and compiles) and is kept, negated, so the row is replaced.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from tlindex.ingest.fingerprints import write_prints
from tlindex.ingest.text_index import FTS_COLUMNS, reindex, unindex
from tlindex.store.db import immediate
from tlindex.store.tables import COLUMNS, METRICS_CONFIGS

# Tables without an id of their own (keyed by content or by other columns): nothing to offset.
NATURAL_KEYS = {"payload_data", "strings", "volume"}
# Columns the ingest does not write but later steps fill in, kept when a row is replaced.
KEPT_ON_REPLACE = {"sources": ("run_id",)}


def foreign_keys(conn: sqlite3.Connection) -> dict[str, dict[str, str]]:
    """{table: {column: referenced table}} for every table the normalizer writes, from the schema."""
    return {table: {row[3]: row[2] for row in conn.execute(f"PRAGMA main.foreign_key_list({table})")}
            for table in COLUMNS}


def _shift(column: str, offset: int) -> str:
    return f"CASE WHEN {column} < 0 THEN -{column} ELSE {column} + {offset} END"


_SHAPES: dict[str, dict[str, tuple[list[str], dict[str, str]]]] = {}  # a schema's text -> its tables' shapes


def table_shapes(conn: sqlite3.Connection) -> dict[str, tuple[list[str], dict[str, str]]]:
    """{table: (its columns, its foreign keys)} of every table the normalizer writes, read once per schema (a bulk
    ingest merges hundreds of files: their pragmas were a tenth of each merge)."""
    (schema,) = conn.execute("SELECT group_concat(sql, ';') FROM main.sqlite_schema").fetchone()
    if schema not in _SHAPES:
        if len(_SHAPES) >= 4:  # (a process that migrates databases meets a few)
            _SHAPES.clear()
        _SHAPES[schema] = {table: ([row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")], fks)
                           for table, fks in foreign_keys(conn).items()}
    return _SHAPES[schema]


def merge_statements(conn: sqlite3.Connection) -> tuple[list[str], dict[str, int]]:
    """The INSERT ... SELECT of every table, and the id offsets (read inside the transaction)."""
    shapes = table_shapes(conn)
    offsets = {table: conn.execute(f"SELECT coalesce(max(id), 0) FROM main.{table}").fetchone()[0]
               for table in shapes if table not in NATURAL_KEYS}
    statements = []
    for table, (columns, table_fks) in shapes.items():
        select = []
        for column in columns:
            if column == "id" and table not in NATURAL_KEYS:
                select.append(_shift("id", offsets[table]))
            elif column in KEPT_ON_REPLACE.get(table, ()):
                select.append(f"CASE WHEN id < 0 THEN (SELECT {column} FROM main.{table} kept "
                              f"WHERE kept.id = -staging.{table}.id) ELSE {column} END")
            elif column in table_fks and table_fks[column] in offsets:
                select.append(_shift(column, offsets[table_fks[column]]))
            else:
                select.append(column)
        verb = "INSERT OR IGNORE" if table == "payload_data" else "INSERT OR REPLACE"
        statements.append(f"{verb} INTO main.{table} ({', '.join(columns)}) "
                          f"SELECT {', '.join(select)} FROM staging.{table}")
    return statements, offsets


# The compiles a merge rewrites in place (a continuation's; in any other merge, none: one indexed lookup).
CONTINUED_IN_PLACE = "id IN (SELECT -id FROM staging.compiles WHERE id < 0)"

# The payloads no record refers to any more (envelopes, and the config payloads of metrics).
UNUSED_PAYLOADS = ("SELECT rowid FROM main.payload_data WHERE hash NOT IN (SELECT payload FROM main.envelopes "
                   "WHERE payload IS NOT NULL) AND hash NOT IN (SELECT value FROM main.metrics, json_each("
                   f"json_array({', '.join(METRICS_CONFIGS)})) "
                   "WHERE value IS NOT NULL)")


def delete_file_rows(conn: sqlite3.Connection, file_id: int, after_line: int | None = None) -> None:
    """Delete every row that came from a file (--replace), or from its lines after after_line.

    The second form drops the provisional tail of a grown log (a record whose
    payload md5 failed at end of file, an unterminated last line) before the
    continuation of that log is merged.
    """
    params = {"file": file_id, "line": after_line if after_line is not None else -1}
    sources = "SELECT id FROM main.sources WHERE file_id = :file"
    envelopes = f"SELECT id FROM main.envelopes WHERE source_id IN ({sources}) AND line > :line"

    def delete(table: str, where: str, parameters=params) -> None:
        if table in FTS_COLUMNS:
            unindex(conn, table, where, parameters)
        conn.execute(f"DELETE FROM main.{table} WHERE {where}", parameters)

    for table, links in foreign_keys(conn).items():
        if table in ("files", "sources", "envelopes", "compiles", "strings"):
            continue
        if "envelope_id" in links:
            delete(table, f"envelope_id IN ({envelopes})")
        elif table == "chromium_events":
            delete(table, f"begin_envelope IN ({envelopes}) OR end_envelope IN ({envelopes})")
        elif "file_id" in links:
            delete(table, "file_id = :file AND line > :line")
    delete("envelopes", f"id IN ({envelopes})")
    if after_line is not None:
        return
    for table in ("compiles", "strings", "volume"):
        delete(table, f"source_id IN ({sources})")
    delete("sources", "file_id = :file")
    delete("files", "id = :file")
    unindex(conn, "payloads", f"id IN ({UNUSED_PAYLOADS})")
    delete("payload_data", f"rowid IN ({UNUSED_PAYLOADS})", ())


def refresh_volume(conn: sqlite3.Connection, file_id: int) -> None:
    """Recompute the volume rows of a file's sources from their envelopes."""
    sources = "SELECT id FROM main.sources WHERE file_id = ?"
    conn.execute(f"DELETE FROM main.volume WHERE source_id IN ({sources})", (file_id,))
    conn.execute(f"""
        INSERT INTO main.volume (source_id, kind, name, emitter_file, emitter_line, records, bytes)
        SELECT source_id, kind, name, emitter_file, emitter_line, count(*), sum(envelope_bytes + payload_bytes)
        FROM main.envelopes WHERE source_id IN ({sources})
        GROUP BY source_id, kind, name, emitter_file, emitter_line""", (file_id,))


def consolidate_volume(conn: sqlite3.Connection, file_id: int) -> None:
    """One volume row per key again, after a continuation added its rows to a file's."""
    sources = "SELECT id FROM main.sources WHERE file_id = ?"
    rows = conn.execute(f"SELECT source_id, kind, name, emitter_file, emitter_line, sum(records), sum(bytes) "
                        f"FROM main.volume WHERE source_id IN ({sources}) "
                        f"GROUP BY source_id, kind, name, emitter_file, emitter_line", (file_id,)).fetchall()
    conn.execute(f"DELETE FROM main.volume WHERE source_id IN ({sources})", (file_id,))
    conn.executemany("INSERT INTO main.volume (source_id, kind, name, emitter_file, emitter_line, records, bytes) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)


Hook = Callable[[sqlite3.Connection], object]


class FileRemoved(Exception):
    """The file a merge continues (a grown log, a chunk's file) is no longer in the database: its run was removed
    (`tlindex rm`) after the ingest planned to continue it. The merge is rolled back."""


def fingerprint_compiles(conn: sqlite3.Connection, compile_offset: int) -> None:
    """The prints (tlindex.ingest.fingerprints) of the compiles just merged (new, or continued by this staging
    database), after the name and file of the frame a compile without metrics compiled (a warm start's), from its
    dynamo_start's stack as its frames rows resolved it (metrics that a later chunk brings name it again): `tlindex
    diff` pairs it with its cold start by it."""
    merged = f"id IN (SELECT {_shift('id', compile_offset)} FROM staging.compiles)"
    conn.execute(f"UPDATE main.compiles SET (co_name, co_filename) = (SELECT coalesce(main.compiles.co_name, f.name), "
                 f"coalesce(main.compiles.co_filename, f.filename) FROM main.frames f WHERE f.envelope_id = "
                 f"main.compiles.dynamo_start AND f.stack = 'stack' ORDER BY f.depth DESC LIMIT 1) "
                 f"WHERE (co_name IS NULL OR co_filename IS NULL) AND dynamo_start IS NOT NULL AND {merged}")
    write_prints(conn, f"WHERE {merged}")


def merge(conn: sqlite3.Connection, staging_path: str, *, replace_file: int | None = None,
          resumed_file: int | None = None, continued_file: int | None = None, prepare: Hook | None = None,
          complete: Callable[[sqlite3.Connection, int], object] | None = None,
          attach: Callable[[sqlite3.Connection, int, list[tuple]], object] | None = None) -> int:
    """Merge one staging database into the main one atomically; return the main file id.

    `resumed_file`: the staging rows continue a grown log, whose provisional tail
    and open spans they replace. `continued_file`: they continue a file from
    exactly where its rows end (the next chunk of it), replacing its open spans.
    In the same transaction, `prepare(conn)` may rewrite the attached staging
    database first, `complete(conn, file_id)` may add to the merged rows, and `attach(conn, file_id, replaced)` gives
    the file's new sources their run (tlindex.ingest.runs.Attacher), `replaced` being the (pid, run) of the processes
    of the file replaced, read before they were deleted: no source is ever committed without a run, and a file
    re-ingested is never without one (a killed --replace leaves no run emptied of it). Raises FileRemoved when the
    file a merge continues is no longer in the database (its run was removed since the ingest planned it).
    """
    conn.execute("ATTACH DATABASE ? AS staging", (staging_path,))
    # The staging file is thrown away after the merge, rolled back or not: its rewriting by `prepare`
    # (a chunk fitted to the file) needs no rollback journal, nor syncing.
    conn.execute("PRAGMA staging.journal_mode = OFF")
    conn.execute("PRAGMA staging.synchronous = OFF")
    try:
        with immediate(conn):  # rolled back on any error (a full disk: SQLite may have rolled back already)
            if prepare is not None:
                prepare(conn)
            replaced = []
            if replace_file is not None:
                replaced = conn.execute("SELECT pid, run_id FROM main.sources WHERE file_id = ? AND run_id IS NOT "
                                        "NULL ORDER BY id", (replace_file,)).fetchall()
                delete_file_rows(conn, replace_file)
            continuing = resumed_file if resumed_file is not None else continued_file
            consumed = conn.execute("SELECT lines_ingested FROM main.files WHERE id = ?",
                                    (continuing,)).fetchone() if continuing is not None else None
            if continuing is not None and consumed is None:
                raise FileRemoved(f"file {continuing} is no longer in the database")
            if resumed_file is not None:
                delete_file_rows(conn, resumed_file, after_line=consumed[0])
            if continuing is not None:
                # Open spans were handed to the continuation, which writes them again.
                conn.execute("DELETE FROM main.chromium_events WHERE ph = 'B' AND source_id IN "
                             "(SELECT id FROM main.sources WHERE file_id = ?)", (continuing,))
            unindex(conn, "compiles", CONTINUED_IN_PLACE)
            statements, offsets = merge_statements(conn)
            for statement in statements:
                conn.execute(statement)
            (staged_id,) = conn.execute("SELECT id FROM staging.files").fetchone()
            file_id = -staged_id if staged_id < 0 else staged_id + offsets["files"]
            if resumed_file is not None:
                refresh_volume(conn, file_id)  # the dropped tail's envelopes are no longer counted
            elif continued_file is not None:
                consolidate_volume(conn, file_id)
            fingerprint_compiles(conn, offsets["compiles"])
            reindex(conn, "compiles", CONTINUED_IN_PLACE)
            if complete is not None:
                complete(conn, file_id)
            if attach is not None:
                attach(conn, file_id, replaced)
    finally:
        conn.execute("DETACH DATABASE staging")
    return file_id
