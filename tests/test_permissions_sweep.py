"""Permissions follow what a request reads: every view, full-text index and canned query of a tlindex
database is refused to an actor denied a table behind it, in JSON, CSV and HTML.

The cases come from the database itself (sqlite_master) and from load_queries(), and the tables behind
each are found here, by this test's own authorizer, not by the code under test: a view added to the
schema tomorrow is swept the day it is added, and a table the plugin misses fails the sweep.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from conftest import connect
from datasette.app import Datasette

DATASETTE_1 = hasattr(Datasette, "allowed")


def _datasette(path, settings: dict) -> Datasette:
    """Datasette with permission settings (metadata on 0.65, config on 1.0a), pages of a few rows: the
    sweep asks who may see rows, and Datasette renders a thousand rows of a query page slowly."""
    return Datasette([str(path)], settings={"default_page_size": 5, "max_returned_rows": 5},
                     **({"config": settings} if DATASETTE_1 else {"metadata": settings}))


def _deny(table: str, sql: bool = False) -> dict:
    """`table` for root alone; SQL execution for root alone too unless `sql`."""
    settings = {"databases": {"traces": {"tables": {table: {"allow": {"id": "root"}}}}}}
    return settings if sql else {"allow_sql": {"id": "root"}, **settings}


@pytest.fixture(scope="module")
def swept_db(traces_db, tmp_path_factory):
    """The fixtures database (its payload index made by the ingest, as every index of it)."""
    path = tmp_path_factory.mktemp("swept") / "traces.db"
    shutil.copy(traces_db, path)
    return path


@pytest.mark.asyncio
@pytest.mark.parametrize("view,table", [("run_totals", "compiles"), ("export_issue_records", "envelopes"),
                                        ("piece_compile_spans", "piece_compiles"),
                                        ("piece_compile_spans", "envelopes")])
async def test_the_reported_views_serve_nothing_of_a_denied_table(swept_db, view, table):
    """Issue 37: with `compiles` denied and SQL off, /traces/run_totals.json still listed every run's compiles."""
    ds = _datasette(swept_db, _deny(table))
    await ds.invoke_startup()
    for suffix in (".json", ".csv", ""):
        assert (await ds.client.get(f"/traces/{view}{suffix}")).status_code == 403, (view, table, suffix)


# --- the sweep: every view, full-text index and canned query x the tables behind it ----------------

FORMATS = (".json", ".csv", "")  # JSON, CSV, HTML
FTS5_SHADOWS = ("data", "idx", "content", "docsize", "config")


@dataclass(frozen=True)
class Surface:
    """Something a request names that shows other tables' rows."""

    kind: str                # view, full-text index, shadow table, canned query
    name: str
    sql: str                 # what it runs, for the SQL endpoint
    behind: tuple[str, ...]  # the tables and views whose rows it shows (itself not counted)


class _Null(dict):
    def __missing__(self, key):
        return None


