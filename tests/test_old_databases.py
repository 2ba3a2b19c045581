"""Every database opens, or says why not in one line (issue 46): a database an earlier tlindex made, with each
earlier schema (the migrations up to N, for every N before the last: tests/old_schemas.py, the rows of a fresh ingest
of real logs copied in), is brought up to date by the first command or server that opens it, and then every command
and every page answers on it: no traceback, no 500. What a later migration derives from what is stored is derived, so
that every table holds what a fresh ingest of the same logs holds (migration 018: vLLM's piece compiles, which 010
added empty; 021: collective ops, op estimates and graph executions, which 002 added empty, guard identities and
compile prints, which 005 and 006 added NULL). A sample of schemas runs by default; with `-m slow`, every one is shown
to become the fresh database (its structure and rows), and every command of the click registry and every page answer
on the oldest.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, ingest, sqlite_tables
from crawl import crawl
from datasette.app import Datasette
from old_schemas import EARLIER, older_database

from tlindex import pages as routes
from tlindex.cli import cli

SCENARIOS = ("vllm_piecewise", "graph_breaks", "ddp_2ranks", "collectives_3ranks")
SAMPLE = ("001_initial", "004_compressed_payloads", "009_shared_views", "012_piece_attempts")
# The commands a reader runs first; -m slow runs every command of the registry (tests/test_odd_values.py RECIPES).
READING = (["runs"], ["runs", "--json"], ["show", "run", "1"], ["show", "compile", "1"], ["diff", "1", "2"],
           ["findings"], ["trend"], ["query", "top_graph_breaks"], ["query", "vllm_pieces", "-p", "run", "1"],
           ["show", "graph_breaks"], ["show", "vllm", "1"])


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """The scenarios ingested by this tlindex, one run each."""
    db = tmp_path_factory.mktemp("fresh") / "fresh.db"
    for scenario in SCENARIOS:
        assert not ingest(db, [str(DATA / scenario)], jobs=1).problems
    return db


def counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                             "'sqlite%' AND name NOT LIKE '%fts%' AND name != '_tlindex_migrations'")]
        return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in names}
    finally:
        conn.close()


def old(fresh: Path, tmp_path: Path, last: str) -> Path:
    return older_database(fresh, tmp_path / "traces.db", last)


def run_commands(db: Path, commands) -> list:
    failures = []
    for args in commands:
        result = CliRunner().invoke(cli, [*args, "--db", str(db)])
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or "Traceback" in result.output or result.exit_code not in (0, 1):
            failures.append((args, result.exit_code, repr(result.exception), result.output[-300:]))
    return failures


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("last", SAMPLE)
def test_a_reading_command_brings_an_older_database_up_to_date_and_every_reader_answers(fresh, tmp_path, last):
    db = old(fresh, tmp_path, last)
    assert run_commands(db, READING) == []
    conn = sqlite3.connect(db)
    applied = {name for (name,) in conn.execute("SELECT name FROM _tlindex_migrations")}
    conn.close()
    from old_schemas import MIGRATIONS

    assert applied == set(MIGRATIONS)
    assert sqlite_tables(db) == sqlite_tables(fresh)  # every row: copied (it existed then) or derived since
    assert counts(db)["piece_compiles"] > 0


def test_rows_the_normalizers_make_are_derived_for_a_database_made_before_their_tables(fresh, tmp_path):
    """Migrations 002, 005 and 006 came after 001: a database made by it holds none of their rows; the first command
    derives them from its stored records (said once on stderr) as a fresh ingest makes them, row for row."""
    db = old(fresh, tmp_path, "001_initial")
    expected = sqlite_tables(fresh)
    derived = ("collective_ops", "op_estimates", "graph_executions")
    assert all(expected[table] for table in derived)
    conn = sqlite3.connect(db)
    assert [t for (t,) in conn.execute("SELECT name FROM sqlite_master") if t in derived] == []  # (002 makes them)
    assert not {"identity"} & {row[1] for row in conn.execute("PRAGMA table_info(guards)")}  # (005 adds it)
    conn.close()
    first = CliRunner().invoke(cli, ["show", "run", "1", "--db", str(db)])
    assert first.exit_code == 0, first.output
    said = [line for line in first.stderr.splitlines() if "derived" in line]
    assert len(said) == 1 and "28 collective ops, 27 op estimates, 13 graph executions" in said[0], first.stderr
    after = sqlite_tables(db)
    assert {table: after[table] for table in derived} == {table: expected[table] for table in derived}
    assert after["guards"] == expected["guards"] and after["compiles"] == expected["compiles"]
    again = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert again.exit_code == 0 and "derived" not in again.stderr


async def crawl_database(db: Path, per_route: int | None):
    ds = Datasette([str(db)])
    await ds.invoke_startup()
    conn = sqlite3.connect(db)
    try:
        return await crawl(ds.client, conn, db.stem, per_route)
    finally:
        conn.close()


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
@pytest.mark.parametrize("last", SAMPLE[:2])
async def test_the_server_brings_an_older_database_up_to_date_and_every_page_answers(fresh, tmp_path, last):
    db = old(fresh, tmp_path, last)
    result = await crawl_database(db, per_route=2)
    assert not result.errors, result.errors[:3]
    assert set(result.reached) >= set(routes.BY_NAME) - {"provenance"}  # (no provenance in these scenarios: 404)


# Root writes a file whatever its mode says (CAP_DAC_OVERRIDE): where the tests run as root, as on CI, the command
# runs without that power (setpriv drops it from what the process may hold), as any other user would.
AS_A_USER = (["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"] if os.geteuid() == 0 else [])
CANNOT_DROP_ROOT = os.geteuid() == 0 and shutil.which("setpriv") is None


def _runs_read_only(fresh, tmp_path, last: str, unrecorded: str | None = None) -> subprocess.CompletedProcess:
    """`tlindex runs` on a database of schema `last` (less the record of migration `unrecorded`) that neither it nor
    its folder can be written."""
    db = old(fresh, tmp_path, last)
    if unrecorded:
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("DELETE FROM _tlindex_migrations WHERE name = ?", (unrecorded,))
        conn.close()
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        return subprocess.run([*AS_A_USER, sys.executable, "-m", "tlindex", "runs", "--db", str(db)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    finally:
        tmp_path.chmod(0o755)


@pytest.mark.skipif(CANNOT_DROP_ROOT, reason="root writes to a read-only file, and setpriv is missing")
def test_an_older_database_that_cannot_be_written_is_refused_in_one_line(fresh, tmp_path):
    result = _runs_read_only(fresh, tmp_path, "009_shared_views")
    assert result.returncode == 1 and "made by an older tlindex" in result.stdout, result.stdout
    assert len(result.stdout.strip().splitlines()) == 1


@pytest.mark.skipif(CANNOT_DROP_ROOT, reason="root writes to a read-only file, and setpriv is missing")
def test_a_read_only_database_that_lacks_only_derived_rows_is_read_as_it_is(fresh, tmp_path):
    """A migration that adds no table or column, only rows derived from what is stored (021), is not needed to read:
    a database without it that cannot be written is read, not refused. (Later migrations added tables after it, so no
    tlindex made such a database; it is made here by taking 021's record out of one of the last schema.)"""
    from old_schemas import MIGRATIONS

    result = _runs_read_only(fresh, tmp_path, MIGRATIONS[-1], unrecorded="021_derived_by_normalizers")
    assert result.returncode == 0 and "older tlindex" not in result.stdout, result.stdout


def structure(db: Path) -> list[str]:
    """The SQL of every table, index, view and trigger the migrations make (the full-text indexes are the ingest's)."""
    conn = sqlite3.connect(db)
    try:
        return sorted(sql for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
            "AND name NOT LIKE '%\\_fts%' ESCAPE '\\' AND name != '_tlindex_migrations'"))
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("last", EARLIER)
async def test_every_earlier_schema_becomes_the_fresh_database_by_a_command_and_by_the_server(fresh, tmp_path, last):
    """Opened first by a command, or first by the server, a database of every earlier schema ends as a fresh ingest
    of the same logs: the same tables, indexes, views and triggers, the same rows in every table of records. What
    every command and page answers on it is then what they answer on that one (below, and tests/test_odd_values.py
    on every fixture), so the whole sweep runs once rather than once per schema (14 minutes of CI's 90)."""
    by_command = old(fresh, tmp_path, last)
    assert run_commands(by_command, [["runs"]]) == []
    by_server = older_database(fresh, tmp_path / "served.db", last)
    ds = Datasette([str(by_server)])
    await ds.invoke_startup()
    assert (await ds.client.get("/served" + routes.path("runs"))).status_code == 200
    for db in (by_command, by_server):
        assert structure(db) == structure(fresh), db.name
        assert sqlite_tables(db) == sqlite_tables(fresh), db.name


@pytest.mark.slow
@pytest.mark.asyncio
async def test_every_command_and_page_on_the_oldest_schema(fresh, tmp_path):
    """The whole sweep on a database made by the first migration, which every later one has brought up to date."""
    from test_odd_values import RECIPES, Case

    last = EARLIER[0]
    db = old(fresh, tmp_path, last)
    runs = [str(n) for (n,) in sqlite3.connect(db).execute("SELECT id FROM runs ORDER BY id")]
    logs = tmp_path / "logs"
    shutil.copytree(DATA / SCENARIOS[1], logs)
    case = Case(logs, db, tmp_path, runs)
    failures = []
    for command, recipe in RECIPES.items():  # (run_commands adds --db: the recipes name it themselves)
        for args in recipe(case):
            result = CliRunner().invoke(cli, [*command, *args])
            crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
            if crashed or "Traceback" in result.output or result.exit_code not in (0, 1):
                failures.append((command, args, result.exit_code, repr(result.exception), result.output[-300:]))
    assert failures == []
    result = await crawl_database(older_database(fresh, tmp_path / "served.db", last), per_route=None)
    assert not result.errors, result.errors[:3]
