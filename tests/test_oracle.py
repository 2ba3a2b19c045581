"""tlindex against an independent reading of the same logs (tests/oracle.py, which imports nothing of tlindex):
every run_health column and every graph-break group of every fixture run, and the runs themselves; and every
canned query that counts compiles or compile time, on the sample set and on the version matrix."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import oracle
import pytest
from conftest import DATA, scenario_dirs, torch_versions

from tlindex.answers.findings import findings
from tlindex.answers.health import METRICS, health
from tlindex.answers.queries import load_queries, run_sql
from tlindex.answers.top_breaks import top_graph_breaks

# Where tlindex and the oracle disagree by design: {column: the rule}. Empty today: on every fixture both
# readings agree on every column. A rule added here must say why tlindex's answer is the one to keep.
BY_DESIGN: dict[str, str] = {}
TIME_TOLERANCE = 0.0015  # both round to milliseconds; a sum of rounded parts may differ by one in the last place


def oracle_runs(versions: list[str | None] = (None,)) -> list[tuple[str, list[oracle.Process]]]:
    """The oracle's runs of the sample set (None), or of those versions of the version matrix."""
    return [(f"{version + '/' if version else ''}{d.name}", run) for version in versions
            for d in scenario_dirs(version) for run in oracle.runs_of(d)]


RUNS = oracle_runs()
MATRIX_RUNS = oracle_runs(torch_versions())


@pytest.fixture(scope="module")
def conn(fixtures_db):
    connection = sqlite3.connect(fixtures_db)
    yield connection
    connection.close()


def runs_by_files(conn) -> dict[frozenset, int]:
    """tlindex's run of each set of log files."""
    files: dict[int, set] = {}
    for run, path in conn.execute("SELECT s.run_id, f.path FROM sources s JOIN files f ON f.id = s.file_id"):
        files.setdefault(run, set()).add(Path(path).name)
    return {frozenset(names): run for run, names in files.items()}


@pytest.fixture(scope="module")
def run_of(conn) -> dict[frozenset, int]:
    return runs_by_files(conn)


@pytest.fixture(scope="module", params=["sample set", "version matrix"])
def corpus(request):
    """(name, connection, the oracle's runs, tlindex's run of each set of files) of the sample set, then of the
    version matrix (every torch version's logs: export contexts, warm starts)."""
    path = request.getfixturevalue("fixtures_db" if request.param == "sample set" else "versions_db")
    connection = sqlite3.connect(path)
    connection.row_factory = sqlite3.Row
    yield request.param, connection, RUNS if request.param == "sample set" else MATRIX_RUNS, runs_by_files(connection)
    connection.close()


def test_the_oracle_and_tlindex_split_the_logs_into_the_same_runs(run_of):
    found = {frozenset(p.path.name for p in run) for _, run in RUNS}
    assert found == set(run_of), "a run of one reading is not a run of the other"
    assert len(found) >= 30


def test_every_run_health_column_is_what_the_raw_log_says(corpus):
    _, conn, runs, run_of = corpus
    columns = [metric.column for metric in METRICS]
    rows = {row["run_id"]: row for row in health(conn)}
    checked = set()
    differences = []
    for scenario, run in runs:
        expected = oracle.health(run)
        assert set(expected) == set(columns), "the oracle computes every column of run_health, no other"
        row = rows[run_of[frozenset(p.path.name for p in run)]]
        for column in columns:
            mine, theirs = row[column], expected[column]
            same = mine == theirs or (isinstance(theirs, float) and mine is not None
                                      and abs(mine - theirs) <= TIME_TOLERANCE)
            if not same and column not in BY_DESIGN:
                differences.append(f"{scenario} run {row['run_id']} {column}: tlindex {mine}, log {theirs}")
            if theirs:
                checked.add(column)
    assert not differences, "\n".join(differences)
    # every column is non-zero somewhere, so a column the fixtures never exercise cannot pass unseen
    assert checked >= set(columns) - {"autotune_time_s", "cache_bypasses"}


