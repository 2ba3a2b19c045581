"""The CI gate: `--fail-on` bounds on compile health, alone or against a baseline (`tlindex trend`, `tlindex run`)."""

from __future__ import annotations

import math
import sys

import pytest
from click.testing import CliRunner
from conftest import DATA, connect
from test_trend import SERIES, raw_health

from tlindex.answers.gate import GateError, judge, parse_fail_on
from tlindex.answers.health import METRICS, health, select_runs
from tlindex.answers.trend import mark_torch_changes
from tlindex.cli import cli

FAIL_ON = "compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0"


# --- the grammar -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,metric,op,kind,bound", [
    ("compile_time>+20%", "compile_time_s", ">", "relative", 20.0),
    ("recompiles>+0", "recompiles", ">", "delta", 0.0),
    ("failures>0", "failures", ">", "absolute", 0.0),
    ("cache_hits<-10%", "cache_hits", "<", "relative", -10.0),
    ("compile_time_s >= +2.5", "compile_time_s", ">=", "delta", 2.5),
    (" graph_breaks <= 3 ", "graph_breaks", "<=", "absolute", 3.0),
    ("backward_time<-.5", "backward_time_s", "<", "delta", -0.5),
])
def test_a_clause_reads_metric_op_bound(text, metric, op, kind, bound):
    (clause,) = parse_fail_on(text)
    assert (clause.metric.column, clause.op, clause.kind, clause.bound) == (metric, op, kind, bound)
    assert clause.needs_baseline == (kind != "absolute")


def test_clauses_are_comma_separated():
    assert [c.text for c in parse_fail_on(FAIL_ON)] == FAIL_ON.split(",")


@pytest.mark.parametrize("spec,said", [
    ("compile_time>>20%", "'compile_time>>20%' is not METRIC OP BOUND"),
    ("recompiles=+0", "'recompiles=+0' is not METRIC OP BOUND"),
    ("compile_tim>+20%", "no metric 'compile_tim'"),
    ("compile_time>20%", "a percentage is a change against the baseline"),
    ("failures>0,graph_breaks>x", "'graph_breaks>x' is not METRIC OP BOUND"),
    (" , ", "no clause given"),
])
def test_a_malformed_clause_is_named_with_the_metrics_that_exist(spec, said):
    with pytest.raises(GateError) as error:
        parse_fail_on(spec)
    assert said in str(error.value)
    if "percentage" not in said:  # the metric was right: the bound is what to fix
        assert all(metric.name in str(error.value) for metric in METRICS)


def _verdicts(spec: str, value: float | None, base: float | None):
    clauses = parse_fail_on(spec)
    column = clauses[0].metric.column
    return [(v.crossed, v.change) for v in judge(clauses, {column: value}, {column: base})]


def test_relative_delta_and_absolute_bounds():
    assert _verdicts("compile_time>+20%", 12.5, 10.0) == [(True, 25.0)]
    assert _verdicts("compile_time>+20%", 11.5, 10.0) == [(False, 15.0)]
    assert _verdicts("cache_hits<-10%", 8, 10) == [(True, -20.0)]
    assert _verdicts("cache_hits<-10%", 10, 10) == [(False, 0.0)]
    assert _verdicts("recompiles>+0", 3, 1) == [(True, 2)]
    assert _verdicts("recompiles>+0", 1, 1) == [(False, 0)]
    assert _verdicts("recompiles>+2", 3, 1) == [(False, 2)]
    assert _verdicts("failures>0", 1, 5) == [(True, 1)]
    assert _verdicts("failures>0", 0, None) == [(False, 0)]  # absolute: no baseline needed
    assert _verdicts("guards>=+5", 15, 10) == [(True, 5)]


