"""A compile is named as torch and tlparse print it, attempts included ([0/1_1], 0/1_1), wherever a compile is
asked for; a compile shared by two processes or generations of one run has a name a person can type, and the
error for an ambiguous name offers names that work."""

from __future__ import annotations

import re
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import connect, scenario_run

from tlindex.answers.names import resolve_compile
from tlindex.answers.queries import named_params
from tlindex.answers.search import search
from tlindex.cli import cli
from tlindex.errors import UnknownCompile
from tlindex.pages import read_named
from tlindex.pages.rows import Args
from tlindex.pages.tree import tree_data


@pytest.fixture(scope="module")
def conn(fixtures_db):
    connection = connect(fixtures_db)
    yield connection
    connection.close()


def _offered(error: str) -> list[str]:
    """The names an ambiguity error offers: "N compiles are [0/0]: A; B; C. Name one as shown, …"."""
    listed = error.split("]: ", 1)[1].rsplit(". Name one", 1)[0]
    return [name for name in listed.split("; ") if name != "…"]


def test_every_name_an_ambiguity_error_offers_names_its_compile_alone(conn):
    """Every compile id of every fixture run, named within its run: one compile, or an error whose every name
    resolves to one of the compiles, a different one each, all of them together."""
    ids = conn.execute("SELECT run_id, compile_id, count(*) FROM compiles WHERE run_id IS NOT NULL "
                       "GROUP BY run_id, compile_id").fetchall()
    shared = 0
    for run, compile_id, count in ids:
        rows = {row[0] for row in conn.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = ?",
                                               (run, compile_id))}
        if count == 1:
            assert resolve_compile(conn, compile_id, run) in rows
            continue
        with pytest.raises(UnknownCompile) as raised:
            resolve_compile(conn, compile_id, run)
        offered = _offered(str(raised.value))
        assert len(offered) == count and not any(name.startswith("row ") for name in offered), offered
        assert {resolve_compile(conn, name) for name in offered} == rows
        shared += 1
    assert shared >= 8  # ranks, two processes of a rank, generations after a reset


def test_a_generation_after_a_reset_is_named_as_the_tree_says_it(conn):
    (run,) = scenario_run(conn, "closures")
    label = conn.execute("SELECT label FROM runs WHERE id = ?", (run,)).fetchone()[0]
    second = resolve_compile(conn, f"{label}:0/0~1")
    assert conn.execute("SELECT generation FROM compiles WHERE id = ?", (second,)).fetchone()[0] == 1
    html_words = tree_data(conn, Args([("run", str(run)), ("q", "[0/0]~1")]))
    assert [c["id"] for r in html_words["runs"] for c in r["compiles"]] == [second]


def test_an_attempt_names_its_compile_everywhere_a_compile_is_asked_for(conn, fixtures_db):
    (run,) = scenario_run(conn, "graph_breaks")
    restarted, compile_id = conn.execute("SELECT id, compile_id FROM compiles WHERE run_id = ? AND attempts = 2 "
                                         "ORDER BY id LIMIT 1", (run,)).fetchone()
    for name in (f"[{compile_id}_1]", f"{compile_id}_1", f"[{compile_id}_0]", f"{run}:{compile_id}_1"):
        assert resolve_compile(conn, name, run) == restarted, name
        assert named_params(conn, {"run": str(run), "compile": name})["compile"] == str(restarted)
        assert read_named(conn, "compile", [name if ":" in name else f"{run}:{name}"])["compile"]["id"] == restarted
    with pytest.raises(UnknownCompile, match="has no attempt 2"):
        resolve_compile(conn, f"{compile_id}_2", run)
    result = CliRunner().invoke(cli, ["show", "compile", f"{run}:[{compile_id}_1]", "--json", "--db", str(fixtures_db)])
    assert result.exit_code == 0 and f'"id": {restarted}' in result.output
    kept = tree_data(conn, Args([("run", str(run)), ("q", f"[{compile_id}_1]")]))
    assert restarted in [c["id"] for r in kept["runs"] for c in r["compiles"]]
    plain = {(h.table, h.compile) for h in search(conn, "[0/1]")}  # recompile reasons name 0/1
    assert plain and {(h.table, h.compile) for h in search(conn, "[0/1_1]")} == plain


def test_two_processes_of_one_rank_are_told_apart_by_pid(tmp_path):
    """rank_restart's two attempts ingested as one run (--run): each rank's 0/0 twice, named by process."""
    from conftest import DATA, ingest

    ingest(tmp_path / "t.db", [str(DATA / "rank_restart")], jobs=1, run_label="restarted")
    conn = sqlite3.connect(tmp_path / "t.db")
    with pytest.raises(UnknownCompile) as raised:
        resolve_compile(conn, "restarted:0/0@1")
    offered = _offered(str(raised.value))
    assert len(offered) == 2 and all(re.search(r"@pid\d+$", name) for name in offered), offered
    assert len({resolve_compile(conn, name) for name in offered}) == 2