def test_every_graph_break_group_is_what_the_raw_log_says(conn, run_of):
    groups = 0
    for scenario, run in RUNS:
        expected = oracle.break_groups(run)
        found = {(g["gb"] or "", g["title"] or "", g["location"] or ""): g["breaks"]
                 for g in top_graph_breaks(conn, run_of[frozenset(p.path.name for p in run)], limit=10_000)}
        assert found == expected, scenario
        groups += len(found)
    assert groups >= 15


def test_the_graph_break_finding_names_the_costliest_group_of_the_raw_log(conn, run_of):
    """The finding's costliest group is the oracle's: the most compile time its restarts threw away, then the most
    breaks; its place and its count."""
    seen = 0
    for scenario, run in RUNS:
        expected = oracle.break_groups(run)
        if not expected:
            continue
        texts = [f.text for f in findings(conn, run_of[frozenset(p.path.name for p in run)])
                 if f.kind == "graph_breaks"]
        assert len(texts) == 1, scenario
        costs = oracle.break_costs(run)
        rank = {group: (round(costs.get(group, 0.0), 3), count) for group, count in expected.items()}
        top = max(rank.values())
        leaders = [(group[2], expected[group]) for group, value in rank.items() if value == top]
        assert any(f"{Path(place.rpartition(':')[0]).name}:{place.rpartition(':')[2]}" in texts[0]
                   and f"×{count}" in texts[0] for place, count in leaders), (scenario, texts[0], leaders)
        seen += 1
    assert seen >= 9


def test_a_restart_logged_without_its_reason_is_counted_from_the_attempts(tmp_path):
    """torch's failure path (a restarted analysis that then failed) logs attempt 0 and attempt 1 but an empty
    restart_reasons. Made at test time from the real vllm_restart log, whose 0/1 restarted once, by emptying the
    reasons of its compilation_metrics record (a hand-made change, said here): both readings still count 1."""
    from conftest import ingest

    from tlindex.answers.health import run_health
    from tlindex.answers.queries import load_queries, run_sql

    (source,) = sorted((DATA / "vllm_restart").glob("*.log"))
    reason = "\"restart_reasons\": [\"<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>\"]"
    text = source.read_text()
    assert text.count(reason) == 1
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / source.name).write_text(text.replace(reason, '"restart_reasons": []'))
    (run,) = oracle.runs_of(logs)
    assert oracle.health(run)["restarts"] == 1
    ingest(tmp_path / "t.db", [str(logs)], jobs=1)
    conn = sqlite3.connect(tmp_path / "t.db")
    assert run_health(conn, 1)["restarts"] == 1
    listed = run_sql(conn, load_queries()["failures"].sql, {"run": "1", "rank": ""}).fetchall()
    assert [row[:3] for row in listed] == [("restart", "RestartAnalysis", "no reason logged (2 attempts)")]
    conn.close()


def test_every_compile_id_some_ranks_lack_is_named_and_carried_whole(conn, run_of):
    seen = 0
    for scenario, run in RUNS:
        expected = oracle.ids_not_on_every_rank(run)
        if len({p.rank for p in run} - {None}) < 2:
            continue
        found = [f for f in findings(conn, run_of[frozenset(p.path.name for p in run)])
                 if f.kind == "divergence:missing_compile"]
        if not expected:
            assert not found, scenario
            continue
        (finding,) = found
        assert {item["compile_id"] for item in finding.items} == set(expected), scenario
        assert finding.count == len(expected)
        for cid in expected:  # few: every one in the sentence
            assert f"[{cid}]" in finding.text, (scenario, cid, finding.text)
        seen += 1
    assert seen >= 2


# What a canned query's column sums to over its rows of one run, by the column's name: the oracle's answer for the
# run. A column of one of these names that means something else is in OTHER_MEANING, with what it means.
SUMS = {
    "compiles": lambda h, times: h["compiles"],
    "recompiles": lambda h, times: h["recompiles"],
    "compile_time_s": lambda h, times: h["compile_time_s"],
    "total_s": lambda h, times: h["compile_time_s"],
    "frames_s": lambda h, times: oracle._total(t["frames_s"] for t in times),
    "backward_s": lambda h, times: h["backward_time_s"],
    "backward_time_s": lambda h, times: h["backward_time_s"],
}
OTHER_MEANING = {
    ("vllm_pieces", "compile_time_s"): "a piece compile's Inductor spans, a part of its Dynamo compile's time",
    ("recompile_reasons", "compiles"): "the compiles of the function a guard failed in, on each of its rows",
    ("recompile_reasons", "recompiles"): "the recompiles a guard caused",
}
COUNTS = ("compiles", "recompiles")


