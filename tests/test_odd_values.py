"""Odd values where a log had numbers: every page and every command still answers (issue 37).

The real fixtures are rewritten (tests/odd_values.py, HAND-MADE variants) with a share of their
numbers replaced by each of "x", "", [1], {}, null, -1, 1e308, 2**70 and true, then ingested; every
route of the route table is requested (a crawl from the runs page and from seeds generated from
the page declarations, tlindex.pages, JSON twins included) and every command of the click registry is run. No answer may
be a 500 and no command may print a traceback. A route or a command added later is covered the day
it is added: the crawl fails for a route it did not reach, and the CLI test for a command without a
recipe here. The fast sample runs three scenarios; `-m slow` runs every fixture under several seeds.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, ingest, scenario_dirs
from crawl import crawl
from odd_values import ODD_VALUES, oddify

from tlindex import pages as routes
from tlindex.cli import cli

SAMPLE = ("graph_breaks", "vllm_piecewise", "provenance", "ddp_4ranks_diverge")  # every route has data here
ALL_SCENARIOS = tuple(folder.name for folder in scenario_dirs())


def odd_database(tmp: Path, scenarios: tuple[str, ...], seed: int, keep_context: bool) -> tuple[Path, Path]:
    """The scenarios' logs made odd (seeded), and the database they were ingested into."""
    logs = tmp / "logs"
    for scenario in scenarios:
        for log in sorted((DATA / scenario).glob("*.log")):
            (logs / scenario).mkdir(parents=True, exist_ok=True)
            oddify(log, logs / scenario / log.name, seed, share=0.2, keep_context=keep_context)
    db = tmp / "odd.db"
    summary = ingest(db, [str(logs)], jobs=2)
    assert not summary.problems, summary.problems
    return logs, db


VARIANTS = [(1, True), (2, False)]  # (seed, keep the ids that place records in their compiles)


@pytest.fixture(scope="module", params=VARIANTS, ids=["context kept", "context odd too"])
def odd_sample(request, tmp_path_factory) -> tuple[Path, Path]:
    seed, keep = request.param
    return odd_database(tmp_path_factory.mktemp(f"odd{seed}"), SAMPLE, seed, keep)


def test_the_variants_carry_every_odd_value():
    """The generator itself: over a real log, each odd value stands somewhere a number was."""
    import random

    from odd_values import _odd

    rng, seen = random.Random(0), set()
    for _ in range(200):
        seen |= {json.dumps(v) for v in _odd({"a": [1, 2.5, {"b": 3}]}, rng, 1.0)["a"][:2]}
    assert {json.dumps(value) for value in ODD_VALUES} <= seen


# --- the reproduction of the issue ----------------------------------------------------------------

@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("odd", ["x", "", [1], {}])
@pytest.mark.asyncio
async def test_one_odd_compile_time_no_longer_takes_the_database_down(tmp_path, odd):
    """HAND-MADE variant of a real log: one compilation_metrics record whose entire_frame_compile_time_s is
    odd. The runs page and its JSON, the run page, the diff, `runs` and `findings` all answer; the column
    is NULL and an ingest note names the file and line, with the value as logged."""
    from datasette.app import Datasette

    source = DATA / "graph_breaks" / next((DATA / "graph_breaks").glob("*.log")).name
    lines = source.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if '{"compilation_metrics": {' in line)
    prefix, envelope = lines[at].split("] ", 1)
    data = json.loads(envelope)
    data["compilation_metrics"]["entire_frame_compile_time_s"] = odd
    lines[at] = prefix + "] " + json.dumps(data)
    log = tmp_path / "logs" / source.name
    log.parent.mkdir()
    log.write_text("\n".join(lines))
    db = tmp_path / "traces.db"
    ingest(db, [str(log), str(DATA / "graph_breaks")], jobs=1, run_label=None)
    conn = connect(db)
    (note,) = conn.execute("SELECT line, message, excerpt FROM ingest_errors WHERE kind = 'bad_value'").fetchall()
    assert note["line"] == at + 1 and "entire_frame_compile_time_s" in note["message"]
    assert json.dumps(odd) in note["message"]
    assert conn.execute("SELECT count(*) FROM metrics WHERE typeof(entire_frame_compile_time_s) "
                        "NOT IN ('real', 'integer', 'null')").fetchone()[0] == 0
    other = conn.execute("SELECT other FROM metrics m JOIN envelopes e ON e.id = m.envelope_id "
                         "WHERE e.line = ?", (at + 1,)).fetchone()[0]
    assert json.loads(other)["entire_frame_compile_time_s"] == odd  # nothing lost
    runs = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
    ds = Datasette([str(db)])
    await ds.invoke_startup()
    for path in ["/traces/-/tlindex", "/traces/-/tlindex.json", f"/traces/-/tlindex/run/{runs[0]}",
                 f"/traces/-/tlindex/diff/{runs[0]}/{runs[-1]}"]:
        assert (await ds.client.get(path)).status_code == 200, path
    for args in (["runs"], ["runs", "--json"], ["findings"], ["findings", "--json"]):
        result = CliRunner().invoke(cli, [*args, "--db", str(db)])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        assert "Traceback" not in result.output