def test_from_zero_any_rise_is_an_infinite_percentage_and_what_is_not_logged_is_not_judged():
    assert _verdicts("graph_breaks>+50%", 1, 0) == [(True, math.inf)]
    assert _verdicts("graph_breaks>+50%", 0, 0) == [(False, 0.0)]
    ((crossed, change),) = _verdicts("autotune_time>+20%", None, 1.0)
    assert crossed is None and change is None
    ((crossed, _),) = _verdicts("backward_time>+20%", 1.0, None)
    assert crossed is None
    ((crossed, _),) = _verdicts("compile_time>+20%", math.inf, 1.0)
    assert crossed is None


# --- on the series: the newest day against an earlier one -------------------------------------------

def series(fixtures_db) -> list[dict]:
    conn = connect(fixtures_db)
    return mark_torch_changes(health(conn, select_runs(conn, label="series@")))


def test_the_newest_day_crosses_the_bounds_its_log_says_it_does(fixtures_db):
    """Day 3 against day 1: compile time, recompiles and graph breaks rose (counted from the two raw logs),
    nothing failed; exit 1 naming each crossed metric, and the compiles that changed most as the diff ranks them."""
    from tlindex.answers.diff import diff

    days = series(fixtures_db)
    base, newest = raw_health(SERIES[_day(fixtures_db, days[1])]), raw_health(SERIES[_day(fixtures_db, days[3])])
    expected = {"compile_time": newest["compile_time_s"] > 1.2 * base["compile_time_s"],
                "recompiles": newest["recompiles"] > base["recompiles"],
                "graph_breaks": newest["graph_breaks"] > base["graph_breaks"], "failures": newest["failures"] > 0}
    assert expected == {"compile_time": True, "recompiles": True, "graph_breaks": True, "failures": False}
    result = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@",
                                      "--baseline", str(days[1]["run_id"]), "--fail-on", FAIL_ON])
    assert result.exit_code == 1, result.output
    gate = result.output[result.output.index("gate: "):].splitlines()
    assert "3 bounds crossed (compile_time, recompiles, graph_breaks)" in gate[0]
    assert f"run {days[3]['run_id']}" in gate[0] and f"baseline run {days[1]['run_id']}" in gate[0]
    for clause in FAIL_ON.split(","):
        (line,) = [line for line in gate if line.strip().split(": ")[1:2] == [clause]]
        assert line.strip().startswith("CROSSED" if expected[clause.split(">")[0]] else "ok")
    assert f"recompiles {newest['recompiles']}, baseline {base['recompiles']}" in result.output
    changed = [e for e in diff(connect(fixtures_db), str(days[1]["run_id"]), str(days[3]["run_id"]))["compiles"]
               if e["changes"] or not (e["a"] and e["b"])][:5]
    header = gate.index(f"compiles that changed most (tlindex diff {days[1]['run_id']} {days[3]['run_id']}):")
    named = [line for line in gate[header + 1:] if line.startswith("  [")]
    assert [line.split("]")[0].strip() + "]" for line in named] == [f"[{(e['b'] or e['a'])['compile_id']}]" for e in changed]


def _day(fixtures_db, row: dict) -> int:
    """Which log of the series a run was read from."""
    conn = connect(fixtures_db)
    (name,) = conn.execute("SELECT f.name FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = ?",
                           (row["run_id"],)).fetchone()
    return [log.name for log in SERIES].index(name)


def test_nothing_crossed_exits_0(fixtures_db):
    """(The four days arrived in one ingest: the day judged is named.)"""
    days = series(fixtures_db)
    for args in (["--baseline", str(days[3]["run_id"]), "--fail-on", FAIL_ON, "--allow-unjudged"],  # itself, allowed
                 ["--run", str(days[3]["run_id"]), "--fail-on", "failures>0"]):
        result = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@", *args])
        assert result.exit_code == 0, result.output
        assert "no bound crossed" in result.output


