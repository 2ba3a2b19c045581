"""The CI gate fails closed: generated from the gate's metrics (tlindex.answers.health.METRICS).

For each metric, a run worse than the baseline (two real logs of tests/data whose values differ) fails the gate,
whichever of the two was ingested first and whatever the worse log's clock says: the gate judges the run named,
else the run ingested last, never the newest by log time. To simulate a clock behind (another time zone, a machine
whose clock is late; glog lines carry no year or zone), a test rewrites the glog timestamps of a COPY of a real log
to an earlier day; nothing else of the log changes. A metric no log of tests/data ever differs on (autotuning on
CPU) cannot be judged, which fails too; one they all log alike (no cache bypass) is skipped and counted. A log
cut off before any compile finished is nothing to judge: a failure.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, ingest

from tlindex.answers.health import METRICS, health
from tlindex.cli import cli

GLOG_TIME = re.compile(rb"^([VIWEF])(\d{4}) ", re.M)
ORDERS = ("baseline first", "worse first")
CLOCKS = ("as logged", "worse clock behind")


def single_process_runs(fixtures_db) -> dict[Path, dict]:
    """The logs of tests/data that are a run alone (one process), with that run's health."""
    conn = connect(fixtures_db)
    rows = conn.execute("""SELECT s.run_id, f.path FROM sources s JOIN files f ON f.id = s.file_id
                           WHERE s.run_id IN (SELECT run_id FROM sources GROUP BY run_id HAVING count(*) = 1)
                           ORDER BY f.path""").fetchall()
    by_run = {row["run_id"]: row for row in health(conn, [run for run, _ in rows])}
    return {Path(path): by_run[run] for run, path in rows if Path(path).is_relative_to(DATA)}


def pair_for(metric, logs: dict[Path, dict]) -> tuple[Path, Path] | None:
    """(baseline log, worse log): the worse one's value is higher (the clause is `metric>+0`); None when no two
    logs differ on the metric."""
    column = metric.column
    valued = [(path, row[column]) for path, row in logs.items() if row[column] is not None]
    for base, low in valued:
        for worse, high in valued:
            if high > low:
                return base, worse
    return None


def clock_behind(log: Path, folder: Path) -> Path:
    """A copy of a real log whose glog times are on January 1st (its real day is later in the year)."""
    copy = folder / log.name
    copy.write_bytes(GLOG_TIME.sub(rb"\g<1>0101 ", log.read_bytes()))
    return copy


def make_db(folder: Path, base: Path, worse: Path, order: str, clock: str) -> Path:
    """A database of the two logs, ingested in `order`, each as a run of its own ('baseline', 'worse')."""
    folder.mkdir(parents=True)
    (folder / "b").mkdir()
    (folder / "w").mkdir()
    base_copy = folder / "b" / base.name
    shutil.copy(base, base_copy)
    worse_copy = clock_behind(worse, folder / "w") if clock != "as logged" else folder / "w" / worse.name
    if clock == "as logged":
        shutil.copy(worse, worse_copy)
    db = folder / "t.db"
    steps = [(base_copy, "baseline"), (worse_copy, "worse")]
    for log, label in steps if order == "baseline first" else steps[::-1]:
        assert not ingest(db, [str(log)], run_label=label, jobs=1).problems
    return db


@pytest.fixture(scope="module")
def databases(fixtures_db, tmp_path_factory):
    """Each metric's database per order and clock, made once per pair of logs."""
    logs = single_process_runs(fixtures_db)
    made: dict[tuple, Path] = {}

    def get(metric, order: str, clock: str) -> tuple[Path, bool]:
        pair = pair_for(metric, logs)
        judged = pair is not None
        if pair is None and any(row[metric.column] is not None for row in logs.values()):
            pytest.skip(f"no two logs of tests/data differ on {metric.name} (counted by the test below)")
        if pair is None:  # no log has it: any two, and the metric cannot be judged
            pair = tuple(sorted(logs)[:2])
        key = (*pair, order, clock)
        if key not in made:
            made[key] = make_db(tmp_path_factory.mktemp("gate") / "db", *pair, order, clock)
        return made[key], judged
    return get


