"""The JSON twins are keyed by words and documented: every page with a twin declares its keys in
tlindex/pages/twins.py, the declaration is what the page's data holds on the fixtures, and docs/json.md is written
from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import connect

from tlindex.pages import PAGES
from tlindex.pages.rows import Args
from tlindex.pages.twins import render, twins

ROOT = Path(__file__).resolve().parents[1]
# A row of the fixtures each placeholder can take (the first that has what the page shows); a placeholder not named
# here is given its declared sample (tlindex.pages.declare.PLACEHOLDERS).
SAMPLES = {
    "run": "SELECT run_id FROM compiles WHERE graph_breaks > 0 ORDER BY id LIMIT 1",
    "a": "SELECT id FROM runs ORDER BY id LIMIT 1", "b": "SELECT id FROM runs ORDER BY id LIMIT 1 OFFSET 1",
    "ca": "SELECT id FROM compiles ORDER BY id LIMIT 1", "cb": "SELECT id FROM compiles ORDER BY id LIMIT 1 OFFSET 1",
    "compile": "SELECT id FROM compiles WHERE compile_id != '-/-' ORDER BY id LIMIT 1",
    "node": "SELECT 1", "ext": "SELECT ''",
    "piece": "SELECT id FROM piece_compiles ORDER BY id LIMIT 1",
    "artifact": "SELECT id FROM artifacts WHERE kind = 'inductor_output_code' ORDER BY id LIMIT 1",
    "hash": "SELECT payload FROM artifacts WHERE kind = 'inductor_output_code' ORDER BY id LIMIT 1",
}
BY_PAGE = {  # pages that need a particular row
    "bytecode": {"compile": "SELECT c.id FROM compiles c JOIN artifacts a ON a.compile = c.id "
                            "WHERE a.name LIKE '%ORIGINAL_BYTECODE' ORDER BY c.id LIMIT 1"},
    "vllm": {"run": "SELECT c.run_id FROM piece_compiles p JOIN compiles c ON c.id = p.compile LIMIT 1"},
    "provenance": {"artifact": "SELECT id FROM artifacts WHERE name = 'inductor_provenance_tracking_node_mappings' "
                               "AND payload IS NOT NULL ORDER BY id LIMIT 1"},
}


def test_every_page_with_a_twin_declares_it():
    assert set(twins()) == {page.name for page in PAGES if page.json_twin}


@pytest.mark.parametrize("page", [p for p in PAGES if p.json_twin], ids=lambda p: p.name)
def test_a_twin_holds_the_keys_its_page_declares_and_they_are_words(fixtures_db, page):
    conn = connect(fixtures_db)
    values = {}
    for name in page.placeholders:
        sql = BY_PAGE.get(page.name, {}).get(name) or SAMPLES.get(name) or page.sample(name)
        values[name] = conn.execute(sql).fetchone()[0]
    args = Args()
    if page.name == "artifact_diff":
        first = conn.execute(SAMPLES["artifact"]).fetchone()[0]
        args = Args([("a", str(first)), ("b", str(first))])
    data = page.read(conn, args, **{k: v for k, v in values.items() if k != "ext"}, **(
        {"ext": ""} if "ext" in page.placeholders else {}))
    declared = [key for key, _ in twins()[page.name]]
    assert list(data) == declared
    # keyed by words, never letters
    assert all(len(key) > 1 for key in declared)


def test_docs_json_md_is_written_from_the_declarations():
    assert (ROOT / "docs" / "json.md").read_text() == render(), "run: python -m tlindex.pages.twins > docs/json.md"


@pytest.mark.parametrize("page", [p for p in PAGES if p.json_twin and p.name != "glossary"], ids=lambda p: p.name)
def test_show_without_json_prints_a_screen_not_an_outline(fixtures_db, page):
    """`tlindex show PAGE`: a screen at most (what the page shows first), never bare `-` bullets or internals
    such as a compile's guards print, and how to get everything."""
    from click.testing import CliRunner

    from tlindex.cli import cli
    from tlindex.pages.screens import LINES

    conn = connect(fixtures_db)
    names = []
    for name in page.placeholders:
        if name == "ext":
            continue
        if page.name == "artifact_diff":
            break
        value = conn.execute(BY_PAGE.get(page.name, {}).get(name) or SAMPLES.get(name) or page.sample(name)).fetchone()[0]
        names.append(str(value))
    if page.name in ("artifact_diff", "diff_compiles", "trie_node"):
        pytest.skip("shown with its arguments elsewhere")
    result = CliRunner().invoke(cli, ["show", page.name, *names, "--db", str(fixtures_db)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert 1 < len(lines) <= LINES + 1 and lines[-1].endswith("--json)")
    assert not any(line.strip() == "-" for line in lines) and "guards_print" not in result.output


def test_the_run_and_compile_screens_say_the_header_and_the_findings(fixtures_db):
    from click.testing import CliRunner
    from conftest import scenario_run

    from tlindex.cli import cli

    (run,) = scenario_run(connect(fixtures_db), "graph_breaks")
    shown = CliRunner().invoke(cli, ["show", "run", str(run), "--db", str(fixtures_db)]).output
    assert "compiles: 12 (0 failed, 0 recompiles, 6 restarts, 7 graph breaks)" in shown
    assert "warning: 7 graph breaks in 5 groups" in shown
    compile_screen = CliRunner().invoke(cli, ["show", "compile", f"{run}:0/0", "--db", str(fixtures_db)]).output
    assert "status: break (2 attempts, 1 restart)" in compile_screen
    assert "graph break: Failed to trace builtin operator" in compile_screen
