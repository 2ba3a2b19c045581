"""Each run's findings are computed once and stored; what is stored is what the registry computes now."""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner
from conftest import DATA, copy_db

from tlindex.answers.findings import findings
from tlindex.answers.findings.stored import STAMPS, TABLE, refresh, stale, store_findings, stored_findings
from tlindex.cli import cli
from tlindex.ingest.pipeline import ingest
from tlindex.ingest.runs import remove_runs
from tlindex.store.db import connect_read_only, write_database


def copy_of(fixtures_db, tmp_path):
    return copy_db(fixtures_db, tmp_path / "traces.db")


def test_stored_findings_are_what_the_registry_computes_on_every_fixture(fixtures_db, tmp_path):
    path = copy_of(fixtures_db, tmp_path)
    forget = sqlite3.connect(path)  # as the library's ingest leaves it (another test's `tlindex runs` may have stored)
    forget.executescript(f"DELETE FROM {TABLE}; DELETE FROM {STAMPS};")
    forget.close()
    conn = connect_read_only(path)
    runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    assert stale(conn) == runs  # nothing stored yet
    conn.close()
    assert store_findings(path) == len(runs)
    conn = connect_read_only(path)
    try:
        assert stale(conn) == []
        assert conn.execute(f"SELECT count(DISTINCT run_id) FROM {STAMPS}").fetchone()[0] == len(runs)
        stored = stored_findings(conn, runs)
        for run in runs:
            assert [f.as_dict() for f in stored[run]] == [f.as_dict() for f in findings(conn, run)], run
        assert sum(len(found) for found in stored.values()) == conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
    finally:
        conn.close()
    assert store_findings(path) == 0  # computed once


def test_a_run_that_grows_or_goes_is_computed_again_or_forgotten(tmp_path):
    path = tmp_path / "traces.db"
    ingest(path, [str(DATA / "graph_breaks")], jobs=1)
    ingest(path, [str(DATA / "recompiles")], jobs=1)
    assert store_findings(path) == 2
    conn = write_database(path)
    try:
        first, second = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
        conn.execute("UPDATE sources SET bytes = bytes + 1 WHERE run_id = ?", (second,))  # as a continued log does
        assert stale(conn) == [second]
        assert refresh(conn) == 1 and stale(conn) == []
        remove_runs(conn, [first])
        assert conn.execute(f"SELECT count(*) FROM {TABLE} WHERE run_id = ?", (first,)).fetchone()[0] == 0
        assert conn.execute(f"SELECT count(*) FROM {STAMPS} WHERE run_id = ?", (first,)).fetchone()[0] == 0
    finally:
        conn.close()


def test_a_new_version_of_the_checks_makes_every_stored_finding_stale(tmp_path, monkeypatch):
    from tlindex.answers.findings import stored

    path = tmp_path / "traces.db"
    ingest(path, [str(DATA / "graph_breaks")], jobs=1)
    store_findings(path)
    monkeypatch.setattr(stored, "FINDINGS_VERSION", stored.FINDINGS_VERSION + 1)
    conn = connect_read_only(path)
    try:
        assert stale(conn) == [1]
    finally:
        conn.close()


def test_a_check_registered_later_makes_every_stored_finding_stale(tmp_path, monkeypatch):
    from tlindex.answers.findings import registry

    path = tmp_path / "traces.db"
    ingest(path, [str(DATA / "graph_breaks")], jobs=1)
    store_findings(path)
    monkeypatch.setitem(registry.CHECKS, "throwaway", registry.NOT_COMPUTED)
    conn = connect_read_only(path)
    try:
        assert stale(conn) == [1]
    finally:
        conn.close()


def test_the_first_list_over_runs_stores_the_findings_and_reads_them_after(tmp_path):
    path = tmp_path / "traces.db"
    result = CliRunner().invoke(cli, ["ingest", str(DATA / "graph_breaks"), "--db", str(path), "--silent"])
    assert result.exit_code == 0, result.output
    conn = connect_read_only(path)
    assert stale(conn) == [1]  # ingest stays lean: it computes no finding
    conn.close()
    listed = CliRunner().invoke(cli, ["runs", "--db", str(path)])
    conn = connect_read_only(path)
    try:
        assert stale(conn) == []
        kept = conn.execute(f"SELECT text FROM {TABLE} WHERE run_id = 1 ORDER BY position").fetchall()
    finally:
        conn.close()
    worst = [text for (text,) in kept if "graph break" in text][0]
    assert worst in listed.stdout


def test_a_server_stores_what_its_pages_computed(fixtures_db, tmp_path):
    import time

    from tlindex.answers.findings.stored import BACKGROUND
    from tlindex.pages.rows import Args
    from tlindex.pages.runs import runs_data

    path = copy_of(fixtures_db, tmp_path)
    forget = sqlite3.connect(path)
    forget.executescript(f"DELETE FROM {TABLE}; DELETE FROM {STAMPS};")
    forget.close()
    conn = connect_read_only(path)
    try:
        assert stale(conn)
        BACKGROUND.served.add(str(path.resolve()))  # as the plugin does for the databases it serves
        runs_data(conn, Args())  # computes the runs it shows, and has them stored meanwhile
        for _ in range(300):
            if not stale(conn, [run["id"] for run in runs_data(conn, Args())["runs"]]):
                break
            time.sleep(0.1)
        assert stale(conn) == []
    finally:
        BACKGROUND.served.discard(str(path.resolve()))
        conn.close()


def test_a_database_made_before_gets_its_findings_once_and_says_so(fixtures_db, tmp_path):
    path = copy_of(fixtures_db, tmp_path)
    conn = sqlite3.connect(path)
    conn.executescript(f"DROP TABLE {TABLE}; DROP TABLE {STAMPS}; "
                       "DELETE FROM _tlindex_migrations WHERE name = '015_run_findings'")
    conn.close()
    first = CliRunner().invoke(cli, ["runs", "--db", str(path), "--all"])
    assert first.exit_code == 0, first.output
    assert "storing the findings of" in first.stderr
    again = CliRunner().invoke(cli, ["runs", "--db", str(path), "--all"])
    assert "storing the findings" not in again.stderr and again.stdout == first.stdout
