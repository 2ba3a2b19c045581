"""Search across everything: a kernel or op name finds every compile whose payloads contain it."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, ingest
from datasette.app import Datasette

from tlindex.answers.search import search
from tlindex.cli import cli
from tlindex.ingest.text_index import has_payload_index


@pytest.fixture(scope="module")
def searchable(fixtures_db, tmp_path_factory):
    """A copy of the fixtures database named traces.db (its payload text indexed by the ingest)."""
    path = tmp_path_factory.mktemp("search") / "traces.db"
    source = connect(fixtures_db)
    source.execute("PRAGMA wal_checkpoint(FULL)")
    source.close()
    shutil.copy(fixtures_db, path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert has_payload_index(conn)
    conn.close()
    return path


def compiles_containing(conn, term: str) -> set[int]:
    """A plain scan: the compiles one of whose artifacts' payload contains term."""
    return {compile for compile, text in conn.execute(
        "SELECT a.compile, p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload WHERE a.compile IS NOT NULL")
        if term.lower() in text.lower()}


def test_a_kernel_name_from_generated_code_finds_every_compile_whose_payloads_contain_it(searchable):
    conn = connect(searchable)
    (code,) = conn.execute("SELECT p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload "
                           "WHERE a.kind = 'inductor_output_code' ORDER BY a.id LIMIT 1").fetchone()
    kernel = re.search(r"\b(cpp_fused_\w+|triton_\w+)\b", code).group(1)
    expected = compiles_containing(conn, kernel)
    assert expected
    hits = search(conn, kernel)
    assert {h.compile for h in hits if h.table == "payloads"} == expected
    for hit in hits:
        if hit.table == "payloads":  # the snippet marks the kernel, the path points at its line
            start, end = hit.match
            assert hit.snippet[start:end].lower() == kernel.lower() and re.fullmatch(r"L-\d+", hit.anchor)


@pytest.mark.parametrize("term", ["aten.mm", "aten.mm.default(", "torch._dynamo.exc", "L['x']", "size mismatch"])
def test_terms_with_dots_brackets_and_quotes_are_literal(searchable, term):
    conn = connect(searchable)
    found = {h.compile for h in search(conn, term) if h.table == "payloads"}
    assert found == compiles_containing(conn, term)


def test_cli_search_json_and_errors(searchable):
    runner = CliRunner()
    result = runner.invoke(cli, ["search", "aten.mm", "--db", str(searchable), "--json"])
    assert result.exit_code == 0
    hits = json.loads(result.output)
    assert hits and {"run", "compile", "table", "snippet", "url"} <= set(hits[0])
    prefix = f"http://127.0.0.1:8001/{searchable.stem}/-/tlindex/"  # full URLs: a path alone is a 404 when pasted
    assert all(h["url"].startswith(prefix) for h in hits if h["table"] == "payloads")
    short = runner.invoke(cli, ["search", "mm", "--db", str(searchable)])
    assert short.exit_code == 1 and "at least 3 characters" in short.output
    none = runner.invoke(cli, ["search", "no such thing anywhere", "--db", str(searchable)])
    assert none.exit_code == 1 and "no match" in none.output


@pytest.mark.asyncio
async def test_the_search_page_groups_hits_and_never_fails_on_odd_terms(searchable):
    ds = Datasette([str(searchable)])
    html = (await ds.client.get("/traces/-/tlindex/search?q=aten.mm")).text
    assert "<mark>aten.mm</mark>" in html and 'href="/traces/-/tlindex/artifact/' in html
    for term in ['"', "AND OR (", "<script>alert(1)</script>", "a:b", "NEAR(x y)"]:
        response = await ds.client.get("/traces/-/tlindex/search", params={"q": term})
        assert response.status_code == 200, term
        assert "<script>alert(1)" not in response.text


def test_every_ingest_indexes_the_payloads_it_adds(tmp_path):
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(DATA / "graph_breaks")], jobs=1)
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert not [h for h in search(conn, "aten.mm") if h.table == "payloads"]  # eager backend: no aten graphs
    conn.close()
    ingest(db_path, [str(DATA / "train_step")], jobs=1)
    conn = sqlite3.connect(db_path)
    assert {h.compile for h in search(conn, "aten.mm") if h.table == "payloads"} == compiles_containing(conn, "aten.mm")


