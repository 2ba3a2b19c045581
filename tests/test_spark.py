"""spark-ingest writes the same tables as `tlindex ingest` + `tlindex export parquet`.

Ids differ by design (a Spark task offsets its file's ids by file number << 32), so
the comparison replaces every id and id reference by the natural key of the row
it names: a file's path, a source's (file, pid), an envelope's (source, line), a
compile's (source, generation, compile id), a run's label.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from conftest import DATA
from tlindex.db import apply_schema
from tlindex.export import export_parquet
from tlindex.ingest import ingest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SCENARIOS = ["ddp_2ranks", "ddp_4ranks_diverge"]


def load(out: Path) -> dict[str, list[dict]]:
    import pyarrow.dataset as ds

    tables = {}
    for directory in sorted(p for p in out.iterdir() if p.is_dir()):
        dataset = ds.dataset(directory, format="parquet", partitioning="hive")
        tables[directory.name] = dataset.to_table().to_pylist()
    return tables


def canonical(tables: dict[str, list[dict]]) -> dict[str, Counter]:
    conn = sqlite3.connect(":memory:")
    apply_schema(conn)
    references = {t: {r[3]: r[2] for r in conn.execute(f"PRAGMA foreign_key_list({t})")} for t in tables}
    keys: dict[str, dict[int, object]] = {}
    rows = {t: {r["id"]: r for r in tables.get(t, [])} for t in ("files", "runs", "sources", "envelopes", "compiles")}
    keys["files"] = {i: r["path"] for i, r in rows["files"].items()}
    keys["runs"] = {i: r["label"] for i, r in rows["runs"].items()}
    keys["sources"] = {i: (keys["files"][r["file_id"]], r["pid"]) for i, r in rows["sources"].items()}
    keys["envelopes"] = {i: (keys["sources"][r["source_id"]], r["line"]) for i, r in rows["envelopes"].items()}
    keys["compiles"] = {i: (keys["sources"][r["source_id"]], r["generation"], r["compile_id"])
                        for i, r in rows["compiles"].items()}
    result = {}
    for table, table_rows in tables.items():
        canon = Counter()
        for row in table_rows:
            values = []
            for column in sorted(row):
                value = row[column]
                if column == "id":
                    value = keys[table][value] if table in keys else None
                elif column in references[table] and references[table][column] in keys and value is not None:
                    value = keys[references[table][column]][value]
                elif column == "ingested_at":
                    value = None
                values.append((column, value))
            canon[tuple(values)] += 1
        result[table] = canon
    return result


@pytest.fixture(scope="module")
def spark():
    from tlindex.spark import session

    spark = session("local[2]")
    yield spark
    spark.stop()


def test_spark_ingest_equals_ingest_and_export(tmp_path, spark):
    from tlindex.spark import spark_ingest

    paths = [str(DATA / name) for name in SCENARIOS]
    db = tmp_path / "traces.db"
    ingest(db, paths, jobs=1)
    export_parquet(db, tmp_path / "export")
    manifest = spark_ingest(paths, tmp_path / "spark", master="local[2]", spark=spark)
    assert manifest["spark"]["files"] == 6

    expected, got = canonical(load(tmp_path / "export")), canonical(load(tmp_path / "spark"))
    assert set(got) == set(expected)
    for table in expected:
        assert got[table] == expected[table], table
    # the 4-rank job is one run of 4 ranks on Spark too
    runs = {row["label"]: row for row in load(tmp_path / "spark")["runs"]}
    assert sorted(r["world_size"] for r in runs.values()) == [2, 4]


from test_export import engine_cases  # noqa: E402


@pytest.mark.parametrize("name,params", engine_cases())
def test_spark_sql_over_parquet_answers_like_sqlite(fixtures_db, tmp_path_factory, spark, name, params):
    from test_export import normalize
    from tlindex.queries import load_queries, run_sql
    from tlindex.spark import spark_views

    out = tmp_path_factory.getbasetemp() / "spark-queries-export"
    if not out.exists():
        export_parquet(fixtures_db, out)
    conn = sqlite3.connect(fixtures_db)
    cursor = run_sql(conn, load_queries()[name].sql, {k: v for k, v in params.items() if v is not None})
    columns = [d[0] for d in cursor.description]
    expected = normalize(cursor.fetchall(), columns)
    spark_views(spark, out)
    sql = (Path(__file__).resolve().parents[1] / "queries" / "spark" / f"{name}.sql").read_text()
    frame = spark.sql(sql, args=params)
    assert frame.columns == columns
    assert normalize([tuple(row) for row in frame.collect()], columns) == expected
    assert expected
