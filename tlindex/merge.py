"""The writer's second half: move a staging database into traces.db in one transaction.

Staging ids start at 1 in every table; the merge offsets them past the main
database's largest id, table by table, and offsets every foreign key the same
way (the foreign keys are read from the schema itself). A negative id in a
staging database names an existing row of the main database (a grown log's
file, sources and compiles) and is kept, negated, so the row is replaced.
"""

from __future__ import annotations

import sqlite3

# Tables keyed by content or by a composite key: copied without offsetting their key.
NATURAL_KEYS = {"payloads", "strings"}


def foreign_keys(conn: sqlite3.Connection) -> dict[str, dict[str, str]]:
    """{table: {column: referenced table}} from the schema."""
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type='table' AND name NOT LIKE '\\_%' ESCAPE '\\'"
        " AND name NOT LIKE 'sqlite%'")]
    return {table: {row[3]: row[2] for row in conn.execute(f"PRAGMA main.foreign_key_list({table})")}
            for table in tables}


def _shift(column: str, offset: int) -> str:
    return f"CASE WHEN {column} < 0 THEN -{column} ELSE {column} + {offset} END"


def merge_statements(conn: sqlite3.Connection) -> tuple[list[str], dict[str, int]]:
    """The INSERT ... SELECT of every table, and the id offsets (read inside the transaction)."""
    fks = foreign_keys(conn)
    offsets = {table: conn.execute(f"SELECT coalesce(max(id), 0) FROM main.{table}").fetchone()[0]
               for table in fks if table not in NATURAL_KEYS}
    statements = []
    for table, table_fks in fks.items():
        columns = [row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")]
        select = []
        for column in columns:
            if column == "id" and table not in NATURAL_KEYS:
                select.append(_shift("id", offsets[table]))
            elif column in table_fks and table_fks[column] in offsets:
                select.append(_shift(column, offsets[table_fks[column]]))
            else:
                select.append(column)
        verb = "INSERT OR IGNORE" if table == "payloads" else "INSERT OR REPLACE"
        statements.append(f"{verb} INTO main.{table} ({', '.join(columns)}) "
                          f"SELECT {', '.join(select)} FROM staging.{table}")
    return statements, offsets


def delete_file(conn: sqlite3.Connection, file_id: int) -> None:
    """Delete a file and every row that came from it (for --replace)."""
    sources = "SELECT id FROM main.sources WHERE file_id = :file"
    envelopes = f"SELECT id FROM main.envelopes WHERE source_id IN ({sources})"
    for table, links in foreign_keys(conn).items():
        if table in ("files", "sources", "envelopes"):
            continue
        if "envelope_id" in links:
            conn.execute(f"DELETE FROM main.{table} WHERE envelope_id IN ({envelopes})", {"file": file_id})
        elif "source_id" in links:
            conn.execute(f"DELETE FROM main.{table} WHERE source_id IN ({sources})", {"file": file_id})
        elif "file_id" in links:
            conn.execute(f"DELETE FROM main.{table} WHERE file_id = :file", {"file": file_id})
    conn.execute(f"DELETE FROM main.envelopes WHERE source_id IN ({sources})", {"file": file_id})
    conn.execute("DELETE FROM main.sources WHERE file_id = :file", {"file": file_id})
    conn.execute("DELETE FROM main.files WHERE id = :file", {"file": file_id})
    conn.execute("DELETE FROM main.payloads WHERE hash NOT IN (SELECT payload FROM main.envelopes "
                 "WHERE payload IS NOT NULL) AND hash NOT IN (SELECT value FROM main.metrics, json_each("
                 "json_array(dynamo_config, inductor_config, functorch_config, compiler_config)) "
                 "WHERE value IS NOT NULL)")


def merge(conn: sqlite3.Connection, staging_path: str, *, replace_file: int | None = None,
          resumed_file: int | None = None) -> int:
    """Merge one staging database into the main one atomically; return the main file id."""
    conn.execute("ATTACH DATABASE ? AS staging", (staging_path,))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if replace_file is not None:
                delete_file(conn, replace_file)
            if resumed_file is not None:
                # The unterminated tail recorded last time is read again now.
                conn.execute("DELETE FROM main.ingest_errors WHERE file_id = ? AND offset >= "
                              "(SELECT bytes_ingested FROM main.files WHERE id = ?)",
                              (resumed_file, resumed_file))
            statements, offsets = merge_statements(conn)
            for statement in statements:
                conn.execute(statement)
            (staged_id,) = conn.execute("SELECT id FROM staging.files").fetchone()
            file_id = -staged_id if staged_id < 0 else staged_id + offsets["files"]
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("DETACH DATABASE staging")
    return file_id
