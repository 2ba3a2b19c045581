"""Shapes the first fixtures lacked, each on a real torch 2.13 log of tests/data (see its README):
a closure's resume function, a restarted rank, a training step's two provenance mappings, a reset
between compiles, an unchanged function whose counters moved. Each test fails on the code before
the fix it names."""

from __future__ import annotations

import dis
import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import connect, ingest, scenario_logs, scenario_run
from datasette.app import Datasette

from tlindex.answers.bytecode import parse_listing
from tlindex.answers.decompile import decompile
from tlindex.answers.diff import diff
from tlindex.answers.queries import load_queries, run_sql
from tlindex.answers.reassemble import CannotReassemble, reassemble
from tlindex.cli import cli

PY311 = sys.version_info[:2] == (3, 11)


def listings(conn, scenario: str) -> dict[str, str]:
    (run,) = scenario_run(conn, scenario)
    return {name: text for name, text in conn.execute(
        "SELECT a.name, p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload JOIN compiles c ON c.id = a.compile "
        "WHERE c.run_id = ? AND a.name LIKE '%\\_BYTECODE' ESCAPE '\\'", (run,))}


# --- one item that cannot be rendered degrades alone ------------------------------------------------

@pytest.mark.skipif(not PY311, reason="the fixture's listings are Python 3.11 bytecode")
def test_closure_listings_rebuild_exactly_or_decline_with_a_reason(fixtures_db):
    found = listings(connect(fixtures_db), "closures")
    assert any(text.lstrip().split("\n")[0].split()[-2:] == ["COPY_FREE_VARS", "3"] for text in found.values())
    assert any(" MAKE_CELL " in text and " LOAD_DEREF " in text for text in found.values())
    rebuilt = 0
    for name, text in found.items():
        try:
            code = reassemble(parse_listing(text), text, "f", "f.py", 1)
        except CannotReassemble as refused:  # only what the text cannot carry: a code-object constant
            assert "<code object" in str(refused), name
            continue
        assert dis.Bytecode(code).dis() == text, name
        assert code.co_freevars or code.co_cellvars, name
        rebuilt += 1
        result = decompile(parse_listing(text), text, "f", "f.py", 1)
        assert result.source or result.reason, name  # an answer, never an exception
    assert rebuilt >= 3


@pytest.mark.asyncio
async def test_every_closure_compile_page_and_bytecode_page_answers(ds, traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "closures")
    for (compile_id,) in conn.execute("SELECT id FROM compiles WHERE run_id = ?", (run,)):
        assert (await ds.client.get(f"/traces/-/tlindex/compile/{compile_id}")).status_code == 200
    resumes = [row[0] for row in conn.execute(
        "SELECT id FROM compiles WHERE run_id = ? AND co_name LIKE 'torch_dynamo_resume_in_%'", (run,))]
    assert len(resumes) == 2
    for compile_id in resumes:
        page = await ds.client.get(f"/traces/-/tlindex/compile/{compile_id}/bytecode")
        assert page.status_code == 200 and "COPY_FREE_VARS" in page.text


@pytest.mark.asyncio
async def test_a_page_that_fails_says_what_failed_and_shows_the_listing(ds, traces_db, monkeypatch):
    import tlindex.pages.bytecode as bytecode_page

    def broken(*args, **kwargs):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(bytecode_page, "resume_view", broken)
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "closures")
    (compile_id,) = conn.execute("SELECT id FROM compiles WHERE run_id = ? AND co_name LIKE "
                                 "'torch_dynamo_resume_in_inner%'", (run,)).fetchone()
    page = await ds.client.get(f"/traces/-/tlindex/compile/{compile_id}/bytecode")
    assert page.status_code == 500
    assert "IndexError: tuple index out of range" in page.text and "COPY_FREE_VARS" in page.text
    assert page.headers["x-tlindex-degraded"].startswith("IndexError")
    # the other pages are untouched
    assert (await ds.client.get(f"/traces/-/tlindex/compile/{compile_id}")).status_code == 200


