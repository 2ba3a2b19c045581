"""Every database opens, or says why not in one line (issue 46): a database an earlier tlindex made, with each
earlier schema (the migrations up to N, for every N before the last: tests/old_schemas.py, the rows of a fresh ingest
of real logs copied in), is brought up to date by the first command or server that opens it, and then every command
and every page answers on it: no traceback, no 500. What a later migration derives from what is stored is derived
(migration 018: vLLM's piece compiles, which migration 010 added empty). A sample of schemas runs by default; every
one, with every command of the click registry and every page, with `-m slow`.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA
from crawl import crawl
from old_schemas import EARLIER, older_database

from tlindex import pages as routes
from tlindex.cli import cli
from tlindex.ingest.pipeline import ingest

SCENARIOS = ("vllm_piecewise", "graph_breaks", "ddp_2ranks")
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


@pytest.mark.parametrize("last", SAMPLE)
def test_a_reading_command_brings_an_older_database_up_to_date_and_every_reader_answers(fresh, tmp_path, last):
    db = old(fresh, tmp_path, last)
    assert run_commands(db, READING) == []
    conn = sqlite3.connect(db)
    applied = {name for (name,) in conn.execute("SELECT name FROM _tlindex_migrations")}
    conn.close()
    from old_schemas import MIGRATIONS

    assert applied == set(MIGRATIONS)
    now, expected = counts(db), counts(fresh)
    # every table holds what a fresh ingest holds: copied (it existed then) or derived since (piece_compiles)
    derived_or_kept = {"piece_compiles", *(t for t in counts(older_database(fresh, tmp_path / "again.db", last)))}
    assert {t: now[t] for t in derived_or_kept if t in expected} == {t: expected[t] for t in derived_or_kept if t in expected}
    assert now["piece_compiles"] == expected["piece_compiles"] > 0


async def crawl_database(db: Path, per_route: int | None):
    from datasette.app import Datasette

    ds = Datasette([str(db)])
    await ds.invoke_startup()
    conn = sqlite3.connect(db)
    try:
        return await crawl(ds.client, conn, db.stem, per_route)
    finally:
        conn.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("last", SAMPLE[:2])
async def test_the_server_brings_an_older_database_up_to_date_and_every_page_answers(fresh, tmp_path, last):
    db = old(fresh, tmp_path, last)
    result = await crawl_database(db, per_route=2)
    assert not result.errors, result.errors[:3]
    assert set(result.reached) >= set(routes.BY_NAME) - {"provenance"}  # (no provenance in these scenarios: 404)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only file")
def test_an_older_database_that_cannot_be_written_is_refused_in_one_line(fresh, tmp_path):
    db = old(fresh, tmp_path, "009_shared_views")
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        result = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    finally:
        tmp_path.chmod(0o755)
    assert result.exit_code == 1 and "made by an older tlindex" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("last", EARLIER)
async def test_every_command_and_page_on_every_earlier_schema(fresh, tmp_path, last):
    from test_odd_values import RECIPES, Case

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
