"""A name names one run or none (issue 46): a hostile label equal to each other kind of name of another run makes
that name an ambiguity error, for every command option and page that takes a run, never the first run found.

The commands are derived from the click group (every parameter whose name says it takes a run), the pages from the
page declarations (every page that takes `?run=`, and every `tlindex show` page with a run in its path), the canned
queries from queries/ (each with a `run` parameter); a new one is covered, or fails here, the day it lands.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import DATA, ingest

from tlindex.answers.queries import load_queries
from tlindex.cli import cli
from tlindex.pages import PAGES

LOGS = [next((DATA / name).glob("*.log")) for name in ("graph_breaks", "dynamic", "recompiles", "closures",
                                                          "compile_errors")]
TAKES_A_RUN = re.compile(r"(^|_)(runs?|baseline)(_|$)|^judged$")  # a click parameter that names a run, by its name
MAKES_A_LABEL = {("ingest", "run_label"), ("spark-ingest", "run_label"),  # a label to give, not a run to find
                 ("watch", "run_label")}
NOT_A_RUN_HERE = {("serve", "keep_runs"),  # a count of runs
                  ("push", "baseline")}  # a run of the server's, named there as here (tests/test_team.py)


def parameters(group: click.Group = cli, prefix: str = ""):
    """(command words, parameter name) of every parameter of every command that takes a value (a flag names
    nothing), groups walked."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from parameters(command, f"{prefix}{name} ")
        else:
            for param in command.params:
                if not getattr(param, "is_flag", False):
                    yield f"{prefix}{name}", param.name


RUN_PAGES = [page.name for page in PAGES if {"run", "a", "b"} & set(page.placeholders) and page.json_twin]
RUN_QUERIES = sorted(q.name for q in load_queries().values() if "run" in {name for name, _ in q.params})


def show_names(page: str, other: str) -> list[str]:
    """The names `tlindex show PAGE` takes, in its path's order: NAME for the first run, another run, then 0."""
    from tlindex.pages import BY_NAME

    wanted = [p for p in BY_NAME[page].placeholders if p != "ext"]
    return [("NAME" if p in ("run", "a") else other if p == "b" else "0") for p in wanted]


def recipes(db: Path, tmp: Path, other: str) -> dict[tuple[str, str], list[list[str]]]:
    """Per (command, parameter): the command lines that give NAME to it (`other` is another run's id)."""
    d = ["--db", str(db)]
    return {
        ("findings", "run"): [["findings", "NAME", *d]],
        ("search", "run_name"): [["search", "aten", "--run", "NAME", *d]],
        ("diff", "run_a"): [["diff", "NAME", other, *d]],
        ("diff", "run_b"): [["diff", other, "NAME", *d]],
        ("report", "run_names"): [["report", "--run", "NAME", "-o", str(tmp / "report"), *d, "--silent"]],
        ("export chromium", "run_name"): [["export", "chromium", str(tmp / "trace.json"), "--run", "NAME", *d]],
        ("rm", "runs"): [["rm", "NAME", *d]],
        ("label", "run"): [["label", "NAME", "renamed", *d]],
        ("trend", "runs"): [["trend", "NAME", *d]],
        ("trend", "judged"): [["trend", "--run", "NAME", *d]],
        ("trend", "baseline"): [["trend", "--baseline", "NAME", *d]],
        ("run", "baseline"): [["run", "--baseline", "NAME", *d, "--", sys.executable, "-c", "pass"]],
        ("show", "names"): [["show", page, *show_names(page, other), *d] for page in RUN_PAGES],
        ("query", "params"): [["query", name, "-p", "run", "NAME", *d] for name in RUN_QUERIES],
    }


