"""Distributed ingest on Apache Spark: the same reader and normalizer, one Spark task per log file.

Each task runs `tlindex.ingest.task.run_task` (exactly what `tlindex ingest` runs) into
a private staging SQLite file, then writes that file's rows as Parquet into the
export layout. Ids are made unique without coordination: a file numbered n
adds n << 32 to every id and id reference of its rows. The driver gets back only
the small files, sources and compiles rows, groups sources into runs with
`tlindex.ingest.runs` (the same code as the SQLite ingest) and writes those tables
partitioned by run; payloads, which ranks and files repeat, are de-duplicated
by Spark. The findings and per-run answers that `tlindex ingest` derives with SQLite queries
(tlindex.answers.derived) are not computed: the manifest names them under spark.not_derived.
Needs `pip install tlindex[spark]` and Java 17.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from tlindex import owned
from tlindex.answers.derived import derived_tables
from tlindex.formats.parquet import (
    EXPORTED_AS,
    MANIFEST,
    ExportError,
    check_out_dir,
    new_manifest,
    shifted_columns,
    table_manifest,
    write_table,
)
from tlindex.ingest.discover import discover
from tlindex.ingest.fingerprints import write_prints
from tlindex.ingest.task import Task, run_task
from tlindex.store.compression import register
from tlindex.store.db import apply_schema
from tlindex.store.limits import connect

DRIVER_TABLES = ("files", "sources", "compiles")   # small: grouped into runs on the driver
PAYLOAD_PARTS = "_payload_parts"


def ingest_file(item: tuple[int, str, str]) -> dict:
    """A Spark task: parse one log and write its rows as Parquet; return the driver's rows."""
    number, path, out = item
    work = Path(tempfile.mkdtemp(prefix="tlindex-spark-"))
    try:
        staging = work / "staging.db"
        result = run_task(Task(path, str(staging)))
        conn = register(connect(staging, check_same_thread=False))
        write_prints(conn, index=True)  # as the merge of an ingest writes them (staging has no indexes)
        base = number << 32
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' "
            "AND name NOT IN ('runs', 'files', 'sources', 'compiles')")]
        for table in tables:
            target = Path(out) / (PAYLOAD_PARTS if table == "payload_data" else "")
            if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                write_table(conn, EXPORTED_AS.get(table, table), target, id_base=base,
                            basename=f"part-{number}-{{i}}.parquet", exists="overwrite_or_ignore")
        rows = {}
        for table in DRIVER_TABLES:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            select = ", ".join(shifted_columns(conn, table, base))
            rows[table] = (columns, conn.execute(f"SELECT {select} FROM {table}").fetchall())
        conn.close()
        return {"path": path, "rows": rows, "envelopes": result.envelopes, "errors": result.errors}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spark_ingest(paths: list[str], out_dir: str | Path, *, master: str = "local[2]", replace: bool = False,
                 run_label: str | None = None, spark=None) -> dict:
    """Ingest logs with Spark into a Parquet export layout at out_dir; return the manifest.

    Written into a folder beside out_dir and swapped in when complete, as `export parquet` does: stopped or
    failing midway, it leaves out_dir as it was and nothing beside it."""
    files, problems = discover(paths)
    if problems:
        raise ExportError("; ".join(problems))
    target = Path(out_dir).resolve()
    check_out_dir(target, replace)
    try:
        with owned.atomic_dir(target, "export") as partial:
            return _spark_ingest_into(partial, files, master, run_label, spark)
    except owned.NotOwned as error:
        raise ExportError(str(error)) from None


def _spark_ingest_into(out: Path, files: list[Path], master: str, run_label: str | None, spark) -> dict:
    """spark_ingest's work, into the folder `out`."""
    own_session = spark is None
    if own_session:
        spark = session(master)
    try:
        items = [(number, str(path), str(out)) for number, path in enumerate(sorted(files), 1)]
        results = spark.sparkContext.parallelize(items, max(1, len(items))).map(ingest_file).collect()

        # Runs, on the driver, with the SQLite ingest's own grouping code.
        conn = connect(":memory:", check_same_thread=False)
        conn.isolation_level = None
        apply_schema(conn)
        for result in results:
            for table, (columns, rows) in result["rows"].items():
                conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                                 f"({', '.join('?' * len(columns))})", rows)
        from tlindex.ingest.runs import assign_runs

        assign_runs(conn, run_label, all_mine=True)
        manifest = new_manifest(conn)
        for table in ("runs", *DRIVER_TABLES):
            write_table(conn, table, out)
            manifest["tables"][table] = table_manifest(conn, table, conn.execute(
                f"SELECT count(*) FROM {table}").fetchone()[0])

        # Payloads repeat across files: Spark keeps one row per hash.
        parts = out / PAYLOAD_PARTS / "payloads"
        if parts.exists():
            spark.read.parquet(str(parts)).dropDuplicates(["hash"]).write.parquet(str(out / "payloads"))
            shutil.rmtree(out / PAYLOAD_PARTS)
        for table in sorted(p.name for p in out.iterdir() if p.is_dir()):
            if table not in manifest["tables"]:
                manifest["tables"][table] = table_manifest(conn, table, spark.read.parquet(str(out / table)).count())
        not_derived = derived_tables()
        for table in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' "
                                  "ESCAPE '\\'").fetchall():
            name = EXPORTED_AS.get(table[0], table[0])
            if name not in not_derived:
                manifest["tables"].setdefault(name, table_manifest(conn, name, 0))
        manifest["spark"] = {"master": master, "files": len(items),
                             "envelopes": sum(r["envelopes"] for r in results),
                             "ingest_errors": sum(r["errors"] for r in results),
                             "not_derived": not_derived}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2))
        return manifest
    finally:
        if own_session:
            spark.stop()


def session(master: str):
    """A SparkSession whose Python workers run this Python (so they import this tlindex)."""
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName("tlindex")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate())


SPARK_TYPES = {"int64": "BIGINT", "double": "DOUBLE", "large_string": "STRING", "large_binary": "BINARY"}


def spark_views(spark, out_dir: str | Path) -> None:
    """Register an export's (or spark-ingest's) tables as Spark SQL temp views, by name."""
    out = Path(out_dir)
    manifest = json.loads((out / MANIFEST).read_text())
    for table, info in manifest["tables"].items():
        if (out / table).is_dir():
            frame = spark.read.parquet(str(out / table)).select(*info["columns"])
        else:  # an empty table leaves no file
            schema = ", ".join(f"`{c}` {SPARK_TYPES.get(t, 'STRING')}" for c, t in info["columns"].items())
            frame = spark.createDataFrame([], schema)
        frame.createOrReplaceTempView(table)