def test_a_run_judged_against_itself_fails_unless_allowed(fixtures_db):
    """Reproduction: the run ingested last was the baseline, and the gate said "no bound crossed", exit 0."""
    days = series(fixtures_db)
    result = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@", "--baseline",
                                      str(days[3]["run_id"]), "--fail-on", FAIL_ON])
    assert result.exit_code == 1, result.output
    assert f"NOT JUDGED: run {days[3]['run_id']} is the baseline itself" in result.output
    assert "(ingested last)" in result.output and "FAILED" in result.output


def test_with_json_stdout_stays_one_document(fixtures_db):
    import json

    days = series(fixtures_db)
    result = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@", "--json",
                                                      "--baseline", str(days[0]["run_id"]), "--fail-on", FAIL_ON])
    assert result.exit_code == 1
    assert json.loads(result.stdout) == days and "gate: " in result.stderr


def test_a_bound_against_a_baseline_needs_one_and_a_malformed_one_is_a_usage_error(fixtures_db):
    missing = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--fail-on", FAIL_ON])
    assert missing.exit_code == 2 and "give --baseline RUN" in missing.output and "compile_time>+20%" in missing.output
    bad = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--baseline", "1", "--fail-on", "speed>+1"])
    assert bad.exit_code == 2 and "no metric 'speed'" in bad.output and "compile_time" in bad.output
    none = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "nope", "--fail-on", "failures>0"])
    assert none.exit_code == 1 and "no run to judge" in none.output


# --- tlindex run --baseline RUN --fail-on ... ------------------------------------------------------

WRITE = ("import os, shutil, sys; d = os.environ['TORCH_TRACE']; os.makedirs(d, exist_ok=True); "
         "[shutil.copy(p, d) for p in sys.argv[2:]]; sys.exit(int(sys.argv[1]))")


@pytest.fixture
def day0_db(tmp_path):
    from conftest import ingest

    db = tmp_path / "t.db"
    ingest(db, [str(SERIES[_first_day()])], run_label="day 0", jobs=1)
    return db


def _first_day() -> int:
    """The series' first day: its log is the one with one compile."""
    return next(i for i, log in enumerate(SERIES) if raw_health(log)["compiles"] == 1)


def _run(db, code: int, logs: list, fail_on: str = FAIL_ON):
    return CliRunner().invoke(cli, ["run", "--db", str(db), "--baseline", "day 0", "--fail-on", fail_on, "--",
                                    sys.executable, "-c", WRITE, str(code), *map(str, logs)])


def test_run_exits_with_the_command_code_else_the_gate(day0_db):
    """COMMAND's exit code when it is not 0; else 1 when a bound is crossed (a later day, with graph breaks), 0
    when none is (the first day again), 1 when COMMAND wrote nothing to judge."""
    later = max(SERIES, key=lambda log: raw_health(log)["graph_breaks"])
    crossed = _run(day0_db, 0, [later])
    assert crossed.exit_code == 1, crossed.output
    assert "CROSSED: graph_breaks>+0" in crossed.output and "compiles that changed most" in crossed.output
    assert _run(day0_db, 3, [later]).exit_code == 3
    same = _run(day0_db, 0, [SERIES[_first_day()]], fail_on="recompiles>+0,graph_breaks>+0,failures>0")
    assert same.exit_code == 0 and "no bound crossed" in same.output and "(just made)" in same.output
    nothing = _run(day0_db, 0, [])
    assert nothing.exit_code == 1 and "gate: no run to judge" in nothing.output


def test_run_refuses_a_baseline_it_cannot_find_before_the_command_runs(tmp_path, day0_db):
    marker = tmp_path / "ran"
    for db, said in ((day0_db, "no run matches 'nope'"), (tmp_path / "new.db", "does not exist yet")):
        result = CliRunner().invoke(cli, ["run", "--db", str(db), "--baseline", "nope", "--fail-on", "failures>0",
                                          "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
        assert result.exit_code == 1 and said in result.output and not marker.exists()
    assert DATA.is_dir()