# --- what a log brings is bounded on every page (issue 46) ------------------------------------------------------------

def hostile_log(folder: Path) -> Path:
    """HAND-MADE: a real log (graph_breaks) with three records added to its first compile: a graph break whose
    title, Explanation and Hint are 10 MB lines each, a JSON artifact nested 200,000 levels, and a JSON artifact of
    60 MB."""
    import hashlib

    from odd_values import MB, deep_json, long_text

    source = next((DATA / "graph_breaks").glob("*.log"))
    prefix = "V1122 15:18:11.933000 12384 torch/_logging/_internal.py:1578] "

    def artifact(name: str, encoding: str, payload: str) -> str:
        meta = {"artifact": {"name": name, "encoding": encoding}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0,
                "has_payload": hashlib.md5(payload.encode()).hexdigest()}
        return prefix + json.dumps(meta) + "\n\t" + payload.replace("\n", "\n\t") + "\n"

    big = long_text(10 * MB)
    reason = (f"Encountered graph break when attempting to trace CALL: x\n\n{big}\n  Explanation: {big}\n"
              f"  Hint: {big}\n\n For more details, https://x/gb/gb0059.html\n")
    text = source.read_text()
    cut = text.index("\nV", text.index('"dynamo_start"')) + 1  # after the first compile's first record
    added = (artifact("dynamo_graph_break_reason", "string", reason) + artifact("deep_json", "json", deep_json())
             + artifact("huge_json", "json", json.dumps({"k": long_text(60 * MB)})))
    folder.mkdir(parents=True)
    log = folder / source.name
    log.write_text(text[:cut] + added + text[cut:])
    return log


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    db = tmp / "hostile.db"
    assert not ingest(db, [str(hostile_log(tmp / "logs"))], jobs=1).problems
    return db


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_the_graph_breaks_of_a_10_mb_explanation_are_shown_cut_and_said_in_one_line(hostile_db):
    """`tlindex show graph_breaks` was a DataError traceback (string or blob too big) after 10 s at 3.7 GB."""
    result = CliRunner().invoke(cli, ["show", "graph_breaks", "--db", str(hostile_db), "--json"])
    assert result.exit_code == 0, result.output[-500:]
    groups = json.loads(result.output)["groups"]
    long_one = next(g for g in groups if g["title"].startswith("word"))
    from tlindex.answers.clip import ELLIPSIS, PAGE_TEXT_CHARS

    assert long_one["title"].endswith(ELLIPSIS) and len(long_one["title"]) <= PAGE_TEXT_CHARS + 1
    assert len(result.output) < 100_000


@pytest.mark.asyncio
async def test_pages_of_long_and_deep_artifacts_answer_with_a_bounded_head(hostile_db):
    """The deep artifact's page and its diff answered 500 (RecursionError); the 60 MB JSON payload's page wrote
    540 MB of HTML; the graph-breaks page of the 10 MB reason took 1.5 GB. Each answers now, its size bounded,
    the whole payload one click away (its raw download)."""
    from datasette.app import Datasette

    conn = sqlite3.connect(hostile_db)
    ids = dict(conn.execute("SELECT name, id FROM artifacts WHERE name IN ('deep_json', 'huge_json')").fetchall())
    compile_row = conn.execute("SELECT compile FROM artifacts WHERE name = 'deep_json'").fetchone()[0]
    other = conn.execute("SELECT id FROM artifacts WHERE name NOT IN ('deep_json', 'huge_json') LIMIT 1").fetchone()[0]
    conn.close()
    ds = Datasette([str(hostile_db)])
    await ds.invoke_startup()
    base = "/hostile/-/tlindex"
    sizes = {}
    for path in [f"/artifact/{ids['deep_json']}", f"/artifact/{ids['deep_json']}.json",
                 f"/artifact-diff?a={ids['deep_json']}&b={other}", f"/artifact-diff?a={ids['deep_json']}&b={ids['huge_json']}",
                 f"/artifact/{ids['huge_json']}", "/graph-breaks", "/graph-breaks.json", f"/compile/{compile_row}"]:
        response = await ds.client.get(base + path)
        assert response.status_code == 200, (path, response.text[:300])
        sizes[path] = len(response.content)
    assert sizes[f"/artifact/{ids['huge_json']}"] < 3 * (1 << 20)  # its first MiB, escaped
    assert "download>The whole payload</a>" in (await ds.client.get(f"{base}/artifact/{ids['huge_json']}")).text
    assert sizes["/graph-breaks"] < 200_000 and sizes["/graph-breaks.json"] < 100_000
    assert sizes[f"/compile/{compile_row}"] < 1 << 20  # the reason's first 20,000 characters, its row linked


