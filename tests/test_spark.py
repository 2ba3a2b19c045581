"""spark-ingest writes the same tables as `tlindex ingest` + `tlindex export parquet`.

Ids differ by design (a Spark task offsets its file's ids by file number << 32), so
the comparison replaces every id and id reference by the natural key of the row
it names: a file's path, a source's (file, pid), an envelope's (source, line), a
compile's (source, generation, compile id), a run's label.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import DATA, canonical, ingest

from tlindex.formats.parquet import export_parquet

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a JVM per session: minutes; CI runs them (-m "slow or not slow")

SCENARIOS = ["ddp_2ranks", "ddp_4ranks_diverge"]


def load(out: Path) -> dict[str, list[dict]]:
    import pyarrow.dataset as ds

    tables = {}
    for directory in sorted(p for p in out.iterdir() if p.is_dir()):
        dataset = ds.dataset(directory, format="parquet", partitioning="hive")
        tables[directory.name] = dataset.to_table().to_pylist()
    return tables


@pytest.fixture(scope="module")
def spark():
    from tlindex.formats.spark import session

    spark = session("local[2]")
    yield spark
    spark.stop()


def test_spark_ingest_equals_ingest_and_export(tmp_path, spark):
    from tlindex.formats.spark import spark_ingest

    paths = [str(DATA / name) for name in SCENARIOS]
    db = tmp_path / "traces.db"
    ingest(db, paths, jobs=1)
    export_parquet(db, tmp_path / "export")
    manifest = spark_ingest(paths, tmp_path / "spark", master="local[2]", spark=spark)
    assert manifest["spark"]["files"] == 6

    exported = load(tmp_path / "export")
    for run in exported["runs"]:  # which SQLite ingest wrote the run last (the gate's runs that arrived together)
        run["last_ingest"] = None
    expected, got = canonical(exported), canonical(load(tmp_path / "spark"))
    # what the SQLite ingest derives with its queries (findings, per-run answers) Spark does not: it says so
    assert set(got) == set(expected) - set(manifest["spark"]["not_derived"])
    assert not set(manifest["tables"]) & set(manifest["spark"]["not_derived"])
    for table in got:
        assert got[table] == expected[table], table
    # the 4-rank job is one run of 4 ranks on Spark too
    runs = {row["label"]: row for row in load(tmp_path / "spark")["runs"]}
    assert sorted(r["world_size"] for r in runs.values()) == [2, 4]


from test_export import engine_cases  # noqa: E402


@pytest.mark.parametrize("name,params", engine_cases())
def test_spark_sql_over_parquet_answers_like_sqlite(fixtures_db, tmp_path_factory, spark, name, params):
    from test_export import normalize, with_needed

    from tlindex.answers.queries import load_queries, run_sql
    from tlindex.formats.spark import spark_views

    out = tmp_path_factory.getbasetemp() / "spark-queries-export"
    if not out.exists():
        export_parquet(fixtures_db, out)
    conn = sqlite3.connect(fixtures_db)
    params = with_needed(conn, name, params)
    cursor = run_sql(conn, load_queries()[name].sql, {k: v for k, v in params.items() if v is not None})
    columns = [d[0] for d in cursor.description]
    expected = normalize(cursor.fetchall(), columns)
    spark_views(spark, out)
    sql = (Path(__file__).resolve().parents[1] / "queries" / "spark" / f"{name}.sql").read_text()
    frame = spark.sql(sql, args=params)
    assert frame.columns == columns
    assert normalize([tuple(row) for row in frame.collect()], columns) == expected
    assert expected