def _authorized(conn: sqlite3.Connection, sql: str) -> set[str]:
    """The tables and views SQLite's authorizer reports `sql` reading (this test's own authorizer; not
    table-valued functions such as json_each, which it reports too)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    seen = set()

    def record(action, table, column, database, inner):
        if action == sqlite3.SQLITE_READ and table in names and not table.startswith("sqlite_"):
            seen.add(table)
        return sqlite3.SQLITE_OK

    conn.set_authorizer(record)
    try:
        conn.execute("EXPLAIN " + sql, _Null()).fetchall()
    finally:
        conn.set_authorizer(None)
    return seen


def _surfaces(path) -> list[Surface]:
    """Every view, full-text index and shadow table of the database (from sqlite_master) and every canned
    query (from load_queries), each with the tables behind it."""
    from tlindex.answers.queries import load_queries

    conn = connect(path)
    master = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
    indexes = {name: _content_option(sql) for kind, name, sql in master
               if kind == "table" and re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE", sql or "", re.I)}
    shadows = {f"{index}_{suffix}": index for index in indexes for suffix in FTS5_SHADOWS}
    surfaces = [Surface("view", name, f"SELECT * FROM [{name}]", ()) for kind, name, _ in master if kind == "view"]
    surfaces += [Surface("full-text index", name, f"SELECT * FROM [{name}]", ()) for name in indexes]
    surfaces += [Surface("shadow table", name, f"SELECT * FROM [{name}]", ()) for _, name, _ in master if name in shadows]
    surfaces += [Surface("canned query", name, query.sql, ()) for name, query in sorted(load_queries().items())]
    found = []
    for surface in surfaces:
        behind = _expand(conn, _authorized(conn, surface.sql), indexes, shadows) - {surface.name}
        if behind:
            found.append(Surface(surface.kind, surface.name, surface.sql, tuple(sorted(behind))))
    conn.close()
    return found


def _content_option(sql: str) -> str | None:
    """The table an FTS5 index indexes, read from its CREATE VIRTUAL TABLE (`content=...`)."""
    match = re.search(r"\bcontent\s*=\s*['\"\[]?(\w+)", sql)
    return match.group(1) if match else None


def _expand(conn, reads: set[str], indexes: dict[str, str | None], shadows: dict[str, str]) -> set[str]:
    """The names read, each shadow table with its index, each index with its content table and what
    that reads in turn."""
    found, todo = set(), list(reads)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        if name in shadows:
            todo.append(shadows[name])
        if indexes.get(name):
            todo.append(indexes[name])
            todo += _authorized(conn, f"SELECT * FROM [{indexes[name]}]")
    return found - set(shadows)


def _sql_path(fmt: str, sql: str) -> str:
    """The SQL endpoint: /traces?sql= on 0.65, /traces/-/query?sql= on 1.0a."""
    return ("/traces/-/query" if DATASETTE_1 else "/traces") + fmt + "?" + urlencode({"sql": sql})


def _sample(surfaces: list[Surface]) -> list[tuple[Surface, str, str]]:
    """Each view, index and canned query once and one shadow table of each index (the suffix rotating),
    with one table behind it denied and one format, both rotating."""
    shadows: dict[str, list[Surface]] = {}
    for surface in surfaces:
        if surface.kind == "shadow table":
            shadows.setdefault(surface.name.rsplit("_", 1)[0], []).append(surface)
    sample = [s for s in surfaces if s.kind != "shadow table"]
    sample += [group[i % len(group)] for i, group in enumerate(shadows.values())]
    return [(s, s.behind[i % len(s.behind)], FORMATS[i % len(FORMATS)]) for i, s in enumerate(sample)]


def _everything(surfaces: list[Surface]) -> list[tuple[Surface, str, str]]:
    """Each surface x each table behind it x each format."""
    return [(s, table, fmt) for s in surfaces for table in s.behind for fmt in FORMATS]


async def _refusals(path, cases: list[tuple[Surface, str, str]]) -> list[str]:
    """Each case asked with its table denied, as a page (SQL off) and as SQL (SQL on): what was not 403."""
    missed = []
    for table in sorted({table for _, table, _ in cases}):
        pages, sql = _datasette(path, _deny(table)), _datasette(path, _deny(table, sql=True))
        await pages.invoke_startup()
        await sql.invoke_startup()
        for surface, denied_table, fmt in cases:
            if denied_table != table:
                continue
            for ds, request in ((pages, f"/traces/{surface.name}{fmt}"), (sql, _sql_path(fmt, surface.sql))):
                status = (await ds.client.get(request)).status_code
                if status != 403:
                    missed.append(f"{surface.kind} {surface.name} with {table} denied: {request} answered {status}")
    return missed


async def _answers(path, cases: list[tuple[Surface, str, str]]) -> list[str]:
    """Each case asked with nothing denied, as a page (SQL off) and as SQL (SQL on): what was not 200
    (1.0a refuses shadow tables' pages to everyone)."""
    wrong = []
    pages, sql = _datasette(path, {"allow_sql": {"id": "root"}}), _datasette(path, {})
    await pages.invoke_startup()
    await sql.invoke_startup()
    for surface, fmt in sorted({(surface, fmt) for surface, _, fmt in cases}, key=lambda c: (c[0].name, c[1])):
        page = 403 if DATASETTE_1 and surface.kind == "shadow table" else 200
        for ds, request, expected in ((pages, f"/traces/{surface.name}{fmt}", page),
                                      (sql, _sql_path(fmt, surface.sql), 200)):
            status = (await ds.client.get(request)).status_code
            if status != expected:
                wrong.append(f"{surface.kind} {surface.name} with nothing denied: {request} answered {status}")
    return wrong


def test_the_sweep_finds_every_kind_of_surface(swept_db):
    """The sweep is not empty by accident: the reported views, the lazily built payload index, its
    shadow tables and every canned query are among its surfaces, each with the tables behind it."""
    from tlindex.answers.queries import load_queries

    surfaces = {s.name: s for s in _surfaces(swept_db)}
    assert {"run_totals", "export_issue_records", "piece_compile_spans", "payloads", "payloads_fts",
            "payloads_fts_data", "compiles_fts"} <= set(surfaces)
    assert set(load_queries()) <= set(surfaces)
    # what a compile is and its time (compile_times): the compiles, their metrics and their spans
    assert surfaces["run_totals"].behind == ("chromium_events", "compile_times", "compiles", "metrics")
    assert surfaces["payloads_fts_data"].behind == ("payload_data", "payloads", "payloads_fts")


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
async def test_a_sample_of_every_surface_refuses_a_denied_table_behind_it(swept_db):
    """Each view, index and canned query once, one table behind it denied, one format (rotating)."""
    cases = _sample(_surfaces(swept_db))
    assert await _refusals(swept_db, cases) == []
    assert await _answers(swept_db, cases) == []


@pytest.mark.slow
@pytest.mark.asyncio
async def test_every_surface_refuses_every_denied_table_behind_it_in_every_format(swept_db):
    cases = _everything(_surfaces(swept_db))
    assert await _refusals(swept_db, cases) == []
    assert await _answers(swept_db, cases) == []


# --- surfaces made after the server started, and what a request's arguments read ------------------

def _cookies(ds: Datasette, actor_id: str) -> dict:
    return {"ds_actor": ds.sign({"a": {"id": actor_id}}, "actor")}


@pytest.mark.asyncio
async def test_a_view_or_index_created_while_serving_follows_its_table(swept_db, tmp_path):
    """The schema copy is made again when the schema changes: a view and an index created after the
    first request (as `tlindex search` builds its index lazily) are refused as soon as they exist. The copy it
    replaces is closed (its functions hold it: left open, a server would keep one per change)."""
    path = tmp_path / "traces.db"
    shutil.copy(swept_db, path)
    ds = _datasette(path, _deny("compiles"))
    await ds.invoke_startup()
    assert (await ds.client.get("/traces/runs.json")).status_code == 200
    (_, first), = ds._tlindex_schemas.values()
    conn = connect(path)
    conn.execute("CREATE VIEW late_names AS SELECT run_id, co_name FROM compiles")
    conn.execute("CREATE VIEW late_over_view AS SELECT * FROM late_names")
    conn.execute("CREATE VIRTUAL TABLE late_fts USING FTS5 (co_name, content='late_over_view', content_rowid='run_id')")
    conn.commit()
    conn.close()
    for path_ in ("/traces/late_names.json", "/traces/late_over_view.csv", "/traces/late_fts", "/traces/late_fts_data.json"):
        assert (await ds.client.get(path_)).status_code == 403, path_
    assert (await ds.client.get("/traces/late_over_view.json", cookies=_cookies(ds, "root"))).status_code == 200
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        first.conn.execute("SELECT 1")


@pytest.mark.asyncio
async def test_sql_a_request_carries_reads_what_it_names(swept_db):
    """SQL (`sql`, `_where`) and tables (`_fts_table`, `_through`) in a request's arguments are read too,
    as is a whole database downloaded; a table's name spelt in other case is the same table."""
    ds = Datasette([], immutables=[str(swept_db)], **({"config": _deny("compiles", sql=True)} if DATASETTE_1
                                                      else {"metadata": _deny("compiles", sql=True)}))
    await ds.invoke_startup()
    through = urlencode({"_through": '{"table": "run_totals", "column": "run_id", "value": "1"}'})
    refused = [_sql_path(".json", "SELECT * FROM runs WHERE id IN (SELECT run_id FROM compiles)"),
               _sql_path("", "WITH c AS (SELECT * FROM run_totals) SELECT * FROM c"),
               _sql_path(".csv", "EXPLAIN QUERY PLAN SELECT * FROM compiles"),
               "/traces/runs.json?" + urlencode({"_where": "id IN (SELECT run_id FROM compiles)"}),
               # a comment opened in one _where and closed in the next: Datasette joins them with " and "
               "/traces/runs.json?" + urlencode([("_where", "id > 0 /*"), ("_where", "*/ id IN (SELECT run_id FROM compiles)")]),
               "/traces/runs.json?_search=x&_fts_table=compiles_fts", "/traces/runs.json?" + through,
               "/traces/COMPILES.json", "/traces.db",
               _sql_path(".json", "SELECT * FROM runs WHERE"),  # SQLite cannot prepare it: who may see all tables may
               ]
    for request in refused:
        assert (await ds.client.get(request)).status_code == 403, request
        root = await ds.client.get(request, cookies=_cookies(ds, "root"))
        assert root.status_code != 403, request  # Datasette's own answer (200, or 400/404 for what it refuses)
    for request in (_sql_path(".json", "SELECT * FROM runs"), "/traces/runs.json?" + urlencode({"_where": "id > 0"})):
        assert (await ds.client.get(request)).status_code == 200, request


@pytest.mark.asyncio
async def test_a_database_that_is_not_tlindex_is_left_to_datasette(tmp_path):
    """The gate is tlindex's: another database's views are Datasette's business, as without the plugin."""
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE secret (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("CREATE VIEW shown AS SELECT * FROM secret")
    conn.commit()
    conn.close()
    settings = {"databases": {"other": {"tables": {"secret": {"allow": {"id": "root"}}}}}}
    ds = Datasette([str(other)], **({"config": settings} if DATASETTE_1 else {"metadata": settings}))
    await ds.invoke_startup()
    assert (await ds.client.get("/other/secret.json")).status_code == 403
    assert (await ds.client.get("/other/shown.json")).status_code == 200
    assert "_tlindex_schemas" not in ds.__dict__  # no schema copy made for it


# --- the mechanism: SQLite says what is read, and what it cannot tell counts as everything ---------

def test_sqlite_names_the_tables_behind_views_indexes_and_their_shadow_tables():
    from tlindex.store.reads import SchemaCopy

    copy = SchemaCopy([("table", "t", "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)"),
                       ("table", "u", "CREATE TABLE u (b TEXT)"),
                       ("view", "inner_v", "CREATE VIEW inner_v AS SELECT a, (SELECT count(*) FROM u) AS n FROM t"),
                       ("view", "outer_v", "CREATE VIEW outer_v AS SELECT * FROM inner_v"),
                       ("table", "v_fts", "CREATE VIRTUAL TABLE v_fts USING FTS5 (a, content='outer_v')"),
                       ("table", "own_fts", "CREATE VIRTUAL TABLE own_fts USING FTS5 (a)")])
    assert copy.behind("outer_v") == {"outer_v", "inner_v", "t", "u"}
    assert copy.behind("v_fts") == copy.behind("v_fts_data") == {"v_fts", "outer_v", "inner_v", "t", "u"}
    assert copy.behind("own_fts_content") == {"own_fts"}  # an index of its own text stands for itself
    assert copy.reads("SELECT * FROM v_fts WHERE v_fts MATCH :q") == copy.behind("v_fts")
    assert copy.reads("EXPLAIN QUERY PLAN SELECT a FROM T") == {"t"}
    assert copy.reads("SELECT * FROM json_each('[1]'), sqlite_master") == frozenset()
    assert copy.everything() == {"t", "u", "inner_v", "outer_v", "v_fts", "own_fts"}


def test_what_sqlite_cannot_tell_here_is_none():
    """A virtual table of a module the copy lacks, SQL it cannot prepare: None (the gate then asks for
    every table)."""
    from tlindex.store.reads import SchemaCopy

    copy = SchemaCopy([("table", "t", "CREATE TABLE t (a)"),
                       ("table", "geo", "CREATE VIRTUAL TABLE geo USING no_such_module (a)"),
                       ("view", "near", "CREATE VIEW near AS SELECT * FROM geo")])
    assert copy.behind("geo") is None and copy.behind("near") is None
    assert copy.reads("SELECT * FROM near") is None
    for sql in ("SELECT no_such_function(a) FROM t", "SELECT 1; SELECT 2", "SELECT * FROM t WHERE", "SELECT ?"):
        assert copy.reads(sql) is None, sql
    assert copy.behind("t") == {"t"} and copy.behind("nothing") == frozenset()
    assert copy.everything() == {"t", "geo", "near"}