def test_the_report_writes_everything_else_and_names_what_degraded(fixtures_db, tmp_path, monkeypatch):
    import tlindex.pages.bytecode as bytecode_page

    monkeypatch.setattr(bytecode_page, "resume_view", lambda *a, **k: 1 / 0)
    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "closures")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "--run", str(run), "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    marker = json.loads((out / "tlindex-report.json").read_text())
    degraded = {entry["file"] for entry in marker["degraded"]}
    assert degraded and all(path.endswith("-bytecode.html") for path in degraded)
    assert "ZeroDivisionError" in result.output
    index = (out / "index.html").read_text()
    assert "could not be rendered" in index and all(path in index for path in degraded)
    for path in degraded:  # each says what failed, and leads to the index that lists them all
        assert "ZeroDivisionError" in (out / path).read_text() and 'href="../index.html"' in (out / path).read_text()
    assert len(list((out / "compiles").glob("*.html"))) > len(degraded)


def test_a_streamed_file_that_fails_midway_leaves_no_half_file(fixtures_db, tmp_path, monkeypatch):
    """The Perfetto trace and tlparse's compile_directory.json are written piece by piece: a failure after
    the first pieces (a database error, a bug on an unseen shape) names the file and leaves none of it,
    never a truncated JSON document that a tool would read as the real one."""
    import tlindex.formats.chromium as chromium
    from tlindex.report import tlparse as report_tlparse

    def fails_after(pieces):
        def failing(*args):
            yield from list(pieces(*args))[:2]
            raise sqlite3.OperationalError("disk I/O error")
        return failing

    monkeypatch.setattr(chromium, "trace_chunks", fails_after(chromium.trace_chunks))
    monkeypatch.setattr(report_tlparse, "compile_directory", fails_after(report_tlparse.compile_directory))
    (run,) = scenario_run(connect(fixtures_db), "graph_breaks")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "--run", str(run), "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    degraded = {entry["file"]: entry for entry in json.loads((out / "tlindex-report.json").read_text())["degraded"]}
    assert set(degraded) == {"chromium_events.json", "compile_directory.json"} and "disk I/O error" in result.output
    assert not (out / "chromium_events.json").exists() and not (out / "compile_directory.json").exists()
    assert not list(out.rglob("*.partial"))
    assert (out / "raw.jsonl").stat().st_size > 1000  # the log's other tlparse file is written all the same
    index = (out / "index.html").read_text()
    assert "2 files of this report could not be rendered" in index
    assert 'href="chromium_events.json"' not in index.split("could not be rendered")[1].split("</div>")[0]  # nothing
    assert list((out / "compiles").glob("*.html"))


@pytest.mark.slow
def test_the_report_of_every_fixture_run_degrades_nothing(fixtures_db, tmp_path):
    conn = connect(fixtures_db)
    runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    out = tmp_path / "all"
    result = CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "-o", str(out), "--silent"])
    assert result.exit_code == 0, result.output
    marker = json.loads((out / "tlindex-report.json").read_text())
    assert marker["runs"] == runs and marker["degraded"] == [] and "warning" not in result.output
    for run in runs:  # a folder per log of every multi-log run
        files = conn.execute("SELECT count(DISTINCT file_id) FROM sources WHERE run_id = ?", (run,)).fetchone()[0]
        directories = list((out / f"run-{run}").glob("*/compile_directory.json")) if files > 1 else \
            [out / f"run-{run}" / "compile_directory.json"]
        assert len(directories) == files and all(d.is_file() for d in directories)


# --- a process is the unit ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def restart_db(tmp_path_factory) -> Path:
    """rank_restart's four processes (two attempts of two ranks) put in one run, as `--run` does."""
    path = tmp_path_factory.mktemp("restart") / "restart.db"
    summary = ingest(path, [str(p) for p in scenario_logs("rank_restart")], run_label="job", jobs=1)
    assert summary.rank_decisions and all("restarts" in said for _, said in summary.rank_decisions)
    return path


