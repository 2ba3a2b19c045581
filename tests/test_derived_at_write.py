"""The writer computes what readers read (issue 61): the ingest that makes a run whole stores its findings and its rows
of the canned queries asked of every run, in the same transaction; what is stored is what the registry and the
queries compute from the raw tables; nothing a reader does writes to the database."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, copy_db, ingest

from tlindex import Database
from tlindex.answers import derived
from tlindex.answers.findings import findings
from tlindex.answers.queries import load_queries, run_sql
from tlindex.cli import cli

TABLES = derived.stored_tables()


def answer(conn: sqlite3.Connection, name: str, run: int | str = "") -> list[tuple]:
    return [tuple(row) for row in run_sql(conn, load_queries()[name].sql, {"run": str(run), "limit": "100000"})]


def stored_rows(conn: sqlite3.Connection, table: str, run: int) -> list[tuple]:
    columns = [c for c in derived.table_columns(conn, table) if c != "position"]
    return sorted(conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE run_id = ?", (run,)).fetchall(),
                  key=repr)


def computed_rows(conn: sqlite3.Connection, name: str, cte: str, table: str, run: int) -> list[tuple]:
    """The rows the query's CTE computes from the raw tables for `run` alone, in the stored table's columns."""
    cursor = run_sql(conn, derived.per_run_sql(load_queries()[name].sql, cte), {"run": str(run), "limit": ""})
    names = [d[0] for d in cursor.description]
    columns = [c for c in derived.table_columns(conn, table) if c != "position"]
    return sorted((tuple(row[names.index(c)] for c in columns) for row in cursor), key=repr)


def test_every_run_of_every_fixture_is_stored_as_the_registry_and_the_queries_compute_it(fixtures_db):
    with Database(fixtures_db) as db:
        conn = db.conn
        runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
        assert derived.derived(conn, runs) == set(runs)  # the ingest stored every run it made
        stored = derived.stored_findings(conn, runs)
        for run in runs:
            assert [f.as_dict() for f in stored[run]] == [f.as_dict() for f in findings(conn, run)], run
            for name, parts in derived.STORED.items():
                for cte, table in parts:
                    assert stored_rows(conn, table, run) == computed_rows(conn, name, cte, table, run), (name, run)
        everything = {name: answer(conn, name) for name in derived.STORED}
        assert all(everything.values())  # the fixtures give each query rows


def test_a_query_over_every_run_reads_the_stored_rows_and_computes_a_run_not_derived(fixtures_db, tmp_path):
    path = copy_db(fixtures_db, tmp_path / "traces.db")
    with Database(path) as db:
        expected = {name: answer(db.conn, name) for name in derived.STORED}
    conn = sqlite3.connect(path)
    with conn:  # as a run an ingest is still merging looks: not derived yet
        conn.execute("DELETE FROM derived_runs WHERE run_id = (SELECT min(id) FROM runs)")
    conn.close()
    with Database(path) as db:
        assert {name: answer(db.conn, name) for name in derived.STORED} == expected
        first = db.conn.execute("SELECT min(id) FROM runs").fetchone()[0]
        assert [f.as_dict() for f in db.findings(first)] == \
            [f.as_dict() for f in findings(db.conn, first)]


def test_a_run_that_grows_is_derived_again_by_the_ingest_that_grows_it(tmp_path):
    """A log still being written, ingested twice: the second ingest continues it and derives its run again."""
    log = next((DATA / "recompiles").glob("*.log"))
    lines = log.read_bytes().splitlines(keepends=True)
    half = next(i for i in range(len(lines) // 2, len(lines)) if not lines[i].startswith(b"\t"))
    growing = tmp_path / "logs" / log.name
    growing.parent.mkdir()
    growing.write_bytes(b"".join(lines[:half]))
    path = tmp_path / "traces.db"
    ingest(path, [str(growing)], jobs=1)
    with Database(path) as db:
        before = [f.text for f in db.findings(1)]
    with open(growing, "ab") as out:
        out.write(b"".join(lines[half:]))
    assert ingest(path, [str(growing)], jobs=1).continued == 1
    with Database(path) as db:
        after = [f.as_dict() for f in db.findings(1)]
        assert after == [f.as_dict() for f in findings(db.conn, 1)] and [f["text"] for f in after] != before


def test_a_log_rewritten_in_place_at_the_same_size_gets_its_new_findings(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "run.log"
    shutil.copy(next((DATA / "graph_breaks").glob("*.log")), log)
    path = tmp_path / "traces.db"
    ingest(path, [str(logs)], jobs=1)
    other = next((DATA / "recompiles").glob("*.log")).read_bytes()
    size = log.stat().st_size
    log.write_bytes((other + b"\n" * size)[:size] if len(other) < size else other[:size])  # same size, other content
    os.utime(log, (log.stat().st_atime, log.stat().st_mtime + 5))
    ingest(path, [str(logs)], jobs=1)
    with Database(path) as db:
        (run,) = [row[0] for row in db.conn.execute("SELECT id FROM runs")]
        assert [f.as_dict() for f in db.findings(run)] == [f.as_dict() for f in findings(db.conn, run)]


def test_a_run_whose_ranks_an_ingest_names_is_stored_with_its_divergence(tmp_path):
    """The runs list and `tlindex findings` say a diverging rank, as the run page computes it (a reader once stored
    the findings of a 4-rank run before its ranks were named, and its divergence error was gone for good)."""
    path = tmp_path / "traces.db"
    ingest(path, [str(DATA / "ddp_4ranks_diverge")], jobs=2)
    with Database(path) as db:
        listed = db.runs()
        stored = db.findings(listed[0]["id"])
        assert [f.as_dict() for f in stored] == [f.as_dict() for f in findings(db.conn, listed[0]["id"])]
    assert any(f.kind.startswith("divergence") and f.severity == "error" for f in stored)
    assert listed[0]["worst_finding"] == next(f.text for f in stored if f.severity == "error")


def test_a_removed_run_takes_what_was_derived_of_it(tmp_path):
    path = tmp_path / "traces.db"
    ingest(path, [str(DATA / "graph_breaks")], jobs=1)
    ingest(path, [str(DATA / "vllm_piecewise")], jobs=1)
    with Database(path, write=True) as db:
        db.remove_runs(["1"])
        for table in ("derived_runs", "run_findings", *TABLES):
            assert db.execute(f"SELECT count(*) FROM {table} WHERE run_id = 1").fetchone()[0] == 0, table
        assert db.execute("SELECT count(*) FROM run_findings WHERE run_id = 2").fetchone()[0] > 0


def _state(path: Path) -> str:
    """The database's contents as bytes on disk, the WAL folded in first."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