def test_every_parameter_that_takes_a_run_has_a_recipe(tmp_path):
    derived = {(command, name) for command, name in parameters() if TAKES_A_RUN.search(name)} - MAKES_A_LABEL - NOT_A_RUN_HERE
    listed = set(recipes(tmp_path / "t.db", tmp_path, "1")) - {("show", "names"), ("query", "params")}
    assert derived == listed, derived ^ listed
    assert {"run", "trie", "diff"} <= set(RUN_PAGES) and len(RUN_QUERIES) >= 5


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A run ingested from folder d/f3 (the victim) and, each from a folder of its own, runs labelled with each
    other kind of name the victim has: its folder's path, that path with a trailing slash, its folder's name, and
    a run whose folder is named like the victim's label. {kind: the name}, the database, the victim's id."""
    tmp = tmp_path_factory.mktemp("names")
    victim = tmp / "d" / "f3"
    victim.mkdir(parents=True)
    shutil.copy(LOGS[0], victim)
    db = tmp / "names.db"
    ingest(db, [str(victim)], jobs=1)
    conn = sqlite3.connect(db)
    victim_id, victim_label = conn.execute("SELECT id, label FROM runs").fetchone()
    conn.close()
    names = {"log folder": str(victim), "log folder with a trailing slash": f"{victim}/",
             "log folder's name": "f3", "label": victim_label}
    for n, (kind, name) in enumerate(names.items(), start=1):
        folder = tmp / f"h{n}" / (name if kind == "label" else f"hostile{n}")
        folder.mkdir(parents=True)
        shutil.copy(LOGS[n], folder)
        ingest(db, [str(folder)], jobs=1, run_label=None if kind == "label" else name)
    return names, db, victim_id


def _runs(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT id, label FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["log folder", "log folder with a trailing slash", "log folder's name", "label"])
def test_a_hostile_label_equal_to_another_runs_name_makes_it_ambiguous_everywhere(hostile, tmp_path, kind):
    names, source, victim = hostile
    db = tmp_path / "names.db"
    shutil.copy(source, db)
    before = _runs(db)
    name = names[kind]
    hostile_id = next(run for run, label in before if run != victim and
                      (label == name or kind == "label" and label.startswith(Path(name).name)))
    other = str(next(run for run, _ in before if run not in (victim, hostile_id)))
    wrong = []
    for (command, _), lines in recipes(db, tmp_path, other).items():
        for line in lines:
            result = CliRunner().invoke(cli, [name if word == "NAME" else word for word in line])
            said = result.output
            if not (result.exit_code == 1 and "runs match" in said and f"{victim} " in said
                    and f"{hostile_id} " in said):
                wrong.append((command, line[:3], result.exit_code, said[-300:]))
    assert not wrong, wrong[:3]
    assert _runs(db) == before  # nothing deleted or renamed
    assert not (tmp_path / "trace.json").exists() and not (tmp_path / "report").exists()


@pytest.mark.asyncio
async def test_pages_and_canned_query_redirects_refuse_an_ambiguous_name(hostile):
    """Every page without ids in its path (the page declarations) asked with `?run=` an ambiguous name answers 404
    naming both runs, or ignores `run` (answers as without it); every canned query with a run parameter too."""
    from datasette.app import Datasette

    names, db, victim = hostile
    ds = Datasette([str(db)])
    await ds.invoke_startup()
    refused = set()
    for name in names.values():
        for page in (p for p in PAGES if not p.placeholders):
            url = f"/names{page.path}" + (".json" if page.json_twin else "")
            base = {"q": "aten", "a": "1", "b": "2"}
            without = await ds.client.get(url, params=base)
            asked = await ds.client.get(url, params={**base, "run": name})
            if asked.status_code == 404 and "runs match" in asked.text:
                assert f"{victim} " in asked.text, (page.name, asked.text)
                refused.add(page.name)
            else:
                assert (asked.status_code, asked.text) == (without.status_code, without.text), (page.name, name)
        for query in RUN_QUERIES:
            asked = await ds.client.get(f"/names/{query}.json", params={"run": name})
            assert asked.status_code == 404 and "runs match" in asked.text, (query, name, asked.status_code)
    assert {"runs", "search", "trend", "graph_breaks", "tree"} <= refused


def test_a_prefix_is_asked_only_when_nothing_matches_whole(hostile, tmp_path):
    """`nightly` names the run labelled `nightly`, not `nightly (2)` whose label it begins (labels tlindex makes
    unique that way); an id is only ever an id."""
    names, source, victim = hostile
    db = tmp_path / "names.db"
    shutil.copy(source, db)
    shown = CliRunner().invoke(cli, ["findings", names["log folder"] + "/", "--db", str(db)])
    assert "runs match" in shown.output
    ids = [run for run, _ in _runs(db)]
    for run in ids[:2]:
        result = CliRunner().invoke(cli, ["trend", str(run), "--db", str(db), "--json"])
        assert result.exit_code == 0 and f'"run_id": {run}' in result.output


def test_rm_names_each_run_it_deletes_and_deletes_nothing_for_an_ambiguous_name(hostile, tmp_path):
    names, source, victim = hostile
    db = tmp_path / "names.db"
    shutil.copy(source, db)
    before = _runs(db)
    refused = CliRunner().invoke(cli, ["rm", str(victim), names["log folder"], "--db", str(db)])
    assert refused.exit_code == 1 and "runs match" in refused.output and _runs(db) == before
    (label,) = [label for run, label in before if run == victim]
    removed = CliRunner().invoke(cli, ["rm", str(victim), "--db", str(db)])
    assert removed.exit_code == 0 and f"removed run {victim} {label}" in removed.output
    assert [run for run, _ in _runs(db)] == [run for run, _ in before if run != victim]


@pytest.mark.parametrize("given,kept", [("5\u200b", None), ("\u202e5", None), ("\u200b", None), ("\ufeff 7 ", None),
                                        ("nightly\u200b-1", "nightly-1"), ("e\u0301t\u00e9", "\u00e9t\u00e9"),
                                        ("\u202egnp.exe", "gnp.exe")])
def test_labels_are_normalized_at_the_door(tmp_path, given, kept):
    """NFC, no bidi controls or invisible characters; one that would print as an id (or as nothing) is refused in
    one line, by `label`, `ingest --run` and `run --label` alike."""
    db = tmp_path / "t.db"
    ingest(db, [str(LOGS[1])], jobs=1)
    run = str(_runs(db)[0][0])
    write = "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['TORCH_TRACE'])"
    for args in (["label", run, given], ["ingest", str(LOGS[2]), "--run", given],
                 ["run", "--label", given, "--", sys.executable, "-c", write, str(LOGS[3])]):
        result = CliRunner().invoke(cli, [*args, "--db", str(db)] if args[0] != "run" else
                                    [args[0], "--db", str(db), *args[1:]])
        if kept is None:
            assert result.exit_code == 2 and "label cannot be" in result.output, (args, result.output)
            assert len(result.output.strip().splitlines()) <= 4 and "Traceback" not in result.output
        else:
            assert result.exit_code == 0, (args, result.output)
            assert kept in [label for _, label in _runs(db)]
            CliRunner().invoke(cli, ["rm", kept, "--db", str(db)]) if args[0] != "label" else None


def test_tsv_writes_no_raw_newline_or_tab_from_a_value(tmp_path):
    db = tmp_path / "t.db"
    ingest(db, [str(LOGS[1])], jobs=1, run_label="two\nlines\tand a tab \\ backslash")
    result = CliRunner().invoke(cli, ["query", "select id, label from runs", "--db", str(db), "--tsv"])
    assert result.exit_code == 0
    assert result.output.splitlines() == ["id\tlabel", "1\ttwo\\nlines\\tand a tab \\\\ backslash"]


def test_no_bidi_control_reaches_the_terminal_from_a_folder_name(tmp_path):
    """A log folder named with a right-to-left override: its run's label loses it at the door, and whatever else
    prints the folder (the runs' directory, an error) shows it as <U+202E>, never raw."""
    folder = tmp_path / "run\u202egol.py"
    folder.mkdir()
    shutil.copy(LOGS[1], folder)
    db = tmp_path / "t.db"
    ingest(db, [str(folder)], jobs=1)
    assert "\u202e" not in _runs(db)[0][1]
    for args in (["runs", "--db", str(db)], ["findings", str(folder) + "x", "--db", str(db)],
                 ["query", "select directory from runs", "--db", str(db), "-t"]):
        result = CliRunner().invoke(cli, args)
        assert "\u202e" not in result.output, args
    shown = CliRunner().invoke(cli, ["query", "select directory from runs", "--db", str(db), "--tsv"])
    assert "run<U+202E>gol.py" in shown.output


# --- names that name nothing (issue 62, point 4) ----------------------------------------------------------------------

NAMES_OF_NOTHING = ["99999999999999999999", str(2 ** 63), "\u200b", "\u00ad", "\u202e", " \u200b "]
COMPILES_OF_NOTHING = ["99999999999999999999", "0/0@99999999999999999999", "0/0~99999999999999999999",
                       "0/0@pid99999999999999999999", "1:0/0@99999999999999999999", "\u200b:0/0"]


@pytest.mark.parametrize("name", NAMES_OF_NOTHING, ids=["past 2^63", "2^63", "zero-width space", "soft hyphen",
                                                       "U+202E", "blank"])
def test_a_number_past_sqlite_or_a_name_that_prints_as_nothing_names_no_run_everywhere(hostile, tmp_path, name):
    """Reproduction: `tlindex rm $'\\u200b'` removed the only run (it begins every label), and a number past 2^63
    crashed every command that takes a run with a traceback. Every parameter that takes a run (the recipes above,
    derived from the click group): exit 1, one line saying no run matches, nothing removed or renamed."""
    _, source, victim = hostile
    db = tmp_path / "names.db"
    shutil.copy(source, db)
    before = _runs(db)
    other = str(next(run for run, _ in before if run != victim))
    wrong = []
    for (command, _), lines in recipes(db, tmp_path, other).items():
        for line in lines:
            result = CliRunner().invoke(cli, [name if word == "NAME" else word for word in line])
            said = "no run matches" in result.output or "names no run" in result.output
            if not (result.exit_code == 1 and said and isinstance(result.exception, (SystemExit, type(None)))):
                wrong.append((command, line[:3], result.exit_code, result.output[-300:], repr(result.exception)))
    assert not wrong, wrong[:3]
    assert _runs(db) == before


@pytest.mark.parametrize("name", COMPILES_OF_NOTHING)
def test_a_compile_named_by_numbers_past_sqlite_names_no_compile(hostile, name):
    """Reproduction: `tlindex show compile 99999999999999999999` crashed (a number past SQLite's integers)."""
    _, db, _ = hostile
    result = CliRunner().invoke(cli, ["show", "compile", name, "--db", str(db)])
    assert result.exit_code == 1 and isinstance(result.exception, (SystemExit, type(None))), \
        (result.output, result.exception)
    assert "no compile" in result.output or "names no run" in result.output, result.output


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
async def test_pages_and_canned_queries_answer_404_for_a_name_of_nothing(hostile):
    """Reproduction: canned `?run=`, guards_diff `?compile=`, search and trend `?run=` with a number past 2^63
    answered 500. Every page without ids in its path (the page declarations) and every canned query with a run or
    compile parameter (queries/): 404 saying so, or the page as without the argument, never 500."""
    from conftest import close_datasette
    from datasette.app import Datasette

    _, db, _ = hostile
    ds = Datasette([str(db)])
    await ds.invoke_startup()
    try:
        for name in NAMES_OF_NOTHING:
            for page in (p for p in PAGES if not p.placeholders):
                url = f"/names{page.path}" + (".json" if page.json_twin else "")
                asked = await ds.client.get(url, params={"q": "aten", "run": name})
                assert asked.status_code in (200, 400, 404), (page.name, name, asked.status_code, asked.text[-300:])
            for query in RUN_QUERIES:
                asked = await ds.client.get(f"/names/{query}.json", params={"run": name})
                assert asked.status_code == 404 and "run" in asked.text, (query, name, asked.status_code)
        compile_queries = sorted(q.name for q in load_queries().values() if "compile" in {n for n, _ in q.params})
        assert "guards_diff" in compile_queries
        for name in COMPILES_OF_NOTHING:
            for query in compile_queries:
                asked = await ds.client.get(f"/names/{query}.json", params={"compile": name})
                assert asked.status_code == 404 and ("no compile" in asked.text or "names no run" in asked.text), \
                    (query, name, asked.status_code, asked.text[-300:])
    finally:
        close_datasette(ds)
