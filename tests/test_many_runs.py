"""A database of many runs: lists page, the newest are one click away, and nothing prints every run by default."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from conftest import DATA, ingest

from tlindex.answers.runs import PAGE_SIZE
from tlindex.cli import cli
from tlindex.errors import UsageError
from tlindex.pages.rows import Args
from tlindex.pages.runs import runs_data
from tlindex.pages.trend import trend_data
from tlindex.store.db import connect_read_only

RUNS = PAGE_SIZE + 7


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory):
    """RUNS runs of one real log (hard links in folders of their own: one run each), and one that failed."""
    root = tmp_path_factory.mktemp("many")
    logs = root / "logs"
    for n in range(RUNS - 1):
        folder = logs / f"nightly-{n:03d}"
        folder.mkdir(parents=True)
        for log in (DATA / "draft_export").glob("*.log"):
            os.link(log, folder / log.name)
    failed = logs / "zz-failed"
    failed.mkdir()
    for log in (DATA / "compile_errors").glob("*.log"):
        os.link(log, failed / log.name)
    db = root / "traces.db"
    summary = ingest(db, [str(logs)], jobs=2)
    assert not summary.problems
    conn = connect_read_only(db)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == RUNS
    conn.close()
    return db


def ordered_ids(db) -> list[int]:
    conn = connect_read_only(db)
    try:
        return [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY start_time, id")]
    finally:
        conn.close()


def test_the_runs_page_shows_the_newest_screen_first_and_pages_back(many_runs):
    everything = ordered_ids(many_runs)
    conn = connect_read_only(many_runs)
    try:
        first = runs_data(conn, Args())
        assert [run["id"] for run in first["runs"]] == everything[-PAGE_SIZE:]  # the newest, oldest first
        assert first["paging"]["pages"] == 2 and first["paging"]["matching"] == RUNS
        older = runs_data(conn, Args({"page": "2"}))
        assert [run["id"] for run in older["runs"]] == everything[:RUNS - PAGE_SIZE]
        for bad in ("0", "3", "x", "1.5"):
            with pytest.raises(UsageError):
                runs_data(conn, Args({"page": bad}))
        with pytest.raises(UsageError):
            runs_data(conn, Args({"since": "yesterday"}))
        failing = runs_data(conn, Args({"failing": "1"}))["runs"]
        assert [run["label"].split("@")[0] for run in failing] == ["zz-failed"]
        labelled = runs_data(conn, Args({"label": "nightly-00"}))
        assert labelled["paging"]["matching"] == 10
    finally:
        conn.close()


def test_the_served_runs_page_links_the_other_screens_and_says_where_it_is(many_runs, tmp_path):
    import asyncio
    import shutil

    from datasette.app import Datasette

    served = tmp_path / "traces.db"
    shutil.copy(many_runs, served)
    ds = Datasette([str(served)])
    page = asyncio.run(ds.client.get("/traces/-/tlindex"))
    assert page.status_code == 200
    assert f"runs {RUNS - PAGE_SIZE + 1}–{RUNS} of {RUNS}" in page.text and "page=2" in page.text
    assert asyncio.run(ds.client.get("/traces/-/tlindex?page=9")).status_code == 400
    assert asyncio.run(ds.client.get("/traces/-/tlindex.json?page=x")).status_code == 400


def test_commands_list_the_last_runs_and_say_how_many_were_left_out(many_runs, tmp_path):
    import json
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(many_runs, db)
    everything = ordered_ids(db)
    listed = CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"])
    assert [run["id"] for run in json.loads(listed.stdout)] == everything[-PAGE_SIZE:]
    assert f"the last {PAGE_SIZE} of {RUNS} runs" in listed.stderr
    three = CliRunner().invoke(cli, ["runs", "--db", str(db), "--json", "--last", "3"])
    assert [run["id"] for run in json.loads(three.stdout)] == everything[-3:]
    every = CliRunner().invoke(cli, ["runs", "--db", str(db), "--json", "--all"])
    assert len(json.loads(every.stdout)) == RUNS and "of" not in every.stderr.replace("storing the findings of", "")
    assert CliRunner().invoke(cli, ["runs", "--db", str(db), "--last", "0"]).exit_code == 2
    bad_day = CliRunner().invoke(cli, ["runs", "--db", str(db), "--since", "x"])
    assert bad_day.exit_code == 2 and bad_day.stderr.strip().splitlines() == [
        "Error: --since must be a day as YYYY-MM-DD, not 'x'"]
    found = CliRunner().invoke(cli, ["findings", "--db", str(db), "--json", "--last", "2"])
    assert [entry["run"] for entry in json.loads(found.stdout)] == everything[-2:]
    trend = CliRunner().invoke(cli, ["trend", "--db", str(db), "--json", "--last", "4"])
    assert [row["run_id"] for row in json.loads(trend.stdout)] == everything[-4:]


def test_the_trend_page_shows_the_last_hundred_and_pages_back_through_the_rest(many_runs):
    conn = connect_read_only(many_runs)
    try:
        data = trend_data(conn, Args({"last": "5"}))
        everything = ordered_ids(many_runs)
        assert [row["run_id"] for row in data["rows"]] == everything[-5:]
        assert data["matching"] == RUNS and data["last"] == 5 and data["pages"] == {"older": "last=5&offset=5",
                                                                                    "newer": None}
        seen, query = [], "last=5"
        while query is not None:  # older and older, each page once, to the first run
            page = trend_data(conn, Args(dict(pair.split("=") for pair in query.split("&"))))
            seen = [row["run_id"] for row in page["rows"]] + seen
            query = page["pages"]["older"]
        assert seen == everything
        back = trend_data(conn, Args({"last": "5", "offset": "10"}))
        assert back["pages"]["newer"] == "last=5&offset=5"
        for bad in ({"last": "0"}, {"last": "501"}, {"offset": "-1"}):
            with pytest.raises(UsageError):
                trend_data(conn, Args(bad))
    finally:
        conn.close()


def test_search_says_how_many_more_places_match_than_it_lists(many_runs, tmp_path):
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(many_runs, db)
    result = CliRunner().invoke(cli, ["search", "forward", "--db", str(db), "--limit", "5"])
    assert result.exit_code == 0
    hits = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(hits) == 5 and "more places" in result.stderr


def test_the_tree_reads_the_newest_runs_and_counts_the_older(many_runs):
    from tlindex.pages.tree import RUNS_SHOWN, tree_data

    conn = connect_read_only(many_runs)
    try:
        data = tree_data(conn, Args())
        assert [run["id"] for run in data["runs"]] == ordered_ids(many_runs)[-RUNS_SHOWN:]
        assert data["older"] == RUNS - RUNS_SHOWN
    finally:
        conn.close()
