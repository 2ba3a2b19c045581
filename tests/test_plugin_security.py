"""The plugin at its trust boundary: Datasette's permissions, encoded database names, odd URLs."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import connect, scenario_run
from datasette.app import Datasette

DATASETTE_1 = hasattr(Datasette, "allowed")


def _datasette(paths, settings: dict) -> Datasette:
    """Datasette with permission settings: metadata on 0.65, config on 1.0a."""
    return Datasette([str(p) for p in paths], **({"config": settings} if DATASETTE_1 else {"metadata": settings}))


def _cookies(ds: Datasette, actor_id: str | None) -> dict:
    return {"ds_actor": ds.sign({"a": {"id": actor_id}}, "actor")} if actor_id else {}


def _pages(conn) -> list[str]:
    """One URL of every tlindex page (with real ids)."""
    (run,) = scenario_run(conn, "provenance")
    compile_id, artifact, payload = conn.execute(
        "SELECT a.compile, a.id, a.payload FROM artifacts a JOIN compiles c ON c.id = a.compile "
        "WHERE c.run_id = ? AND a.payload IS NOT NULL LIMIT 1", (run,)).fetchone()
    (mapping,) = conn.execute("SELECT id FROM artifacts WHERE name = 'inductor_provenance_tracking_node_mappings' "
                              "AND payload IS NOT NULL LIMIT 1").fetchone()
    base = "/traces/-/tlindex"
    pair = [row[0] for row in conn.execute("SELECT id FROM compiles WHERE run_id = ? LIMIT 2", (run,))]
    (breaks,) = scenario_run(conn, "graph_breaks")
    (resume,) = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND co_name LIKE 'torch_dynamo_resume_in%' "
                             "LIMIT 1", (breaks,)).fetchone()
    vllm, piece = conn.execute("SELECT c.run_id, p.id FROM piece_compiles p JOIN compiles c ON c.id = p.compile "
                               "ORDER BY p.id LIMIT 1").fetchone()
    return [base, f"{base}/run/{vllm}/vllm", f"{base}/piece/{piece}/passes", f"{base}/compile/{compile_id}/passes",
            f"{base}/diff/{run}/{run}", f"{base}/diff/compiles/{pair[0]}/{pair[1]}",
            f"{base}/run/{run}", f"{base}/run/{run}/chromium.json", f"{base}/trie/{run}",
            f"{base}/trie/{run}/node/1", f"{base}/compile/{compile_id}", f"{base}/compile/{resume}/bytecode",
            f"{base}/artifact/{artifact}", f"{base}/provenance/{mapping}", f"{base}/payload/{payload}",
            f"{base}/payload/{payload}.txt", f"{base}/trend", f"{base}/graph-breaks?run={breaks}", f"{base}/glossary",
            f"{base}/tree", f"{base}/artifact-diff?a={artifact}&b={mapping}"]


@pytest.mark.asyncio
@pytest.mark.parametrize("denial", [
    {"databases": {"traces": {"allow": {"id": "root"}}}},
    {"databases": {"traces": {"tables": {"payloads": {"allow": {"id": "root"}}}}}},
    {"allow": {"id": "root"}},
], ids=["database", "one table", "instance"])
@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
async def test_a_denied_database_leaks_nothing_through_tlindex_pages_or_links(traces_db, denial):
    ds = _datasette([traces_db], denial)
    await ds.invoke_startup()
    conn = connect(traces_db)
    pages = _pages(conn)
    for path in pages:
        anonymous = await ds.client.get(path)
        assert anonymous.status_code == 403, path
        allowed = await ds.client.get(path, cookies=_cookies(ds, "root"))
        assert allowed.status_code == 200, path
    home = await ds.client.get("/", cookies={})
    assert "/-/tlindex" not in home.text
    root_home = await ds.client.get("/", cookies=_cookies(ds, "root"))
    assert root_home.status_code == 200 and "/traces/-/tlindex" in root_home.text


@pytest.mark.asyncio
async def test_a_database_name_that_needs_encoding_works_end_to_end(traces_db, tmp_path):
    dotted = tmp_path / "a.b.db"
    shutil.copy(traces_db, dotted)
    ds = Datasette([str(dotted)])
    await ds.invoke_startup()
    start = "/a~2Eb/-/tlindex"
    seen, todo = set(), [start]
    while todo and len(seen) < 60:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        response = await ds.client.get(path)
        assert response.status_code == 200, path
        if path.endswith((".txt", ".json")):
            continue
        for href in re.findall(r'href="(/[^"#]*)"', response.text):
            href = href.replace("&amp;", "&")
            if "/-/tlindex" in href and "/-/static" not in href:
                assert href.startswith("/a~2Eb/"), href
                todo.append(href)
    assert len(seen) > 10


@pytest.mark.asyncio
async def test_odd_urls_answer_404_or_400_never_500(ds_plain):
    ds, run = ds_plain
    for path, status in [("/traces/-/tlindex/run/99999999999999999999999", 404),
                         ("/traces/-/tlindex/compile/-99999999999999999999", 404),
                         (f"/traces/-/tlindex/trie/{run}?max_nodes=abc", 400),
                         (f"/traces/-/tlindex/trie/{run}?rank=x", 400),
                         (f"/traces/-/tlindex/trie/{run}/node/99999999999999999999999", 404),
                         ("/traces/-/tlindex/artifact/abc", 404),
                         ("/traces/-/tlindex/compile/99999999999999999999999/bytecode", 404),
                         ("/traces/-/tlindex/compile/999999/bytecode", 404),
                         (f"/traces/-/tlindex/diff/{run}/99999999999999999999999", 404),
                         (f"/traces/-/tlindex/diff/{run}/999999", 404),
                         ("/traces/-/tlindex/diff/compiles/1/999999", 404),
                         (f"/traces/-/tlindex/diff?a={run}&b=x", 400),
                         (f"/traces/-/tlindex/diff?a={run}", 400)]:
        assert (await ds.client.get(path)).status_code == status, path


@pytest.fixture
def ds_plain(traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "graph_breaks")
    return Datasette([str(traces_db)]), run


def _reads() -> dict[str, list[str]]:
    from schema_reads import tables_read

    from tlindex.answers.queries import load_queries

    return {name: sorted(tables_read(query.sql)) for name, query in sorted(load_queries().items())}


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
@pytest.mark.parametrize("name,table", [(name, table) for name, tables in _reads().items() for table in tables])
async def test_a_canned_query_answers_only_who_may_view_every_table_it_reads(traces_db, name, table):
    """Issue 25: with `compiles` denied (and SQL denied), recompile_reasons.json answered 200 with names."""
    ds = _datasette([traces_db], {"allow_sql": {"id": "root"},
                                  "databases": {"traces": {"tables": {table: {"allow": {"id": "root"}}}}}})
    await ds.invoke_startup()
    for suffix in ("", ".json", ".csv"):
        anonymous = await ds.client.get(f"/traces/{name}{suffix}")
        assert anonymous.status_code == 403, (name, table, suffix)
        assert table in anonymous.text
    allowed = await ds.client.get(f"/traces/{name}.json", cookies=_cookies(ds, "root"))
    assert allowed.status_code == 200, (name, table)


@pytest.mark.asyncio
async def test_views_and_indexes_follow_the_table_they_show(traces_db):
    ds = _datasette([traces_db], {"allow_sql": {"id": "root"},
                                  "databases": {"traces": {"tables": {"payload_data": {"allow": {"id": "root"}},
                                                                      "compiles": {"allow": {"id": "root"}}}}}})
    await ds.invoke_startup()
    conn = connect(traces_db)
    (digest,) = conn.execute("SELECT hash FROM payloads LIMIT 1").fetchone()
    plain = Datasette([str(traces_db)])  # what Datasette itself answers without any denial
    await plain.invoke_startup()
    for path in ("/traces/payloads", "/traces/payloads.json", f"/traces/payloads/{digest}",
                 "/traces/compiles_fts.json", "/traces/compiles_fts_data"):
        assert (await ds.client.get(path)).status_code == 403, path
        expected = (await plain.client.get(path)).status_code  # 1.0a hides shadow tables from everyone
        assert (await ds.client.get(path, cookies=_cookies(ds, "root"))).status_code == expected, path
    assert (await ds.client.get("/traces/runs.json")).status_code == 200  # a table of its own stays open
