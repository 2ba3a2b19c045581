"""The CI gate fails closed: generated from the gate's metrics (tlindex.answers.health.METRICS).

For each metric, a run worse than the baseline (two real logs of tests/data whose values differ) fails the gate,
whichever of the two was ingested first and whatever the worse log's clock says: the gate judges the run named,
else the run ingested last, never the newest by log time. To simulate a clock behind (another time zone, a machine
whose clock is late; glog lines carry no year or zone), a test rewrites the glog timestamps of a COPY of a real log
to an earlier day; nothing else of the log changes. A metric no log of tests/data ever differs on (autotuning on
CPU) cannot be judged, which fails too; one they all log alike (no cache bypass) is skipped and counted. A log
cut off before any compile finished is nothing to judge: a failure.

The gate judges only complete runs (issue 62): the logs cut off mid-compile (at 30, 50, 70, 90 and 97 % of a real
log's bytes, at a line boundary; a warm start's before its guards) and the log with a damaged payload below are
HAND-MADE from real logs of tests/data by the tests, not logs torch wrote.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, VERSIONS, connect, ingest

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


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
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


# --- the gate judges only complete runs (issue 62, point 3) ----------------------------------------------------------

RISE_BOUNDS = "compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0"  # a cut log is "better" on every one
CUT_AT = (30, 50, 70, 90, 97)
WHOLE = next((DATA / "graph_breaks").glob("*.log"))  # 12 compiles: each cut below falls inside one


def cut_at(log: Path, percent: int, folder: Path) -> Path:
    """HAND-MADE from a real log: a copy of it cut at `percent` % of its bytes, at the line boundary before (the
    last line whole, as a log whose writer was killed mid-compile reads); asserted to stop inside a compile."""
    data = log.read_bytes()
    cut = data[:len(data) * percent // 100].rsplit(b"\n", 1)[0] + b"\n"
    assert cut.count(b'{"dynamo_start"') > cut.count(b'{"compilation_metrics"'), "the cut must fall inside a compile"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / log.name
    copy.write_bytes(cut)
    return copy


def copy_into(log: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(log, folder / log.name))


@pytest.fixture(scope="module")
def whole_baseline(tmp_path_factory) -> Path:
    """A database whose one run, labelled baseline, is the whole real log that the cut ones are cut from."""
    folder = tmp_path_factory.mktemp("whole")
    db = folder / "t.db"
    assert not ingest(db, [str(copy_into(WHOLE, folder / "whole"))], run_label="baseline", jobs=1).problems
    return db


def write_with(log: Path) -> list[str]:
    """A COMMAND for `tlindex run` that writes `log` into its TORCH_TRACE folder."""
    return [sys.executable, "-c", "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['TORCH_TRACE'])",
            str(log)]


@pytest.mark.parametrize("percent", CUT_AT)
def test_a_log_cut_off_mid_compile_is_not_judged_through_trend_and_run(whole_baseline, tmp_path, percent):
    """Reproduction: a log cut off mid-compile passed every rise bound (fewer compiles, less compile time), exit 0,
    through `trend` and through `tlindex run --baseline`."""
    db = tmp_path / "t.db"
    shutil.copy(whole_baseline, db)
    cut = cut_at(WHOLE, percent, tmp_path / "cut")
    assert not ingest(db, [str(cut)], run_label="cut", jobs=1).problems
    result = trend(db, "--baseline", "baseline", "--fail-on", RISE_BOUNDS)
    assert result.exit_code == 1, result.output
    assert "(ingested last)" in result.output and "compile cut off" in result.output, result.output
    assert re.search(r"NOT JUDGED: run \d+ is incomplete: 1 compile cut off \(\[\d+/\d+\] began and never ended",
                     result.output), result.output
    allowed = trend(db, "--baseline", "baseline", "--fail-on", RISE_BOUNDS, "--allow-unjudged")
    assert allowed.exit_code == 0 and "allowed by --allow-unjudged" in allowed.output, allowed.output
    ran = CliRunner().invoke(cli, ["run", "--db", str(db), "--baseline", "baseline", "--fail-on", RISE_BOUNDS, "--",
                                   *write_with(cut)])
    assert ran.exit_code == 1 and "(just made)" in ran.output and "compile cut off" in ran.output, ran.output


def test_a_baseline_cut_off_mid_compile_is_not_judged_against(whole_baseline, tmp_path):
    """A cut-off baseline makes any run look worse (or better): the comparison is not judged either."""
    db = tmp_path / "t.db"
    cut = cut_at(WHOLE, 50, tmp_path / "cut")
    ingest(db, [str(cut)], run_label="baseline", jobs=1)
    ingest(db, [str(copy_into(WHOLE, tmp_path / "whole"))], run_label="whole", jobs=1)
    result = trend(db, "--baseline", "baseline", "--fail-on", "compile_time<-90%")
    assert result.exit_code == 1 and "NOT JUDGED: baseline run 1 is incomplete: 1 compile cut off" in result.output, \
        result.output


WARM = VERSIONS / "2.15.0" / "mega_cache_warm"


def test_a_warm_start_is_judged_and_the_same_warm_log_cut_off_is_not(tmp_path):
    """A warm start from torch's mega-cache logs no compilation_metrics: whole, its compile ended (it loaded its guards
    from the cache, its whole-frame span ended) and the gate judges it against the cold run; a copy of it cut off
    (HAND-MADE: at the line boundary before its guards are built, the records of a warm start that died loading) is
    not judged."""
    cold, warm = sorted(WARM.glob("*.log"), key=lambda log: b'"compilation_metrics"' not in log.read_bytes())
    db = tmp_path / "t.db"
    ingest(db, [str(copy_into(cold, tmp_path / "cold"))], run_label="cold", jobs=1)
    ingest(db, [str(copy_into(warm, tmp_path / "warm"))], run_label="warm", jobs=1)
    judged = trend(db, "--baseline", "cold", "--fail-on", "compile_time>+20%,failures>0")
    assert judged.exit_code == 0 and "NOT JUDGED" not in judged.output, judged.output
    data = warm.read_bytes()
    cut = data[:data.index(b'{"dynamo_cpp_guards_str"')].rsplit(b"\n", 1)[0] + b"\n"
    assert b'"dynamo_start"' in cut  # it began
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / warm.name).write_bytes(cut)
    ingest(db, [str(tmp_path / "cut")], run_label="warm cut", jobs=1)
    result = trend(db, "--baseline", "cold", "--fail-on", "compile_time>+20%,failures>0")
    assert result.exit_code == 1 and re.search(r"NOT JUDGED: run \d+ is incomplete: 1 compile cut off", result.output), \
        result.output


def test_a_run_with_ingest_errors_in_its_logs_is_not_judged(whole_baseline, tmp_path):
    """HAND-MADE from a real log: one payload line changed, so its md5 no longer matches (an ingest error)."""
    db = tmp_path / "t.db"
    shutil.copy(whole_baseline, db)
    lines = WHOLE.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(b"\t") and i > 10)
    lines[at] = lines[at][:-1] + b" tampered\n"
    damaged = tmp_path / "damaged" / WHOLE.name
    damaged.parent.mkdir()
    damaged.write_bytes(b"".join(lines))
    ingest(db, [str(damaged)], run_label="damaged", jobs=1)
    result = trend(db, "--baseline", "baseline", "--fail-on", RISE_BOUNDS)
    assert result.exit_code == 1, result.output
    assert re.search(r"NOT JUDGED: run \d+ is incomplete: 1 ingest error in its logs \(md5_mismatch ×1",
                     result.output), result.output


def test_a_run_with_fewer_ranks_or_another_world_size_than_its_baseline_is_not_judged(tmp_path):
    """Reproduction: a 2-rank baseline against a run where one rank wrote nothing (its file is not there) passed."""
    two = sorted((DATA / "ddp_2ranks").glob("*.log"))
    db = tmp_path / "t.db"
    ingest(db, [str(copy_into(log, tmp_path / "both")) for log in two], run_label="baseline", jobs=1)
    ingest(db, [str(copy_into(two[0], tmp_path / "one"))], run_label="one rank", jobs=1)
    result = trend(db, "--baseline", "baseline", "--fail-on", RISE_BOUNDS)
    assert result.exit_code == 1, result.output
    assert "NOT JUDGED: run 2 has 1 rank, its baseline run 1 has 2" in result.output, result.output
    ingest(db, [str(copy_into(log, tmp_path / "four")) for log in sorted((DATA / "ddp_4ranks_diverge").glob("*.log"))],
           run_label="four ranks", jobs=1)
    four = trend(db, "--baseline", "baseline", "--run", "four ranks", "--fail-on", "failures>0")
    assert four.exit_code == 1 and "NOT JUDGED: run 3 has 4 ranks, its baseline run 1 has 2" in four.output, four.output
    ingest(db, [str(copy_into(log, tmp_path / "again")) for log in two], run_label="two ranks again", jobs=1)
    same = trend(db, "--baseline", "baseline", "--run", "two ranks again", "--fail-on", "failures>0")
    assert same.exit_code == 0 and "NOT JUDGED" not in same.output, same.output


def test_several_runs_arriving_in_the_ingest_judged_are_not_judged_unless_one_is_named(tmp_path):
    """Reproduction: two runs arrived in one ingest; the one not judged (by folder name order, ingested first)
    regressed, and the gate said "no bound crossed". Now: NOT JUDGED, naming both; `--run` judges the one named."""
    series = sorted((DATA / "series").glob("*.log"), key=lambda log: log.read_bytes().count(b'{"dynamo_start"'))
    db = tmp_path / "t.db"
    ingest(db, [str(copy_into(series[1], tmp_path / "base"))], run_label="baseline", jobs=1)
    worse, better = copy_into(series[-1], tmp_path / "a-worse"), copy_into(series[0], tmp_path / "b-better")
    summary = ingest(db, [str(worse.parent), str(better.parent)], jobs=1)
    conn = connect(db)
    ids = {Path(directory).name: run for run, directory in conn.execute("SELECT id, directory FROM runs")}
    conn.close()
    assert sorted(summary.runs) == sorted([ids["a-worse"], ids["b-better"]]) and ids["b-better"] > ids["a-worse"]
    bounds = "recompiles>+0,graph_breaks>+0,failures>0"  # (the better day's cold cache took longer to compile)
    result = trend(db, "--baseline", "baseline", "--fail-on", bounds)
    assert result.exit_code == 1, result.output
    assert (f"NOT JUDGED: run {ids['b-better']} arrived in one ingest with run {ids['a-worse']}: name the run to "
            f"judge with --run") in result.output, result.output
    worst = trend(db, "--baseline", "baseline", "--run", str(ids["a-worse"]), "--fail-on", bounds)
    assert worst.exit_code == 1 and "CROSSED: graph_breaks>+0" in worst.output and "NOT JUDGED" not in worst.output
    fine = trend(db, "--baseline", "baseline", "--run", str(ids["b-better"]), "--fail-on", bounds)
    assert fine.exit_code == 0 and "no bound crossed" in fine.output, fine.output
