"""One run, one set of numbers: for every fixture run and every column of `run_health`, each surface that shows
the column shows the view's value. The cases are generated: the columns from the view (tlindex.answers.health),
the HTML pages from the page declarations (every page about a run, marked numbers read by their
`data-health` attribute), the JSON surfaces by the names of their keys; a column or a page added later is swept
the day it is added."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import scenario_dirs

from tlindex.answers.findings import findings
from tlindex.answers.health import METRICS, health
from tlindex.cli import cli
from tlindex.errors import NotFound
from tlindex.pages import PAGES
from tlindex.pages.rows import Args

COLUMNS = tuple(metric.column for metric in METRICS)
MARK = re.compile(r'data-run="(\d+)"(?: data-health="(\w+)")?[^>]*>([^<]*)<')
ANONYMOUS_RUN_PAGES = ("runs", "trend", "graph_breaks", "tree")  # pages that take runs as ?run= (the rest: {run})


def _number(text: str) -> float:
    return float(text.replace(",", "").strip())


def _scalars(data, found: dict[str, list]) -> dict[str, list]:
    """Every scalar under a key named like a run_health column, in nested objects (not in lists: a list holds
    other things than the run, its compiles or ranks)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in COLUMNS and isinstance(value, (int, float)) and not isinstance(value, bool):
                found.setdefault(key, []).append(value)
            elif isinstance(value, dict):
                _scalars(value, found)
    return found


@pytest.fixture(scope="module")
def conn(fixtures_db):
    from tlindex.store.compression import register

    connection = register(sqlite3.connect(fixtures_db))
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def views(fixtures_db, conn) -> dict[int, dict[str, dict[str, list]]]:
    """run -> surface -> column -> the values the surface shows for that run."""
    runs = [row["run_id"] for row in health(conn)]
    shown: dict[int, dict[str, dict[str, list]]] = {run: {} for run in runs}
    db = ["--db", str(fixtures_db)]
    for name, listed in (("runs --json", "runs"), ("trend --json", "trend")):
        for row in json.loads(CliRunner().invoke(cli, [listed, "--json", *db]).stdout):
            shown[row.get("run_id", row.get("id"))][name] = _scalars(row, {})
    renderer = _renderer(fixtures_db)
    for run in runs:
        result = CliRunner().invoke(cli, ["show", "run", str(run), "--json", *db])
        shown[run]["run page JSON twin"] = _scalars(json.loads(result.output), {})
        found = findings(conn, run)
        shown[run]["findings --json"] = {f.kind: [f.count] for f in found if f.kind in COLUMNS}
        if any(f.kind in ("failures", "recompile_limit") for f in found):  # run_health counts the limit's compiles
            shown[run]["findings --json"]["failures"] = [sum(f.count for f in found  # as failed: the findings apart
                                                             if f.kind in ("failures", "recompile_limit"))]
        for page in PAGES:
            html = _page_html(conn, renderer, page, run)
            if html is not None:
                marks = [(column, value) for r, column, value in MARK.findall(html) if int(r) == run and column]
                shown[run][f"{page.name} page (report)"] = {
                    column: [_number(v) for c, v in marks if c == column] for column in {c for c, _ in marks}}
    return shown


def _renderer(db_path):
    from tlindex.render.report import ReportRenderer

    return ReportRenderer(db_path)


def _page_html(conn: sqlite3.Connection, renderer, page, run: int) -> str | None:
    """A page about one run as the report renders it; None for a page that is not about a run."""
    if page.template is None or page.kind != "html":
        return None
    try:
        if "{run}" in page.path and page.path.count("{") == 1:
            return renderer.page(page, page.read(conn, Args(), run=run), Args())
        if page.name in ANONYMOUS_RUN_PAGES:
            args = Args([("run", str(run))])
            return renderer.page(page, page.read(conn, args), args)
    except NotFound:  # a page this run has not (the vLLM page of a run without vLLM)
        return None
    return None


def test_every_surface_shows_every_run_health_column_as_the_view_says(conn, views):
    rows = {row["run_id"]: row for row in health(conn)}
    differences, covered = [], {}
    for run, surfaces in views.items():
        for surface, values in surfaces.items():
            for column in COLUMNS:
                expected = rows[run][column] or 0
                for value in values.get(column, []):
                    covered.setdefault(surface, set()).add(column)
                    if abs(value - expected) > 1e-9:
                        differences.append(f"run {run} {surface} {column}: {value}, run_health {expected}")
    assert not differences, "\n".join(differences)
    # the sweep sees what it should: every surface shows the compiles, the run page every number of its header
    assert {s for s, columns in covered.items() if "compiles" in columns} >= {
        "runs --json", "trend --json", "run page JSON twin", "run page (report)", "tree page (report)",
        "runs page (report)"}
    assert covered["run page (report)"] >= {"compiles", "failures", "recompiles", "restarts", "graph_breaks",
                                            "compile_time_s"}
    assert covered["findings --json"] >= {"graph_breaks", "recompiles", "failures"}
    assert covered["trend --json"] >= set(COLUMNS) - {"autotune_time_s"}  # (no fixture autotuned: CPU)


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_ingest_says_the_compiles_the_runs_count(tmp_path, conn):
    """The summary line of an ingest of one scenario counts what run_health counts for its runs."""
    from conftest import ingest

    for directory in scenario_dirs():
        db = tmp_path / f"{directory.name}.db"
        summary = ingest(db, [str(directory)], jobs=1)
        mine = sqlite3.connect(db)
        assert summary.compiles == sum(row["compiles"] for row in health(mine)), directory.name
        assert f" {summary.compiles:,} compiles," in summary.line()
        mine.close()


def test_findings_texts_close_every_quote_and_backtick_they_open(conn):
    pairs = (("“", "”"), ("‘", "’"), ("(", ")"))
    for (run,) in conn.execute("SELECT id FROM runs").fetchall():
        for finding in findings(conn, run):
            text = finding.text
            assert text.count("`") % 2 == 0, (run, text)
            for opening, closing in pairs:
                assert text.count(opening) == text.count(closing), (run, opening, text)