READERS = (["runs"], ["runs", "--json"], ["findings"], ["findings", "1", "--json"], ["search", "graph"],
           ["trend"], ["show", "run", "1"], ["query", "top_graph_breaks"], ["query", "run_health"], ["diff", "1", "2"])


def test_nothing_a_reader_does_writes_to_the_database(fixtures_db, tmp_path):
    path = copy_db(fixtures_db, tmp_path / "traces.db")
    before = _state(path)
    for args in READERS:
        result = CliRunner().invoke(cli, [*args, "--db", str(path)])
        assert result.exit_code in (0, 1) and result.exception is None or isinstance(result.exception, SystemExit), \
            (args, result.output)
    assert _state(path) == before


def test_a_database_made_before_derives_every_run_once_and_indexes_its_payloads(fixtures_db, tmp_path):
    from old_schemas import older_database

    path = older_database(copy_db(fixtures_db, tmp_path / "fresh.db"), tmp_path / "traces.db", "023_open_spans_index")
    conn = sqlite3.connect(path)
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'payloads_fts'").fetchone()
    conn.close()
    first = CliRunner().invoke(cli, ["runs", "--db", str(path), "--all"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli, ["runs", "--db", str(path), "--all"])
    assert again.stdout == first.stdout
    with Database(path) as db:
        runs = [row[0] for row in db.conn.execute("SELECT id FROM runs")]
        assert derived.derived(db.conn, runs) == set(runs)
        assert db.search("graph_break", limit=5)[0]


def test_every_stored_query_marks_what_it_stores():
    queries = load_queries()
    for name, parts in derived.STORED.items():
        sql = queries[name].sql
        assert sql.count(derived.MARKER) == 1, name
        for cte, _ in parts:
            assert f"{cte} AS (" in sql.split(derived.MARKER)[0], (name, cte)
    with pytest.raises(ValueError):
        derived.per_run_sql("SELECT 1", "computed")


# What is stored, as derived.definitions_digest() says it. A change to the SQL above a stored query's MARKER changes
# the rows stored: it ships with a schema migration whose step derives every run again (as 024_derived_at_write's
# does: tlindex.answers.derived.derive_every_run), then the new digest is pinned here.
PINNED = "40255e79ce24f2a0"  # 027-029: compile_times, findings, ranks (an export context: 027's status none)


def test_a_change_to_what_is_stored_comes_with_a_migration():
    assert derived.definitions_digest() == PINNED, (
        "the SQL a stored query computes per run changed: add a migration whose step derives every run again")
