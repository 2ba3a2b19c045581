"""Export every table of a tlindex database as Parquet datasets (pyarrow), for DuckDB, Spark, Polars.

OUT_DIR/<table>/ holds one dataset per table, hive-partitioned by run_id and
rank where the table has those columns (OUT_DIR/compiles/run_id=3/rank=0/...),
with column types taken from the schema. Rows stream in batches, so memory
stays flat on a large database. OUT_DIR/_manifest.json records the schema
version and the row count of every table.
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from tlindex import owned
from tlindex.errors import ExportError  # noqa: F401 (raised here, imported from here by callers)
from tlindex.store.db import MIGRATIONS_TABLE, connect_read_only
from tlindex.version import __version__

BATCH_ROWS = 20_000
PARTITION_COLUMNS = ("run_id", "rank")
MANIFEST = "_manifest.json"


# Exported through a view: payload_data's compressed bytes become the payloads view's text (Parquet
# compresses it again its own way), so DuckDB and Spark read payload text as they always did.
EXPORTED_AS = {"payload_data": "payloads"}
VIEW_COLUMNS = {"payloads": [("hash", "TEXT"), ("size", "INTEGER"), ("text", "TEXT")]}


def declared_columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """(name, declared type) of a table's columns, or of an exported view's."""
    if table in VIEW_COLUMNS:
        return VIEW_COLUMNS[table]
    return [(name, declared) for _, name, declared, *_ in conn.execute(f"PRAGMA table_info({table})")]


def schema_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables of the tlindex schema (not migrations, full-text indexes and their shadow tables, or SQLite's
    own): a virtual table's shadow tables are named `<virtual table>_<part>`."""
    rows = conn.execute("SELECT name, sql LIKE 'CREATE VIRTUAL%' FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = tuple(f"{name}_" for name, is_virtual in rows if is_virtual)
    return sorted(EXPORTED_AS.get(n, n) for n, is_virtual in rows if not is_virtual and not n.startswith(("_", "sqlite"))
                  and n != MIGRATIONS_TABLE and not n.startswith(virtual))


def arrow_schema(conn: sqlite3.Connection, table: str):
    """The Arrow schema of a table, from its declared SQLite types."""
    import pyarrow as pa

    types = {"INTEGER": pa.int64(), "REAL": pa.float64(), "TEXT": pa.large_string(), "BLOB": pa.large_binary()}
    return pa.schema([(name, types.get(declared.upper(), pa.large_string()))
                      for name, declared in declared_columns(conn, table)])


def _batches(cursor: sqlite3.Cursor, schema) -> Iterator:
    import pyarrow as pa

    while rows := cursor.fetchmany(BATCH_ROWS):
        columns = list(zip(*rows))
        yield pa.RecordBatch.from_arrays([pa.array(column, type=field.type)
                                          for column, field in zip(columns, schema)], schema=schema)


def shifted_columns(conn: sqlite3.Connection, table: str, id_base: int) -> list[str]:
    """SELECT expressions for a table's columns, its id and integer-keyed foreign keys shifted by id_base."""
    from tlindex.ingest.merge import NATURAL_KEYS

    references = {row[3]: row[2] for row in conn.execute(f"PRAGMA foreign_key_list({table})")}
    columns = [name for name, _ in declared_columns(conn, table)]
    if not id_base:
        return columns
    return [f"{name} + {id_base}" if (name == "id" and table not in NATURAL_KEYS) or
            (name in references and references[name] not in NATURAL_KEYS) else name for name in columns]


def write_table(conn: sqlite3.Connection, table: str, out: Path, *, id_base: int = 0,
                basename: str = "part-{i}.parquet", exists: str = "error") -> list[str]:
    """Stream one table into the dataset out/<table>; return its partition columns.

    With id_base, the table's own id and every foreign key to a table keyed by an
    integer id are shifted by it (how Spark tasks keep ids unique without talking).
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = arrow_schema(conn, table)
    select = shifted_columns(conn, table, id_base)
    cursor = conn.execute(f"SELECT {', '.join(select)} FROM {table}")
    partitions = [c for c in PARTITION_COLUMNS if c in schema.names]
    partitioning = ds.partitioning(pa.schema([schema.field(c) for c in partitions]), flavor="hive") \
        if partitions else None
    ds.write_dataset(pa.RecordBatchReader.from_batches(schema, _batches(cursor, schema)), out / table,
                     format="parquet", partitioning=partitioning, existing_data_behavior=exists,
                     basename_template=basename, max_rows_per_group=BATCH_ROWS * 5)
    return partitions


def table_manifest(conn: sqlite3.Connection, table: str, rows: int) -> dict:
    schema = arrow_schema(conn, table)
    return {"rows": rows, "partitioning": [c for c in PARTITION_COLUMNS if c in schema.names],
            "columns": {f.name: str(f.type) for f in schema}}


def new_manifest(conn: sqlite3.Connection) -> dict:
    return {"tlindex_version": __version__,
            "schema_migrations": [r[0] for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY name")],
            "exported_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tables": {}}


def check_out_dir(out: Path, replace: bool) -> None:
    """Refuse a link, and a non-empty OUT_DIR unless `replace` is given and tlindex wrote it (its export marker)."""
    if out.is_symlink():
        raise ExportError(f"{out}: a symbolic link; give the folder itself")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a directory")
    if owned.is_empty(out) or not out.exists():
        return
    if not replace:
        raise ExportError(f"{out} is not empty: pass --replace to overwrite it")
    if not owned.owns(out, "export"):
        raise ExportError(f"{out}: refusing to replace a folder tlindex did not export into (no {owned.MARKER} marker "
                          f"of an export in it); remove it yourself, or choose another folder")


def export_parquet(db_path: str | Path, out_dir: str | Path, tables: list[str] | None = None,
                   replace: bool = False) -> dict:
    """Write the tables of the database as Parquet datasets under out_dir; return the manifest.

    They are written into a folder beside out_dir and moved into place when complete (tlindex.owned.atomic_dir):
    stopped or failing midway, the export leaves out_dir as it was (an earlier export stays whole)."""
    out = Path(os.path.abspath(out_dir))
    # pyarrow pulls batches on a worker thread: the connection must allow it.
    conn = connect_read_only(db_path, check_same_thread=False)
    try:
        available = schema_tables(conn)
        unknown = set(tables or ()) - set(available)
        if unknown:
            raise ExportError(f"no such table: {', '.join(sorted(unknown))}")
        check_out_dir(out, replace)
        try:
            with owned.atomic_dir(out, "export") as partial:
                manifest = new_manifest(conn)
                for table in tables or available:
                    write_table(conn, table, partial)
                    rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    manifest["tables"][table] = table_manifest(conn, table, rows)
                (partial / MANIFEST).write_text(json.dumps(manifest, indent=2))
        except owned.NotOwned as error:
            raise ExportError(str(error)) from None
    finally:
        conn.close()
    return manifest


DUCKDB_TYPES = {"int64": "BIGINT", "double": "DOUBLE", "large_string": "VARCHAR", "large_binary": "BLOB"}


def duckdb_views(out_dir: str | Path) -> list[str]:
    """CREATE VIEW statements that expose an export's tables, by name, to DuckDB."""
    out = Path(out_dir).resolve()
    manifest = json.loads((out / MANIFEST).read_text())
    statements = []
    for table, info in manifest["tables"].items():
        files = list((out / table).rglob("*.parquet"))
        if files:
            hive = "true" if info["partitioning"] else "false"
            source = f"read_parquet('{out / table}/**/*.parquet', hive_partitioning = {hive})"
            columns = ", ".join(f'"{c}"' for c in info["columns"])  # the schema's column order
            statements.append(f"CREATE OR REPLACE VIEW {table} AS SELECT {columns} FROM {source}")
        else:  # an empty table leaves no file: an empty view of the same columns
            columns = ", ".join(f'CAST(NULL AS {DUCKDB_TYPES.get(t, "VARCHAR")}) AS "{c}"'
                                for c, t in info["columns"].items())
            statements.append(f"CREATE OR REPLACE VIEW {table} AS SELECT {columns} WHERE false")
    return statements