def test_restarted_ranks_are_processes_of_their_own(restart_db):
    conn = connect(restart_db)
    rows = conn.execute("SELECT rank, restart, process, pid FROM sources ORDER BY rank, restart").fetchall()
    assert [(r["rank"], r["restart"], r["process"]) for r in rows] == [
        (0, 0, "0"), (0, 1, "0 (restart 1)"), (1, 0, "1"), (1, 1, "1 (restart 1)")]
    assert len({r["pid"] for r in rows}) == 4
    found = run_sql(conn, load_queries()["rank_divergence"].sql, {"run": "1"}).fetchall()
    missing = {row["compile_id"]: row["ranks"] for row in found if row["finding"] == "missing_compile"}
    # the first attempt compiled only 0/0: the compile ids diverge across the four processes
    assert missing == {"0/1": "0 (restart 1), 1 (restart 1)", "1/0": "0 (restart 1), 1 (restart 1)"}
    assert all("present on 2 of 4 processes" == row["detail"] for row in found if row["finding"] == "missing_compile")
    # each process compared on its own (in the groups of those that compiled the same): a rank's two processes are
    # never one sequence
    grouped = sorted(p for row in found if row["finding"] == "group" for p in row["ranks"].split(", "))
    assert grouped == ["0", "0 (restart 1)", "1", "1 (restart 1)"]


@pytest.mark.asyncio
async def test_the_run_page_says_what_was_decided(restart_db):
    datasette = Datasette([str(restart_db)])
    await datasette.invoke_startup()
    page = await datasette.client.get("/restart/-/tlindex/run/1")
    assert page.status_code == 200
    assert "rank 0 ran 2 times one after another" in page.text and "1 (restart 1)" in page.text


def test_file_names_that_give_distinct_ranks_are_read_as_tlparse_reads_them(corpus_db):
    conn = connect(corpus_db)
    rows = conn.execute("""
        SELECT s.rank, s.logged_rank, s.process, s.rank_decision FROM sources s JOIN files f ON f.id = s.file_id
        WHERE f.directory LIKE '%/multi_rank_schedule' ORDER BY s.rank""").fetchall()
    assert [(r["rank"], r["logged_rank"]) for r in rows] == [(0, 0), (1, 0), (2, 0)]
    assert rows[1]["rank_decision"] == "logged rank 0; file name says rank 1"


def test_a_folder_per_log_even_when_logs_share_a_rank(restart_db, tmp_path):
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--db", str(restart_db), "-o", str(out), "--silent"])
    assert result.exit_code == 0, result.output
    folders = sorted(p.parent.name for p in out.glob("*/compile_directory.json"))
    assert folders == ["rank_0", "rank_0_restart_1", "rank_1", "rank_1_restart_1"]
    assert len({(out / f / "raw.jsonl").read_text() for f in folders}) == 4


# --- provenance, spans ---------------------------------------------------------------------------------

def test_each_provenance_mapping_is_shown_with_its_own_half(fixtures_db):
    from tlindex.answers.provenance import provenance_data

    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "train_provenance")
    mappings = [row[0] for row in conn.execute(
        "SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ? "
        "AND a.name = 'inductor_provenance_tracking_node_mappings' ORDER BY a.id", (run,))]
    assert len(mappings) == 2
    forward, backward = (provenance_data(conn, m) for m in mappings)
    code = {pane["key"]: pane for pane in forward["panes"]}["code"]
    assert "0_forward" in "\n".join(code["lines"][:3]) and forward["links"]["code"]
    assert "0_backward" in "\n".join({p["key"]: p for p in backward["panes"]}["code"]["lines"][:3])


def test_timing_spans_stay_in_their_generation(fixtures_db):
    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "closures")
    spans = {(row["generation"], row["co_name"]): row["n"] for row in conn.execute(
        "SELECT c.generation, c.co_name, count(e.id) AS n FROM compiles c LEFT JOIN chromium_events e "
        "ON e.compile = c.id AND e.name = 'dynamo' AND e.ph = 'X' WHERE c.run_id = ? AND c.compile_id = '0/0' "
        "GROUP BY c.id", (run,))}
    assert spans == {(0, "inner"): 1, (1, "after_reset"): 1}


# --- content, not counters -----------------------------------------------------------------------------

