"""The findings are a registry of checks: each kind says what it means and what to try next, a new check is one
registration, a check that raises fails alone, and the registry says what the findings said before it."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_db, scenario_run

from tlindex.answers.findings import CHECKS, check, findings, kinds, problems
from tlindex.answers.findings.registry import FAILED, SEVERITIES, anchor
from tlindex.cli import cli

FIELDS = ("severity", "kind", "count", "text", "query", "params", "compile")


@pytest.fixture
def registered():
    """Checks a test registers, removed after it (the registry is the module's own)."""
    added: list[str] = []
    yield added
    for kind in added:
        CHECKS.pop(kind, None)


def test_every_kind_says_what_it_means_and_what_to_try_next():
    known = kinds()
    assert len(known) >= 20 and known[-1].kind == FAILED
    assert len({c.kind for c in known}) == len(known) and len({c.anchor for c in known}) == len(known)
    for c in known:
        assert c.severity in SEVERITIES and c.title, c.kind
        for said in (c.explanation, c.next_steps):  # a sentence or two, for a PyTorch engineer: not a wall of text
            assert said.strip() and said.rstrip().endswith((".", ")")) and len(said) <= 420, (c.kind, said)
    assert {f"divergence:{k}" for k in ("missing_compile", "collective_schedule", "execution_order")} <= set(CHECKS)


def _said(found) -> list[dict]:
    return [{name: getattr(f, name) for name in FIELDS} for f in found]


def test_every_run_s_findings_carry_their_kind_s_words(db):
    """The fixtures' every run: each finding carries its kind's explanation and next steps. (What the sentences say
    is held to an independent reading of the raw logs in tests/test_oracle.py, which replaced the verbatim copy of
    the findings before the registry, tests/findings_before.py.)"""
    runs = [row[0] for row in db.execute("SELECT id FROM runs ORDER BY id")]
    kinds_seen = set()
    for run in runs:
        for finding in findings(db, run):
            assert finding.explanation == CHECKS[finding.kind].explanation and finding.next_steps, finding.kind
            kinds_seen.add(finding.kind)
    assert len(kinds_seen) >= 12  # the fixtures exercise most checks


def _throwaway(registered: list[str], kind: str = "throwaway_slow_guards"):
    @check(kind, "warning", 45, "Slow guards (a test's)", "Guards took long to check: <b>each call</b> pays it.",
           "Read the guards of the slowest compile.")
    def slow_guards(conn, run, context):
        n = conn.execute("SELECT count(*) FROM compiles WHERE run_id = ?", (run,)).fetchone()[0]
        return [context.finding(n, f"{n} compiles <i>checked</i> guards slowly.", "failures")]
    registered.append(kind)
    return kind


def derived_again(fixtures_db, tmp_path, run: int):
    """A copy of the fixtures database whose run is derived again, as the migration that ships a new check derives
    every run (tlindex.answers.derived); Datasette serving it."""
    from datasette.app import Datasette

    from tlindex import Database
    from tlindex.answers.derived import derive_runs
    from tlindex.store.db import immediate

    path = copy_db(fixtures_db, tmp_path / "traces.db")
    with Database(path, write=True) as opened, immediate(opened.conn):
        derive_runs(opened.conn, [run])
    return path, Datasette([str(path)])


@pytest.mark.asyncio
async def test_a_new_check_is_one_registration(registered, fixtures_db, db, tmp_path):
    """A check registered as docs/architecture.md says shows on the run page (with its explanation linked to its
    glossary entry, escaped), in `tlindex findings` (text and JSON), and in the glossary, once the runs are derived."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    assert "**A new finding** (one registration" in doc and "@check(" in doc
    kind = _throwaway(registered)
    (run,) = scenario_run(db, "dynamic")  # a healthy run: nothing to report before
    fixtures_db, ds = derived_again(fixtures_db, tmp_path, run)
    found = {f.kind: f for f in findings(db, run)}
    assert found[kind].severity == "warning" and found[kind].params == {"run": str(run)}
    page = (await ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    section = page.split('<h2 id="findings">')[1].split("<h2")[0]
    assert "compiles &lt;i&gt;checked&lt;/i&gt; guards slowly" in section and "<i>checked" not in section
    assert f'glossary#{anchor(kind)}"' in section and "Read the guards of the slowest compile." in section
    glossary = (await ds.client.get("/traces/-/tlindex/glossary")).text
    assert f'id="{anchor(kind)}"' in glossary and "&lt;b&gt;each call&lt;/b&gt;" in glossary
    result = CliRunner().invoke(cli, ["findings", str(run), "--db", str(fixtures_db)])
    assert result.exit_code == 1 and "compiles <i>checked</i> guards slowly" in result.output  # a warning: CI fails
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "guards slowly" in line)
    assert lines[at + 1].strip() == "next: Read the guards of the slowest compile."
    (report,) = json.loads(CliRunner().invoke(cli, ["findings", str(run), "--db", str(fixtures_db), "--json"]).output)
    mine = next(f for f in report["findings"] if f["kind"] == kind)
    assert mine["explanation"].startswith("Guards took long") and mine["next_steps"].startswith("Read the guards")


@pytest.mark.asyncio
async def test_a_check_that_raises_fails_alone_and_says_why(registered, fixtures_db, db, tmp_path):
    kind = "throwaway_broken"
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    before = findings(db, run)

    @check(kind, "error", 5, "Broken (a test's)", "It raises.", "Nothing.")
    def broken(conn, run, context):
        raise ValueError("odd <script>alert(1)</script> data")
    registered.append(kind)
    _, ds = derived_again(fixtures_db, tmp_path, run)
    found = findings(db, run)
    failed = [f for f in found if f.kind == FAILED]
    assert len(failed) == 1 and kind in failed[0].text and "ValueError: odd" in failed[0].text
    assert failed[0].severity == "warning" and failed[0].next_steps
    others = [f for f in found if f.kind != FAILED]
    assert _said(others) == _said(before)  # the rest, all of it, in order
    page = (await ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    assert page.count("ValueError: odd") == 1 and "<script>alert(1)" not in page
    assert html.escape("<script>alert(1)</script>", quote=False) in page
    assert "Ranks diverge in compile ids" in page  # the others still show
    runs = (await ds.client.get("/traces/-/tlindex")).text
    assert runs.count("Ranks diverge in compile ids") >= 1  # the runs page's worst finding is still the worst


def test_checks_that_need_a_value_that_failed_are_one_finding(registered, db):
    """Two checks reading one shared value that raised: one finding names both (not one per check)."""
    def failing():
        raise KeyError("gone")

    for kind in ("throwaway_a", "throwaway_b"):
        @check(kind, "info", 200, kind, "It needs a shared value.", "Nothing.")
        def needs(conn, run, context):
            return [context.finding(1, str(context.shared("throwaway", failing)))]
        registered.append(kind)
    (run,) = scenario_run(db, "dynamic")
    failed = [f for f in findings(db, run) if f.kind == FAILED]
    assert len(failed) == 1 and "throwaway_a, throwaway_b" in failed[0].text and "KeyError" in failed[0].text
    assert problems(failed) == failed  # a check that could not run is worth a look: a warning


def test_the_failed_check_finding_is_explained_in_the_glossary():
    from tlindex.answers.glossary import term

    assert term(anchor(FAILED)).next_steps and term(anchor("graph_breaks")).code == "graph_breaks"