# --- every route -----------------------------------------------------------------------------------

async def _crawl_all(db: Path, per_route: int | None):
    from datasette.app import Datasette

    ds = Datasette([str(db)])
    await ds.invoke_startup()
    conn = sqlite3.connect(db)
    try:
        return await crawl(ds.client, conn, db.stem, per_route)
    finally:
        conn.close()


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
@pytest.mark.asyncio
async def test_every_route_answers_odd_values_without_a_500(odd_sample):
    _, db = odd_sample
    result = await _crawl_all(db, per_route=15)
    assert not result.errors, result.errors[:5]
    assert set(result.reached) >= set(routes.BY_NAME), set(routes.BY_NAME) - set(result.reached)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("seed,keep_context", [(3, True), (4, False), (5, True), (6, False)])
async def test_every_page_of_every_fixture_answers_odd_values(tmp_path, seed, keep_context):
    _, db = odd_database(tmp_path, ALL_SCENARIOS, seed, keep_context)
    result = await _crawl_all(db, per_route=None)
    assert not result.errors, result.errors[:5]
    assert set(result.reached) >= set(routes.BY_NAME)


# --- every command ---------------------------------------------------------------------------------

def commands(group=cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the click registry, groups walked: ("ingest",), ("export", "parquet"), ..."""
    import click

    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += commands(command, prefix + (name,))
        else:
            found.append(prefix + (name,))
    return found


GATE = "compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0,autotune_time>0,cache_hits<-10%"
WRITE_SCRIPT = ("import os, shutil, sys; d = os.environ['TORCH_TRACE']; os.makedirs(d, exist_ok=True); "
                "[shutil.copy(p, d) for p in sys.argv[1:]]")


@dataclass
class Case:
    """What a recipe may use: the odd logs, a copy of their database, a scratch folder, the run ids."""

    logs: Path
    db: Path
    tmp: Path
    runs: list[str]

    @property
    def d(self) -> list[str]:
        return ["--db", str(self.db)]


def _queries(case: Case) -> list[list[str]]:
    from tlindex.answers.queries import load_queries

    found = []
    for name, query in load_queries().items():
        needs = ["-p", "run", case.runs[0]] if query.needs else []  # guards_diff asks for a compile or a run
        found += [[name, *case.d, *needs], [name, *case.d, "-t", *needs]]
        if "run" in dict(query.params):
            found.append([name, *case.d, "-p", "run", case.runs[0], "--csv"])
    return found


def _show_cases(c: Case) -> list[tuple[str, list[str]]]:
    """Every page with data to show, named from the odd database's first rows (from the page table)."""
    from tlindex import pages

    conn = sqlite3.connect(c.db)
    # each placeholder's declared sample, a run by its label (as users name it)
    first = {name: kind.sample for name, kind in pages.PLACEHOLDERS.items()} | {
        "run": "SELECT label FROM runs ORDER BY id"}
    # pages that take what they show from their arguments (`--arg`), not their path
    arguments = {"artifact_diff": [("a", "SELECT id FROM artifacts ORDER BY id"),
                                   ("b", "SELECT id FROM artifacts ORDER BY id DESC")]}
    cases = []
    for page in pages.PAGES:
        if page.json_twin:
            rows = [conn.execute(first[p]).fetchone() for p in page.placeholders if pages.PLACEHOLDERS[p].shown]
            given = [f"--arg={key}={row[0]}" for key, sql in arguments.get(page.name, [])
                     for row in [conn.execute(sql).fetchone()] if row]
            if all(rows):
                cases.append((page.name, [str(row[0]) for row in rows] + given))
    conn.close()
    return cases


# How each command of the registry runs on the odd database (or its logs): every argument list to try.
RECIPES: dict[tuple[str, ...], Callable[[Case], list[list[str]]]] = {
    ("ingest",): lambda c: [[str(c.logs), "--db", str(c.tmp / "again.db"), "--silent"]],
    ("query",): _queries,
    ("findings",): lambda c: [c.d, [*c.d, "--json"], *[[run, *c.d] for run in c.runs]],
    ("search",): lambda c: [["aten", *c.d], ["0", *c.d, "--json"]],
    ("diff",): lambda c: [[a, b, *c.d, "--graphs"] for a, b in zip(c.runs, c.runs[1:])]
    + [[c.runs[0], c.runs[-1], *c.d, "--json"]],
    ("report",): lambda c: [["-o", str(c.tmp / "report"), *c.d, "--silent", "-j", "1"]],
    ("trend",): lambda c: [c.d, [*c.d, "--json"], [*c.d, "--baseline", c.runs[0], "--fail-on", GATE],
                           [c.runs[-1], c.runs[0], *c.d, "--json", "--baseline", c.runs[-1], "--fail-on", GATE]],
    ("queries",): lambda c: [[]],
    ("export", "parquet"): lambda c: [[str(c.tmp / "parquet"), *c.d]],
    ("export", "chromium"): lambda c: [[str(c.tmp / f"trace-{run}.json"), *c.d, "--run", run] for run in c.runs],
    ("runs",): lambda c: [c.d, [*c.d, "--json"]],
    ("label",): lambda c: [[c.runs[0], "renamed", *c.d]],
    ("show",): lambda c: [[page, *names, *c.d, *json] for page, names in _show_cases(c) for json in ([], ["--json"])],
    ("token", "create"): lambda c: [["odd", *c.d]],
    ("token", "list"): lambda c: [c.d],
    ("token", "revoke"): lambda c: [["odd", *c.d]],
    ("rm",): lambda c: [[c.runs[-1], *c.d]],  # last: it removes a run
    ("run",): lambda c: [["--db", str(c.tmp / "run.db"), "--", sys.executable, "-c", WRITE_SCRIPT,
                          str(next(c.logs.rglob("*.log")))]],
}
# Commands not run here, and why.
NOT_RUN = {
    ("serve",): "starts a server: its pages are the crawl's",
    ("push",): "posts to a team's server (tests/test_team.py); the server ingests what it posts as ingest does",
    ("spark-ingest",): "starts Apache Spark (tests/test_spark.py); it reads the logs with the same normalizer",
    ("watch",): "runs until stopped: each pass is an ingest (the recipe above), its stop tests/test_stopped_commands.py's",
}


def test_every_command_has_a_recipe_or_a_reason():
    names = set(commands())
    assert names == set(RECIPES) | set(NOT_RUN), names ^ (set(RECIPES) | set(NOT_RUN))


# --- long values and deep nesting in every text and JSON field (issue 46) --------------------------------------------

STRETCHED = ("graph_breaks", "vllm_piecewise")


def stretched_database(tmp: Path, scenarios: tuple[str, ...], seed: int) -> tuple[Path, Path]:
    """The scenarios' logs with, in the first record of each kind, a 1 MB or 10 MB line in a text field or payload, or
    a JSON payload nested 200,000 levels (tests/odd_values.py stretch, HAND-MADE variants), and their database."""
    from odd_values import stretch

    logs = tmp / "logs"
    for scenario in scenarios:
        for log in sorted((DATA / scenario).glob("*.log")):
            (logs / scenario).mkdir(parents=True, exist_ok=True)
            stretch(log, logs / scenario / log.name, seed)
    db = tmp / "stretched.db"
    summary = ingest(db, [str(logs)], jobs=2)
    assert not summary.problems, summary.problems
    return logs, db


@pytest.fixture(scope="module")
def stretched_sample(tmp_path_factory) -> tuple[Path, Path]:
    return stretched_database(tmp_path_factory.mktemp("stretched"), STRETCHED, 1)


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
@pytest.mark.asyncio
async def test_every_route_answers_long_values_and_deep_nesting_without_a_500(stretched_sample):
    _, db = stretched_sample
    result = await _crawl_all(db, per_route=3)
    assert not result.errors, result.errors[:5]
    assert set(result.reached) >= set(routes.BY_NAME) - {"provenance"}  # (no provenance in these two scenarios)


@pytest.mark.slow  # a sweep: every command of the registry over 10 MB lines (~45 s); the crawl above runs by default
def test_every_command_runs_on_long_values_and_deep_nesting_without_a_traceback(stretched_sample, tmp_path):
    test_every_command_runs_on_odd_values_without_a_traceback(stretched_sample, tmp_path)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("seed", [2, 3])
async def test_every_page_of_the_sample_answers_long_values_and_deep_nesting(tmp_path, seed):
    _, db = stretched_database(tmp_path, SAMPLE, seed)
    result = await _crawl_all(db, per_route=None)
    assert not result.errors, result.errors[:5]


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_every_command_runs_on_odd_values_without_a_traceback(odd_sample, tmp_path):
    import shutil

    logs, source = odd_sample
    db = tmp_path / "odd.db"
    shutil.copy(source, db)
    conn = sqlite3.connect(db)
    case = Case(logs, db, tmp_path, [str(row[0]) for row in conn.execute("SELECT id FROM runs ORDER BY id")])
    conn.close()
    failures = []
    for command, recipe in RECIPES.items():
        for args in recipe(case):
            result = CliRunner().invoke(cli, [*command, *args])
            crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
            if crashed or "Traceback" in result.output or result.exit_code not in (0, 1):
                failures.append((command, args, result.exit_code, repr(result.exception), result.output[-500:]))
    assert not failures, failures[:3]