def test_a_shifted_counter_is_no_change_and_bytes_alone_are_none(fixtures_db):
    conn = connect(fixtures_db)
    a, b = scenario_run(conn, "inductor_break_added")
    result = diff(conn, str(a), str(b))
    by_name = {(e["b"] or e["a"])["co_name"]: e for e in result["compiles"]}
    finish = by_name["finish"]
    texts = [conn.execute("SELECT p.text FROM artifacts x JOIN payloads p ON p.hash = x.payload WHERE x.compile = ? "
                          "AND x.kind = 'inductor_output_code'", (side["id"],)).fetchone()[0]
             for side in (finish["a"], finish["b"])]
    assert texts[0] != texts[1]  # the fixture's point: the code differs only by its AOT id
    assert re.sub(r"AOT ID: \['\d+_", "", texts[0]) == re.sub(r"AOT ID: \['\d+_", "", texts[1])
    assert "graph" not in finish["changes"]
    assert all(entry["changes"] != ["bytes"] for entry in result["compiles"])
    order = [(e["b"] or e["a"])["co_name"] for e in result["compiles"]]
    assert order.index("torch_dynamo_resume_in_body_at_16") < order.index("finish")  # one-sided before timing
    assert "graph_breaks" in by_name["body"]["changes"]


# --- tlparse's empty-log behaviour, the CLI's doors ------------------------------------------------