@pytest.mark.asyncio
async def test_the_search_page_finds_payload_text_on_a_fresh_database(tmp_path):
    """Nothing but an ingest ran: its payload text is indexed, and the page finds what a scan of the text finds."""
    db = tmp_path / "fresh.db"
    ingest(db, [str(DATA / "train_step")], jobs=1)
    assert has_payload_index(sqlite3.connect(db))
    page = await Datasette([str(db)]).client.get("/fresh/-/tlindex/search.json?q=cpp_fused")
    found = {g["compile"] for g in page.json()["groups"] for h in g["hits"] if h["table"] == "payloads"}
    assert found and found == compiles_containing(connect(db), "cpp_fused")


def test_a_term_is_found_as_typed_where_its_words_follow_each_other(searchable):
    """`fused_add` inside `triton_poi_fused_add_0`-like names; words that follow each other but not as typed are no
    hit (`mm default` is in the index as `aten.mm.default`, but not as typed)."""
    conn = connect(searchable)
    (code,) = conn.execute("SELECT p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload "
                           "WHERE a.kind = 'inductor_output_code' ORDER BY a.id LIMIT 1").fetchone()
    name = re.search(r"\b(?:cpp|triton)_fused_[a-z]+_[a-z]+\w*", code).group(0)
    kernel = "_".join(name.split("_")[2:4])  # two of its inner words: `relu_sum` of `cpp_fused_relu_sum_..._0`
    assert {h.compile for h in search(conn, kernel) if h.table == "payloads"} == compiles_containing(conn, kernel)
    assert not [h for h in search(conn, "mm default") if h.table == "payloads"
                and "mm default" not in h.snippet.lower()]


def test_a_function_name_or_break_reason_ranks_above_matches_deep_in_payloads(searchable):
    """Searching a function's name finds the compiles of that function first, and a graph-break reason the
    compiles that broke, before compiles whose generated code or guards merely mention it."""
    conn = connect(searchable)
    (name,) = conn.execute("SELECT co_name FROM compiles WHERE co_name = 'with_explicit_break' LIMIT 1").fetchone()
    hits = search(conn, name)
    named = {row[0] for row in conn.execute("SELECT id FROM compiles WHERE co_name LIKE ?", (f"%{name}%",))}
    first_groups = []
    for hit in hits:
        if hit.compile not in first_groups:
            first_groups.append(hit.compile)
    assert set(first_groups[:len(named)]) == named  # the compiles named so come before any other group
    hits = search(conn, "graph_break()")
    broke = {row[0] for row in conn.execute("SELECT DISTINCT compile FROM graph_break_events WHERE reason LIKE "
                                            "'%graph_break()%'")}
    leading = []
    for hit in hits:
        if hit.compile not in leading:
            leading.append(hit.compile)
    assert set(leading[:len(broke)]) <= broke | named | {h.compile for h in hits if h.table == "compiles"}
    assert hits[0].table in ("compiles", "graph_break_events")


def test_tlindex_s_own_words_about_a_line_are_not_search_results(tmp_path):
    """An ingest error is found by the line it is about, not by the message tlindex wrote about it. HAND-MADE:
    a real log with one line that is no trace record appended."""
    log = tmp_path / "dedicated_log_torch_trace_odd.log"
    log.write_bytes(next((DATA / "graph_breaks").glob("*.log")).read_bytes() + b"garbage ZZQQXX line\n")
    db = tmp_path / "t.db"
    ingest(db, [str(log)], jobs=1)
    conn = connect(db)
    (message,) = conn.execute("SELECT message FROM ingest_errors WHERE excerpt LIKE '%ZZQQXX%'").fetchone()
    words = " ".join(message.split()[:3])
    assert [h for h in search(conn, "ZZQQXX") if h.table == "ingest_errors"]  # by its line
    assert not [h for h in search(conn, words) if h.table == "ingest_errors"], words  # not by tlindex's words