def trend(db: Path, *args: str):
    return CliRunner().invoke(cli, ["trend", "--db", str(db), *args])


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("metric", METRICS, ids=[metric.name for metric in METRICS])
def test_a_run_worse_than_the_baseline_fails_in_any_order_and_with_any_clock(databases, metric, order, clock):
    db, judged = databases(metric, order, clock)
    clause = f"{metric.name}>+0"
    conn = connect(db)
    ids = {label: run for run, label in conn.execute("SELECT id, label FROM runs")}
    conn.close()
    named = trend(db, "--baseline", "baseline", "--run", "worse", "--fail-on", clause)
    last = trend(db, "--baseline", "baseline", "--fail-on", clause)  # judges the run ingested last
    assert named.exit_code == 1 and last.exit_code == 1, (named.output, last.output)
    verdict = f"CROSSED: {clause}" if judged else f"NOT JUDGED: {clause}"
    assert verdict in named.output and f"gate: run {ids['worse']} worse (named)" in named.output
    if order == "baseline first":
        assert f"gate: run {ids['worse']} worse (ingested last)" in last.output and verdict in last.output
    else:  # the baseline was ingested last: judged against itself, which fails
        assert f"NOT JUDGED: run {ids['baseline']} is the baseline itself" in last.output
    allowed = trend(db, "--baseline", "baseline", "--run", "worse", "--fail-on", clause, "--allow-unjudged")
    assert allowed.exit_code == int(judged), allowed.output  # what cannot be judged passes only when allowed


def test_the_metrics_judged_here_are_most_of_them(fixtures_db):
    """The generated cases are not vacuous: tests/data has two logs that differ on nearly every metric."""
    logs = single_process_runs(fixtures_db)
    unjudged = [metric.name for metric in METRICS if pair_for(metric, logs) is None]
    assert len(unjudged) <= 3, unjudged


def cut_mid_compile(log: Path, folder: Path) -> Path:
    """A copy of a real log cut before its first compilation_metrics record: no compile finished."""
    data = log.read_bytes()
    copy = folder / log.name
    copy.write_bytes(data[:data.index(b'{"compilation_metrics"')].rsplit(b"\n", 1)[0] + b"\n")
    return copy


def test_a_run_that_finished_no_compile_fails_through_trend_and_run(tmp_path):
    """Reproduction: a log stopping mid-compile passed (`compile_time` not judged, `graph_breaks +0`, exit 0)."""
    logs = sorted((DATA / "series").glob("*.log"))
    db = tmp_path / "t.db"
    ingest(db, [str(logs[0])], run_label="baseline", jobs=1)
    (tmp_path / "cut").mkdir()
    cut = cut_mid_compile(logs[1], tmp_path / "cut")
    ingest(db, [str(cut)], run_label="cut", jobs=1)
    result = trend(db, "--baseline", "baseline", "--fail-on", "compile_time>+20%,graph_breaks>+0")
    assert result.exit_code == 1, result.output
    assert "finished no compile" in result.output and "(ingested last)" in result.output
    write = ("import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['TORCH_TRACE'])")
    ran = CliRunner().invoke(cli, ["run", "--db", str(db), "--baseline", "baseline", "--fail-on", "graph_breaks>+0",
                                   "--", sys.executable, "-c", write, str(cut)])
    assert ran.exit_code == 1 and "finished no compile" in ran.output and "(just made)" in ran.output, ran.output
    allowed = CliRunner().invoke(cli, ["run", "--db", str(db), "--baseline", "baseline", "--fail-on", "graph_breaks>+0",
                                       "--allow-unjudged", "--", sys.executable, "-c", write, str(cut)])
    assert allowed.exit_code == 0 and "allowed by --allow-unjudged" in allowed.output, allowed.output


def test_run_judges_the_run_it_made_whatever_its_clock(tmp_path):
    """`tlindex run --baseline`: the run just made is judged even when its log's clock is behind the baseline's."""
    logs = sorted((DATA / "series").glob("*.log"), key=lambda log: log.read_bytes().count(b"dynamo_graph_break_reason"))
    db = tmp_path / "t.db"
    ingest(db, [str(logs[0])], run_label="baseline", jobs=1)
    (tmp_path / "late").mkdir()
    late = clock_behind(logs[-1], tmp_path / "late")
    write = "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['TORCH_TRACE'])"
    ran = CliRunner().invoke(cli, ["run", "--db", str(db), "--baseline", "baseline", "--fail-on", "graph_breaks>+0",
                                   "--", sys.executable, "-c", write, str(late)])
    assert ran.exit_code == 1 and "CROSSED: graph_breaks>+0" in ran.output and "(just made)" in ran.output, ran.output