def query_sums(conn, run_id: int) -> dict[tuple[str, str], tuple[float, int]]:
    """(canned query, column of SUMS) -> (its sum over the query's rows of the run, the rows), for every canned query
    asked of the run (no other parameter, every row)."""
    found = {}
    for name, query in sorted(load_queries().items()):
        params = {p: str(run_id) if p == "run" else "100000" if p == "limit" else "" for p, _ in query.params}
        if query.needs and "run" not in query.needs:
            continue
        cursor = run_sql(conn, query.sql, params)
        columns = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
        for column in set(columns) & set(SUMS):
            if (name, column) not in OTHER_MEANING:
                at = columns.index(column)
                found[(name, column)] = (sum(row[at] or 0 for row in rows), len(rows))
    return found


def test_every_canned_query_counts_compiles_and_compile_time_as_the_raw_log_does(corpus):
    """The sweep over every canned query (the registry of queries/): each column that counts compiles or their time,
    summed over its rows of a run, is the oracle's count of the raw log (per rank, per compile: the same sum)."""
    name, conn, runs, run_of = corpus
    differences, checked = [], set()
    for scenario, run in runs:
        run_id = run_of[frozenset(p.path.name for p in run)]
        expected, times = oracle.health(run), oracle.compile_times(run)
        for (query, column), (mine, rows) in query_sums(conn, run_id).items():
            theirs = SUMS[column](expected, times) or 0
            tolerance = 0 if column in COUNTS else TIME_TOLERANCE + 0.0005 * rows  # each row rounded to 1 ms
            if abs(mine - theirs) > tolerance:
                differences.append(f"{scenario} run {run_id}: {query}.{column} sums to {mine}, the log says {theirs}")
            checked.add((query, column))
    assert not differences, "\n".join(differences)
    assert checked >= {("run_health", "compiles"), ("run_health", "recompiles"), ("run_health", "compile_time_s"),
                       ("run_health", "backward_time_s"), ("compile_time_totals", "compiles"),
                       ("compile_time_totals", "total_s"), ("compile_time_totals", "frames_s"),
                       ("compile_time_totals", "backward_s"), ("compile_time", "total_s"),
                       ("compile_time", "frames_s"), ("compile_time", "backward_s")}, name


def _timed(compile: dict) -> tuple:
    return (compile["rank"] if compile["rank"] is not None else -1, compile["compile_id"],
            round(compile["total_s"] or 0, 3))


def test_compile_time_lists_every_compile_of_the_raw_log_with_its_time(corpus):
    """compile_time's rows are the log's compiles (not [-/-], not an export's compile context), each with the time
    the log gives it; compile_time_totals' rows are their sums per rank."""
    _, conn, runs, run_of = corpus
    query, totals = load_queries()["compile_time"].sql, load_queries()["compile_time_totals"].sql
    warm = 0
    for scenario, run in runs:
        run_id = run_of[frozenset(p.path.name for p in run)]
        expected = oracle.compile_times(run)
        found = [dict(row) for row in run_sql(conn, query, {"run": str(run_id), "rank": "", "limit": "100000"})]
        assert sorted(map(_timed, found)) == sorted(map(_timed, expected)), scenario
        per_rank = {row["rank"]: row for row in run_sql(conn, totals, {"run": str(run_id)})}
        assert set(per_rank) == {t["rank"] for t in expected}, scenario
        for rank, row in per_rank.items():
            mine = [t for t in expected if t["rank"] == rank]
            assert row["compiles"] == len(mine), (scenario, rank)
            assert abs((row["total_s"] or 0) - sum(t["total_s"] or 0 for t in mine)) <= TIME_TOLERANCE, (scenario, rank)
        warm += sum(t["total_s"] is not None and not any(
            c.metrics for p in run for c in p.compiles if c.counted and oracle.compile_id(c) == t["compile_id"])
            for t in expected)
    assert warm or runs is RUNS  # the matrix's warm starts (no metrics) are timed by their spans
