"""A page about one run costs what it costs in a database of one run: the SQL statements a request runs on a
5-run database and on the same database grown to 50 runs are as many, for every page of the page table that is
about one run, compile, piece, artifact or payload (its path names it), and for every sample of each. A page whose
cost grows with runs it does not show (a query per run, a check per run) fails here. And every canned query asked
of one run executes as many SQLite instructions among 50 runs as among 5: a filter SQLite cannot answer through
the run index (an OR around it), a scan of a whole table or a lookup that walks other runs' rows fails here."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import DATA, ingest

from tlindex import pages
from tlindex.answers.queries import load_queries, read_only
from tlindex.pages.rows import Args
from tlindex.store.db import connect_read_only

# The first five folders hold what the pages about one run show (vLLM pieces, ranks, graph breaks and resume
# functions, provenance, an export); the other 45 are more of the real fixtures, one run or more each.
FIRST = ["vllm_piecewise", "ddp_2ranks", "graph_breaks", "provenance", "draft_export"]
MORE = ["recompiles", "compile_errors", "train_step", "vllm_piecewise", "graph_breaks", "dynamic", "closures",
        "ddp_2ranks", "export"]
SMALL, LARGE = 5, 50
# Real values of each placeholder of the page table, per run of the small database (first and last of each run); a
# placeholder not named here is given its declared sample (tlindex.pages.declare.PLACEHOLDERS).
SAMPLES = {
    "run": "SELECT id FROM runs",
    "a": "SELECT id FROM runs", "b": "SELECT max(id) FROM runs",
    "compile": "SELECT min(id) FROM compiles GROUP BY run_id UNION SELECT max(id) FROM compiles GROUP BY run_id",
    "ca": "SELECT min(id) FROM compiles GROUP BY run_id", "cb": "SELECT max(id) FROM compiles",
    "piece": "SELECT min(id) FROM piece_compiles GROUP BY compile",
    "artifact": "SELECT min(id) FROM artifacts GROUP BY compile UNION SELECT max(id) FROM artifacts GROUP BY compile",
    "hash": "SELECT DISTINCT payload FROM artifacts WHERE id IN (SELECT max(id) FROM artifacts GROUP BY compile)",
    "node": "SELECT 1 UNION ALL SELECT 2", "ext": "SELECT '' UNION ALL SELECT '.txt'",
}


def _folders(root: Path, names: list[str], start: int) -> list[str]:
    """Each fixture's logs hard-linked (copied where links are refused) into a folder of its own."""
    made = []
    for i, name in enumerate(names, start):
        folder = root / f"r{i:02d}-{name}"
        folder.mkdir(parents=True)
        for log in sorted((DATA / name).iterdir()):
            try:
                os.link(log, folder / log.name)
            except OSError:
                shutil.copy(log, folder / log.name)
        made.append(str(folder))
    return made


@pytest.fixture(scope="module")
def databases(tmp_path_factory) -> tuple[Path, Path]:
    """A 5-run database, and a copy of it grown to 50 runs by a second ingest (the first runs keep their ids)."""
    root = tmp_path_factory.mktemp("runs")
    small, large = root / "small.db", root / "large.db"
    ingest(small, _folders(root / "logs", FIRST, 0), jobs=2)
    shutil.copy(small, large)
    more = LARGE - SMALL
    ingest(large, _folders(root / "logs", (MORE * more)[:more], SMALL), jobs=2)
    return small, large


def _cases(conn: sqlite3.Connection) -> list[tuple[pages.Page, dict, Args]]:
    """Every page that names one thing in its path, with the small database's values (and the artifact diff of two
    artifacts, named by its arguments)."""
    cases = []
    for page in pages.PAGES:
        if not page.placeholders:
            continue
        columns = [[row[0] for row in conn.execute(SAMPLES.get(name) or page.sample(name)) if row[0] is not None]
                   for name in page.placeholders]
        for i in range(max(len(values) for values in columns)):
            values = {name: found[min(i, len(found) - 1)] for name, found in zip(page.placeholders, columns) if found}
            if len(values) == len(page.placeholders):
                cases.append((page, values, Args()))
    artifacts = [str(row[0]) for row in conn.execute(SAMPLES["artifact"])]
    cases += [(pages.BY_NAME["artifact_diff"], {}, Args({"a": a, "b": b})) for a, b in zip(artifacts, artifacts[1:])]
    return cases


def _statements(path: Path, page: pages.Page, values: dict, args: Args) -> tuple[int, str]:
    conn = connect_read_only(path)
    try:
        ran: list[str] = []
        conn.set_trace_callback(ran.append)
        try:
            page.read(conn, args, **values)
            outcome = "ok"
        except Exception as error:  # a 404 or 400 is an answer too: it must cost the same
            outcome = type(error).__name__
        return len(ran), outcome
    finally:
        conn.close()


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_page_about_one_run_runs_as_many_statements_among_50_runs_as_among_5(databases):
    small, large = databases
    conn = connect_read_only(small)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] >= SMALL
    cases = _cases(conn)
    conn.close()
    conn = connect_read_only(large)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] >= LARGE
    conn.close()
    reached = {page.name for page, _, _ in cases}
    assert reached >= {page.name for page in pages.PAGES if page.placeholders}, "a page without a sample"
    differ = []
    for page, values, args in cases:
        _statements(small, page, values, args), _statements(large, page, values, args)  # memos warm on both
        alone, among = _statements(small, page, values, args), _statements(large, page, values, args)
        assert alone[1] == among[1], (page.name, values, alone, among)
        if alone[0] != among[0]:
            differ.append((page.name, values, args.pairs, alone[0], among[0]))
    assert differ == []


def _instructions(path: Path, sql: str, params: dict) -> int:
    """How many SQLite virtual-machine instructions (in thousands) a statement runs: its cost, not its time."""
    conn = read_only(connect_read_only(path))
    try:
        counted = [0]

        def count() -> int:
            counted[0] += 1
            return 0

        conn.set_progress_handler(count, 1000)
        conn.execute(sql, params).fetchall()
        return counted[0]
    finally:
        conn.close()


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_canned_query_of_one_run_costs_as_much_among_50_runs_as_among_5(databases):
    small, large = databases
    runs = [row[0] for row in sqlite3.connect(small).execute("SELECT id FROM runs ORDER BY id")]
    differ = []
    for name, query in load_queries().items():
        names = [param for param, _ in query.params]
        if "run" not in names:
            continue
        for run in runs:
            params = {**{param: None for param in names}, "run": str(run)}
            alone, among = _instructions(small, query.sql, params), _instructions(large, query.sql, params)
            if alone != among:
                differ.append((name, run, alone, among))
    assert differ == []