def test_an_empty_log_gives_an_empty_report(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_empty.log"  # HAND-MADE: a 0-byte log
    log.write_bytes(b"")
    result = CliRunner().invoke(cli, ["report", str(log), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "No trace records" in (tmp_path / "out" / "index.html").read_text()


@pytest.mark.parametrize("command", [["findings"], ["diff", "1", "2"], ["report", "-o", "OUT"], ["search", "x"],
                                     ["query", "failures"], ["serve"]])
def test_every_command_refuses_what_is_no_tlindex_database_in_one_line(command, tmp_path):
    import sqlite3

    text = tmp_path / "notalog.txt"
    text.write_text("hello\n")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.commit()
    for path, says in ((text, "not a SQLite database"), (other, "tlindex did not make"),
                       (tmp_path / "missing.db", "no such database")):
        args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
        args += [str(path)] if command == ["serve"] else ["--db", str(path)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1 and says in result.output and "Traceback" not in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_run_names_and_search_urls_are_the_same_everywhere(fixtures_db):
    conn = connect(fixtures_db)
    a, b = scenario_run(conn, "inductor_break_added")
    label = conn.execute("SELECT label FROM runs WHERE id = ?", (b,)).fetchone()[0]
    result = CliRunner().invoke(cli, ["search", "tanh", "--db", str(fixtures_db), "--run", label, "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert hits and all(hit["url"].startswith("http://127.0.0.1:8001/traces/-/tlindex/") for hit in hits)
    assert {hit["run"] for hit in hits} == {b}
    several = CliRunner().invoke(cli, ["findings", "inductor_break_added", "--db", str(fixtures_db)])
    assert several.exit_code == 1 and f"{a} " in several.output and f"{b} " in several.output


def test_duckdb_compares_processes_as_sqlite_does(restart_db, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    from test_export import normalize

    from tlindex.formats.parquet import duckdb_views, export_parquet

    export_parquet(restart_db, tmp_path / "parquet", None, False)
    conn = connect(restart_db)
    cursor = run_sql(conn, load_queries()["rank_divergence"].sql, {})
    columns = [d[0] for d in cursor.description]
    expected = normalize(cursor.fetchall(), columns)
    con = duckdb.connect()
    for statement in duckdb_views(tmp_path / "parquet"):
        con.execute(statement)
    sql = (Path(__file__).parents[1] / "queries" / "duckdb" / "rank_divergence.sql").read_text()
    assert normalize(con.execute(sql, {"run": None}).fetchall(), columns) == expected
    assert any(row[1] == "missing_compile" for row in expected)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_crawl_of_every_served_tlindex_page_finds_no_error(ds, traces_db):
    """From the runs page, every tlindex page a link leads to (compiles, bytecode, tries and their nodes,
    artifacts, payloads, provenance, diffs, search) answers 200 on every fixture."""
    from html.parser import HTMLParser
    from urllib.parse import urljoin, urlsplit

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found = []

        def handle_starttag(self, tag, attrs):
            self.found += [value for name, value in attrs if name in ("href", "data-src") and value]

    conn = connect(traces_db)
    runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    seeds = ["/traces/-/tlindex"] + [f"/traces/-/tlindex/diff/{a}/{b}" for a, b in zip(runs, runs[1:])]
    seeds += [f"/traces/-/tlindex/search?q={term}" for term in ("aten.mm", "COPY_FREE_VARS", "restart")]
    queue, seen, errors = list(seeds), set(seeds), []
    while queue:
        url = queue.pop()
        response = await ds.client.get(url)
        if response.status_code != 200:
            errors.append((url, response.status_code))
            continue
        if "text/html" not in response.headers.get("content-type", ""):
            continue
        parser = Links()
        parser.feed(response.text)
        for link in parser.found:
            target = urlsplit(urljoin(url, link))
            path = target.path + (f"?{target.query}" if target.query else "")
            if target.path.startswith("/traces/-/tlindex") and path not in seen:
                seen.add(path)
                queue.append(path)
    assert not errors
    assert len(seen) > 1000 and any("/bytecode" in url for url in seen) and any("/provenance/" in url for url in seen)


def test_a_finding_that_cannot_be_computed_degrades_alone(restart_db, monkeypatch):
    from tlindex.answers import findings as findings_module

    def broken(conn, sql, params):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(findings_module.ranks, "run_sql", broken)  # the rank comparison's queries
    found = findings_module.findings(connect(restart_db), 1)
    kinds = [f.kind for f in found]
    assert "not_computed" in kinds and "recompiles" in kinds  # the others are still there
    assert "IndexError" in next(f.text for f in found if f.kind == "not_computed")


def test_compiles_by_status_add_up_and_say_what_has_no_compile_id(db):
    """Every run's per-process table: the status columns partition its compiles (an export or AOTInductor
    run's [-/-] is its own column, not a status without a compile), counted here from the compiles rows."""
    from tlindex.pages.rows import Args
    from tlindex.pages.run import run_data as page_data

    def run_data(conn, run):
        return page_data(conn, Args(), run)["run"]

    for (run,) in db.execute("SELECT id FROM runs").fetchall():
        for row in run_data(db, run)["by_rank"]:
            statuses = row["ok"] + row["break"] + row["empty"] + row["error"] + row["missing"]
            assert statuses == row["compiles"], (run, row)
        expected = db.execute("SELECT count(*) FROM compiles WHERE run_id = ? AND compile_id != '-/-' "
                              "AND status != 'none'", (run,)).fetchone()[0]  # no export's compile context
        assert sum(row["compiles"] for row in run_data(db, run)["by_rank"]) == expected
    export_error = db.execute("SELECT run_id FROM compiles WHERE compile_id = '-/-' AND status = 'error'").fetchone()
    assert export_error, "a fixture run fails outside any compile (export)"
    assert any(row["unattributed"] == "error" for row in run_data(db, export_error[0])["by_rank"])


def test_a_rank_claimed_by_two_files_is_said_with_its_files(tmp_path):
    """The 4-rank DDP job plus another job's rank-1 file, ingested as one run: 4 ranks and 5 processes, and
    `runs` says which files claim rank 1 (it said "4 ranks")."""
    from conftest import ingest as run_ingest

    extra = next(p for p in scenario_logs("ddp_2ranks") if "rank_1" in p.name)
    db = tmp_path / "messy.db"
    run_ingest(db, [str(p) for p in scenario_logs("ddp_4ranks_diverge")] + [str(extra)], run_label="messy")
    result = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert "4 ranks, 5 processes: rank 1 is claimed by 2 processes" in result.output
    rank_1 = [p.name for p in scenario_logs("ddp_4ranks_diverge") if "rank_1" in p.name] + [extra.name]
    assert all(name in result.output for name in rank_1)
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).stdout)
    assert listed[0]["ranks"] == 4 and listed[0]["processes"] == 5 and extra.name in listed[0]["ranks_text"]
