"""Permissions follow what a request reads: every view, full-text index and canned query of a tlindex
database is refused to an actor denied a table behind it, in JSON, CSV and HTML.

The cases come from the database itself (sqlite_master) and from load_queries(), and the tables behind
each are found here, by this test's own authorizer, not by the code under test: a view added to the
schema tomorrow is swept the day it is added, and a table the plugin misses fails the sweep.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import connect
from datasette.app import Datasette

DATASETTE_1 = hasattr(Datasette, "allowed")


def _datasette(path, settings: dict) -> Datasette:
    """Datasette with permission settings: metadata on 0.65, config on 1.0a."""
    return Datasette([str(path)], **({"config": settings} if DATASETTE_1 else {"metadata": settings}))


def _deny(table: str, sql: bool = False) -> dict:
    """`table` for root alone; SQL execution for root alone too unless `sql`."""
    settings = {"databases": {"traces": {"tables": {table: {"allow": {"id": "root"}}}}}}
    return settings if sql else {"allow_sql": {"id": "root"}, **settings}


@pytest.fixture(scope="module")
def swept_db(traces_db, tmp_path_factory):
    """The fixtures database with the payload index `tlindex search` builds lazily."""
    from tlindex.ingest.text_index import ensure_payload_index

    path = tmp_path_factory.mktemp("swept") / "traces.db"
    shutil.copy(traces_db, path)
    conn = connect(path)
    ensure_payload_index(conn)
    conn.close()
    return path


@pytest.mark.xfail(strict=True, reason="issue 37: views bypass table denies (fixed next)")
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
