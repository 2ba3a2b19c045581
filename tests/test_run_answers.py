"""The canned queries asked of every run read each run's rows stored once (tlindex.answers.run_answers); what is
stored is what the query computes from the raw tables, for every run of every fixture, and a stale run is computed."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import DATA, copy_db

from tlindex.answers import run_answers
from tlindex.answers.findings.stored import store_findings
from tlindex.answers.queries import load_queries, run_sql
from tlindex.ingest.pipeline import ingest
from tlindex.ingest.runs import remove_runs
from tlindex.store.db import write_database

TABLES = [table for parts in run_answers.STORED.values() for _, table in parts]


def answer(conn: sqlite3.Connection, name: str, run: int | str = "") -> list[tuple]:
    return [tuple(row) for row in run_sql(conn, load_queries()[name].sql, {"run": str(run), "limit": "100000"})]


def stored_rows(conn: sqlite3.Connection, table: str, run: int) -> list[tuple]:
    columns = [c for c in run_answers.table_columns(conn, table) if c != "position"]
    return sorted(conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE run_id = ?", (run,)).fetchall(),
                  key=repr)


def computed_rows(conn: sqlite3.Connection, name: str, cte: str, table: str, run: int) -> list[tuple]:
    """The rows the query's CTE computes from the raw tables for `run` alone, in the stored table's columns."""
    cursor = run_sql(conn, run_answers.per_run_sql(load_queries()[name].sql, cte), {"run": str(run), "limit": ""})
    names = [d[0] for d in cursor.description]
    columns = [c for c in run_answers.table_columns(conn, table) if c != "position"]
    return sorted((tuple(row[names.index(c)] for c in columns) for row in cursor), key=repr)


@pytest.fixture
def conn(fixtures_db, tmp_path):
    path = copy_db(fixtures_db, tmp_path / "traces.db")
    conn = write_database(path)
    with conn:
        for table in ("run_answers_stamps", *TABLES):  # as the library's ingest leaves it (nothing stored)
            conn.execute(f"DELETE FROM {table}")
    yield conn
    conn.close()


def test_stored_answers_are_what_each_query_computes_on_every_fixture(conn):
    runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    assert run_answers.stale(conn) == runs
    computed = {name: answer(conn, name) for name in run_answers.STORED}
    assert all(computed.values())  # the fixtures give each query rows
    assert run_answers.store_answers(conn) == len(runs)
    assert run_answers.stale(conn) == [] and run_answers.store_answers(conn) == 0  # stored once
    for name, parts in run_answers.STORED.items():
        assert answer(conn, name) == computed[name], name  # every run's answer, now from the stored rows
        for run in runs:
            for cte, table in parts:  # each run's stored rows are what the query computes of that run alone
                assert stored_rows(conn, table, run) == computed_rows(conn, name, cte, table, run), (name, table, run)
    for name in ("run_health", "compile_time_totals", "vllm_pieces", "rank_divergence"):  # one run asked: its rows
        cursor = run_sql(conn, load_queries()[name].sql, {"run": str(runs[0])})
        at = [d[0] for d in cursor.description].index("run_id")
        cursor.fetchall()
        for run in runs:
            assert answer(conn, name, run) == [row for row in computed[name] if row[at] == run], (name, run)


def test_a_stale_run_is_computed_and_the_others_read_stored(conn):
    runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    run_answers.store_answers(conn)
    expected = {name: answer(conn, name) for name in run_answers.STORED}
    grown = conn.execute("SELECT min(run_id) FROM graph_break_events g JOIN compiles c ON c.id = g.compile").fetchone()[0]
    with conn:  # what a stored row is then, to show it is not read: a stale run's rows are computed again
        conn.execute("UPDATE sources SET bytes = bytes + 1 WHERE run_id = ?", (grown,))  # as a continued log does
        conn.execute("UPDATE run_graph_break_groups SET breaks = breaks + 1000 WHERE run_id = ?", (grown,))
        conn.execute("UPDATE run_health_stored SET compiles = compiles + 1000 WHERE run_id = ?", (grown,))
    assert run_answers.stale(conn) == [grown]
    assert answer(conn, "top_graph_breaks") == expected["top_graph_breaks"]
    assert answer(conn, "run_health") == expected["run_health"]
    assert run_answers.store_answers(conn) == 1 and run_answers.stale(conn) == []
    assert answer(conn, "top_graph_breaks") == expected["top_graph_breaks"]
    with conn:  # a stored row of a current run is what is read (nothing computes it again)
        conn.execute("UPDATE run_health_stored SET compiles = -1 WHERE run_id = ?", (grown,))
    assert [row[4] for row in answer(conn, "run_health") if row[0] == grown] == [-1]
    with conn:  # another version or migration: every run is stale
        conn.execute("UPDATE run_answers_stamps SET stamp = '0:' || stamp")
    assert run_answers.stale(conn) == runs
    assert answer(conn, "run_health") == expected["run_health"]


def test_a_removed_run_takes_its_rows_and_ingest_stores_a_new_one(tmp_path):
    path = tmp_path / "traces.db"
    ingest(path, [str(DATA / "graph_breaks")], jobs=1)
    ingest(path, [str(DATA / "recompiles")], jobs=1)
    assert store_findings(path) == 2  # the findings' storing stores the answers too
    conn = write_database(path)
    try:
        first, second = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
        assert run_answers.stale(conn) == []
        assert conn.execute("SELECT count(*) FROM run_graph_break_groups WHERE run_id = ?", (first,)).fetchone()[0]
        remove_runs(conn, [first])
        for table in ("run_answers_stamps", *TABLES):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", (first,)).fetchone()[0] == 0, table
        assert run_answers.stale(conn) == []
    finally:
        conn.close()
    ingest(path, [str(DATA / "graph_breaks")], jobs=1)
    conn = write_database(path)
    try:
        assert len(run_answers.stale(conn)) == 1
    finally:
        conn.close()
    assert store_findings(path) == 1
    conn = write_database(path)
    try:
        assert run_answers.stale(conn) == []
    finally:
        conn.close()


def test_every_stored_query_marks_what_it_stores():
    queries = load_queries()
    for name, parts in run_answers.STORED.items():
        sql = queries[name].sql
        assert sql.count(run_answers.MARKER) == 1, name
        for cte, _ in parts:
            assert f"{cte} AS (" in sql.split(run_answers.MARKER)[0], (name, cte)
    with pytest.raises(ValueError):
        run_answers.per_run_sql("SELECT 1", "computed")


# What is stored, as run_answers.definitions_digest() says it, and the version run_answers_now stamps it with.
# A change to the SQL above a stored query's MARKER changes the rows stored: write a migration that recreates the
# view run_answers_now with the next version (so that every database's stored rows go stale), then pin both here.
PINNED = ("e10089736ea21b25", "1")


def test_a_change_to_what_is_stored_comes_with_a_new_version():
    import re

    from tlindex.store.db import schema_views

    version = re.search(r"'(\d+):' \|\|", schema_views()["run_answers_now"]).group(1)
    assert (run_answers.definitions_digest(), version) == PINNED, (
        "the SQL a stored query computes per run changed: a migration gives run_answers_now its next version")
