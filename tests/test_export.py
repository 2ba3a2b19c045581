"""Parquet export: read back with pyarrow, and queried with DuckDB it answers like SQLite."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import connect

from tlindex.answers.queries import load_queries, run_sql
from tlindex.cli import cli
from tlindex.formats.parquet import ExportError, declared_columns, duckdb_views, export_parquet, schema_tables

ROOT = Path(__file__).resolve().parents[1]
LIST_COLUMNS = {"compile_ids", "ranks", "functions"}


@pytest.fixture(scope="module")
def export_dir(fixtures_db, tmp_path_factory):
    out = tmp_path_factory.mktemp("parquet") / "out"
    export_parquet(fixtures_db, out)
    return out


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_every_table_reads_back_equal(fixtures_db, export_dir):
    import pyarrow.dataset as ds

    conn = connect(fixtures_db)
    manifest = json.loads((export_dir / "_manifest.json").read_text())
    assert set(manifest["tables"]) == set(schema_tables(conn))
    assert manifest["schema_migrations"] == sorted(p.stem for p in (ROOT / "schema").glob("[0-9]*.sql"))
    for table, info in manifest["tables"].items():
        columns = [name for name, _ in declared_columns(conn, table)]  # payloads: the view's text
        (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert info["rows"] == count, table
        if count == 0:
            continue
        dataset = ds.dataset(export_dir / table, format="parquet",
                             partitioning="hive" if info["partitioning"] else None)
        exported = dataset.to_table().to_pylist()
        assert len(exported) == count, table
        got = Counter(tuple(row[c] for c in columns) for row in exported)
        want = Counter(tuple(row) for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table}"))
        assert got == want, table
        if "id" in columns:  # ids survive the export as they are: rows can be joined as in SQLite
            assert sorted(row["id"] for row in exported) == [r[0] for r in conn.execute(
                f"SELECT id FROM {table} ORDER BY id")], table


def test_tables_with_run_and_rank_are_hive_partitioned(export_dir):
    manifest = json.loads((export_dir / "_manifest.json").read_text())
    assert manifest["tables"]["compiles"]["partitioning"] == ["run_id", "rank"]
    assert manifest["tables"]["envelopes"]["partitioning"] == ["rank"]
    assert manifest["tables"]["frames"]["partitioning"] == []
    assert list((export_dir / "compiles").glob("run_id=*/rank=0/*.parquet"))


def test_reexport_is_explicit(fixtures_db, export_dir, tmp_path):
    with pytest.raises(ExportError, match="--replace"):
        export_parquet(fixtures_db, export_dir)
    out = tmp_path / "again"
    runner = CliRunner()
    result = runner.invoke(cli, ["export", "parquet", str(out), "--db", str(fixtures_db), "-t", "runs", "-t", "compiles"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [".tlindex-owned", "_manifest.json", "compiles", "runs"]
    result = runner.invoke(cli, ["export", "parquet", str(out), "--db", str(fixtures_db), "-t", "runs"])
    assert result.exit_code == 1 and "--replace" in result.output
    result = runner.invoke(cli, ["export", "parquet", str(out), "--db", str(fixtures_db), "-t", "runs", "--replace"])
    assert result.exit_code == 0 and sorted(p.name for p in out.iterdir()) == [".tlindex-owned", "_manifest.json", "runs"]


def normalize(rows: list[tuple], columns: list[str]) -> Counter:
    """Rows as comparable values: lists compared as sets, numbers and keys as text."""
    out = []
    for row in rows:
        values = []
        for column, value in zip(columns, row):
            if column in LIST_COLUMNS and isinstance(value, str):
                value = ",".join(sorted(set(value.split(","))))
            values.append(None if value is None else str(value))
        out.append(tuple(values))
    return Counter(out)


def engine_cases() -> list[tuple[str, dict]]:
    """Every canned query with its parameters unset ("all"; limits high enough to avoid ties)."""
    cases = []
    for name, query in sorted(load_queries().items()):
        params = {p: (100000 if p == "limit" else None) for p, _ in query.params}
        cases.append((name, params))
        if "by" in params:
            cases += [(name, {**params, "by": by}) for by in ("compile", "emitter", "rank", "run")]
    return cases


def with_needed(conn, name: str, params: dict) -> dict:
    """The parameters, with a run given to a query that needs one (compile_time, guards_diff): the first run with
    recompiles (it cannot be asked of every run)."""
    if not load_queries()[name].needs:
        return params
    return {**params, "run": conn.execute("SELECT min(run_id) FROM compiles WHERE frame_compile_id > 0").fetchone()[0]}


@pytest.mark.parametrize("name,params", engine_cases())
def test_duckdb_over_parquet_answers_like_sqlite(fixtures_db, export_dir, name, params):
    duckdb = pytest.importorskip("duckdb")
    conn = connect(fixtures_db)
    params = with_needed(conn, name, params)
    cursor = run_sql(conn, load_queries()[name].sql, {k: v for k, v in params.items() if v is not None})
    columns = [d[0] for d in cursor.description]
    expected = normalize(cursor.fetchall(), columns)
    con = duckdb.connect()
    for statement in duckdb_views(export_dir):
        con.execute(statement)
    sql = (ROOT / "queries" / "duckdb" / f"{name}.sql").read_text()
    result = con.execute(sql, params)
    assert [d[0] for d in result.description] == columns
    assert normalize(result.fetchall(), columns) == expected
    assert expected  # the fixtures give every one of these an answer


def test_spark_queries_are_the_translation_of_the_duckdb_queries():
    from tlindex.formats.dialects import duckdb_to_spark

    duckdb_files = sorted((ROOT / "queries" / "duckdb").glob("*.sql"))
    assert [p.stem for p in duckdb_files] == sorted(load_queries())  # every canned query has both
    for path in duckdb_files:
        assert (ROOT / "queries" / "spark" / path.name).read_text() == duckdb_to_spark(path.read_text()), \
            "run: python -m tlindex.formats.dialects"


def test_duckdb_queries_are_generated_from_the_sqlite_ones_but_those_kept_by_hand():
    from tlindex.formats.dialects import DUCKDB_BY_HAND, sqlite_to_duckdb

    assert set(DUCKDB_BY_HAND) <= set(load_queries())
    generated = [name for name in sorted(load_queries()) if name not in DUCKDB_BY_HAND]
    assert len(generated) >= 4  # (compile_time_totals kept by hand since it reads stored rows: migration 022; it and
    # compile_time read the view compile_times, which Parquet does not carry: migration 027)
    for name in generated:
        assert (ROOT / "queries" / "duckdb" / f"{name}.sql").read_text() == \
            sqlite_to_duckdb(name, (ROOT / "queries" / f"{name}.sql").read_text()), "run: python -m tlindex.formats.dialects"
