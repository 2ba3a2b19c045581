"""Compile health across runs: one definition (the view run_health) that the trend, the run page, the queries and
the findings all show, checked against the raw logs of the series fixture (one model trained on four days)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, raw_envelopes, scenario_run

from tlindex.answers.findings import findings
from tlindex.answers.health import IDENTITY, METRICS, health, run_health, select_runs
from tlindex.answers.queries import load_queries, run_sql
from tlindex.answers.trend import mark_torch_changes
from tlindex.cli import cli

SERIES = sorted((DATA / "series").glob("*.log"))
TIMES = {"compile_time_s", "aot_time_s", "inductor_time_s", "backward_time_s", "autotune_time_s"}


def _rows(conn, name: str, **params) -> list[dict]:
    cursor = run_sql(conn, load_queries()[name].sql, {k: str(v) for k, v in params.items()})
    return [dict(zip([d[0] for d in cursor.description], row)) for row in cursor]


def series_runs(db) -> dict[str, int]:
    """The series' runs by log file name (one log, one process, one run a day)."""
    runs = scenario_run(db, "series")
    return {name: run for name, run in db.execute(
        f"SELECT f.name, s.run_id FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id IN "
        f"({','.join('?' * len(runs))})", runs)}


def raw_health(log) -> dict:
    """A day's health counted from its log's envelopes, without tlindex."""
    envelopes = raw_envelopes([log])
    forward = [e for e in envelopes if "compilation_metrics" in e]
    backward = [e["bwd_compilation_metrics"] for e in envelopes if "bwd_compilation_metrics" in e]
    artifacts = Counter(e["artifact"]["name"] for e in envelopes if "artifact" in e)
    metrics = [e["compilation_metrics"] for e in forward]

    def seconds(values):
        values = [v for v in values if v is not None]
        return round(sum(values), 3) if values else None

    for m in metrics:  # what torch 2.13 logs twice, under two names: the columns tlindex reads are the same times
        assert m["dynamo_cumulative_compile_time_us"] == round(m["entire_frame_compile_time_s"] * 1e6)
        assert m["aot_autograd_cumulative_compile_time_us"] == round(m["backend_compile_time_s"] * 1e6)
    for m in backward:
        assert m["backward_cumulative_compile_time_us"] == m["duration_us"]
    caches = {name: artifacts[name] for name in artifacts if "_cache_" in name}
    return {
        "compiles": len({(e["frame_id"], e["frame_compile_id"]) for e in envelopes if "dynamo_start" in e}),
        "recompiles": len({(e["frame_id"], e["frame_compile_id"]) for e in envelopes
                           if "dynamo_start" in e and e["frame_compile_id"] > 0}),
        "failures": sum(1 for m in metrics if m.get("fail_type")),
        "graph_breaks": artifacts["dynamo_graph_break_reason"],
        "restarts": sum(len(m.get("restart_reasons") or []) for m in metrics),
        # the frames' and their backward's (the view compile_times; every compile here logged its metrics)
        "compile_time_s": seconds([m["entire_frame_compile_time_s"] for m in metrics]
                                  + [m["duration_us"] / 1e6 for m in backward]),
        "aot_time_s": seconds(m["backend_compile_time_s"] for m in metrics),
        "inductor_time_s": seconds(m["inductor_compile_time_s"] for m in metrics),
        "backward_time_s": seconds(m["duration_us"] / 1e6 for m in backward),
        "autotune_time_s": seconds(m.get("compile_time_autotune_time_us") and m["compile_time_autotune_time_us"] / 1e6
                                   for m in metrics + backward),
        "guards": sum(m["guard_count"] for m in metrics),
        "cache_lookups": sum(caches.values()),
        "cache_hits": sum(n for name, n in caches.items() if name.endswith("_cache_hit")),
        "cache_misses": sum(n for name, n in caches.items() if name.endswith("_cache_miss")),
        "cache_bypasses": sum(n for name, n in caches.items() if name.endswith("_cache_bypass")),
        "fx_graph_hits": caches.get("fx_graph_cache_hit", 0), "fx_graph_misses": caches.get("fx_graph_cache_miss", 0),
        "aotautograd_hits": caches.get("aotautograd_cache_hit", 0),
        "aotautograd_misses": caches.get("aotautograd_cache_miss", 0),
        "torch_version": metrics[0]["pytorch_version"],
    }


def test_the_view_and_the_registry_name_the_same_numbers(db):
    columns = [d[0] for d in db.execute("SELECT * FROM run_health").description]
    assert columns == [*IDENTITY, *(metric.column for metric in METRICS)]


def test_each_day_of_the_series_is_what_its_log_says(db):
    """Every number of every day, counted from the raw envelopes: compiles, recompiles, breaks, restarts, the
    compile times torch logged (frames and backward, AOTAutograd, Inductor, backward; autotuning is not logged on CPU),
    guards, each cache's hits and misses, torch's version."""
    runs = series_runs(db)
    for log in SERIES:
        row = run_health(db, runs[log.name])
        expected = raw_health(log)
        assert {key: row[key] for key in expected} == expected, log.name
    days = [row for row in health(db, sorted(runs.values()))]
    assert [row["run_id"] for row in days] == [row["run_id"] for row in sorted(days, key=lambda r: r["start_time"])]
    # what the fixture provokes, day after day: a recompile, then a graph break, then a deeper model and a second break
    assert [d["recompiles"] for d in days] == [0, 1, 2, 3] and [d["graph_breaks"] for d in days] == [0, 0, 2, 4]
    assert days[3]["compile_time_s"] > days[2]["compile_time_s"] and days[1]["fx_graph_hits"] > 0  # a warm cache


@pytest.mark.asyncio
async def test_every_run_shows_on_its_page_and_in_its_queries_what_the_trend_shows(db, ds):
    """For every run of every fixture: the run page's own totals (its JSON twin), the canned queries `cache`,
    `failures` (restarts) and `run_health`, and the findings' counts all equal the trend's row."""
    for row in health(db):
        run = row["run_id"]
        page = (await ds.client.get(f"/traces/-/tlindex/run/{run}.json")).json()["run"]
        totals = page["totals"]
        for key in ("compiles", "failures", "recompiles", "graph_breaks"):
            assert row[key] == (totals.get(key) or 0), (run, key)
        assert row["compile_time_s"] == totals.get("compile_time_s"), run
        assert row["torch_version"] == page["torch_version"]
        assert row["compiles"] == sum(r["compiles"] or 0 for r in page["by_rank"])
        cache = _rows(db, "cache", run=run)
        for result, column in (("hits", "cache_hits"), ("misses", "cache_misses"), ("bypasses", "cache_bypasses")):
            assert row[column] == sum(r[result] for r in cache), (run, column)
        for name in ("fx_graph", "aotautograd"):
            assert row[f"{name}_hits"] == sum(r["hits"] for r in cache if r["cache"] == name), run
            assert row[f"{name}_misses"] == sum(r["misses"] for r in cache if r["cache"] == name), run
        assert row["restarts"] == sum(r["times"] for r in _rows(db, "failures", run=run) if r["kind"] == "restart")
        assert _rows(db, "run_health", run=run) == ([row] if row["compiles"] or totals else [])
        found = {f.kind: f for f in findings(db, run, divergence=False)}
        assert found["recompiles"].count == row["recompiles"] if row["recompiles"] else "recompiles" not in found
        assert found["graph_breaks"].count == row["graph_breaks"] if row["graph_breaks"] else "graph_breaks" not in found
        if "cache" in found:
            assert found["cache"].count == row["cache_misses"] + row["cache_bypasses"]


def test_a_run_that_compiled_nothing_has_zero_counts_and_no_times(db):
    (run,) = scenario_run(db, "draft_export")
    row = run_health(db, run)
    assert all(row[m.column] is None for m in METRICS if m.column in TIMES)
    assert row["compiles"] == row["recompiles"] == row["graph_breaks"] == row["cache_misses"] == 0


def test_a_database_older_than_the_view_reads_it_from_the_schema(fixtures_db, tmp_path):
    """A reading command opens a database read-only: one an older tlindex wrote has no run_health yet."""
    old = tmp_path / "old.db"
    shutil.copy(fixtures_db, old)
    conn = sqlite3.connect(old)
    conn.execute("DROP VIEW run_health")
    conn.execute("DELETE FROM _tlindex_migrations WHERE name = '013_run_health'")
    conn.commit()
    conn.close()
    before, after = connect(fixtures_db), connect(old)
    assert health(after) == health(before)
    assert [f.text for f in findings(after, 1)] == [f.text for f in findings(before, 1)]


@pytest.mark.asyncio
async def test_every_reader_of_an_older_database_sees_the_views_of_this_tlindex(fixtures_db, tmp_path):
    """An older tlindex's database, not yet migrated (a reading command opens it read-only): one view missing, one
    as an older tlindex defined it. The canned query, the command and Datasette read both as this tlindex does;
    the file is not changed."""
    from datasette.app import Datasette

    from tlindex import Database
    from tlindex.store.db import current_views

    old = tmp_path / "old.db"
    shutil.copy(fixtures_db, old)
    conn = sqlite3.connect(old)
    conn.execute("DROP VIEW run_health")
    conn.execute("DROP VIEW piece_compile_spans")
    conn.execute("CREATE VIEW piece_compile_spans AS SELECT 1 AS older")
    conn.execute("DELETE FROM _tlindex_migrations WHERE name IN ('012_piece_attempts', '013_run_health')")
    conn.commit()
    conn.close()
    stored = old.read_bytes()
    reader = Database(old).conn
    assert current_views(sqlite3.connect(fixtures_db)) == []  # a current database: nothing to add
    query = load_queries()["run_health"].sql
    current = connect(fixtures_db)
    assert list(map(tuple, run_sql(reader, query, {"run": ""}))) == list(map(tuple, run_sql(current, query, {"run": ""})))
    spans = "SELECT * FROM piece_compile_spans ORDER BY id"
    assert list(map(tuple, reader.execute(spans))) == list(map(tuple, current.execute(spans)))
    assert reader.execute(spans).fetchall()
    result = CliRunner().invoke(cli, ["query", "run_health", "--db", str(old), "--json"])
    assert result.exit_code == 0 and len(json.loads(result.output)) == len(health(connect(fixtures_db)))
    ds = Datasette([str(old)])
    await ds.invoke_startup()
    served = (await ds.client.get("/old/run_health.json?_shape=array&run=")).json()
    assert len(served) == len(health(connect(fixtures_db)))
    assert (await ds.client.get("/old/-/tlindex/vllm/1")).status_code in (200, 404)
    assert old.read_bytes() == stored


def test_runs_are_chosen_as_everywhere_and_listed_oldest_first(db):
    runs = series_runs(db)
    days = [runs[log.name] for log in SERIES]
    label = db.execute("SELECT label FROM runs WHERE id = ?", (days[0],)).fetchone()[0]
    assert select_runs(db, label="series@") == sorted(days, key=lambda r: db.execute(
        "SELECT start_time FROM runs WHERE id = ?", (r,)).fetchone()[0])
    assert select_runs(db, [str(days[2]), label]) == sorted({days[2], days[0]}, key=select_runs(db).index)
    assert select_runs(db, label="no such prefix") == []


def test_trend_prints_one_row_per_run_and_json_a_list(fixtures_db):
    result = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["run", "label", "start"] and set(lines[1]) <= {"-", " "}
    conn = connect(fixtures_db)
    rows = mark_torch_changes(health(conn, select_runs(conn, label="series@")))  # one torch: no run marked
    assert [line.split()[0] for line in lines[2:]] == [str(row["run_id"]) for row in rows]
    assert "autotune s" not in lines[0]  # no run logged it (CPU)
    listed = json.loads(CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@",
                                                 "--json"]).output)
    assert listed == rows
    one = json.loads(CliRunner().invoke(cli, ["trend", str(rows[1]["run_id"]), "--db", str(fixtures_db), "--json"]).output)
    assert one == [rows[1]]
    unknown = CliRunner().invoke(cli, ["trend", "no such run", "--db", str(fixtures_db)])
    assert unknown.exit_code == 1 and "no run matches 'no such run'" in unknown.output


def test_a_baseline_says_what_moved_to_the_newest_run(fixtures_db):
    conn = connect(fixtures_db)
    days = health(conn, select_runs(conn, label="series@"))
    result = CliRunner().invoke(cli, ["trend", "--db", str(fixtures_db), "--label", "series@",
                                      "--baseline", str(days[1]["run_id"])])
    assert result.exit_code == 0, result.output
    assert f"{days[1]['label']} (baseline)" in result.output
    (line,) = [line for line in result.output.splitlines() if "against baseline" in line]
    assert f"recompiles {days[1]['recompiles']} -> {days[3]['recompiles']}" in line
    assert f"graph_breaks {days[1]['graph_breaks']} -> {days[3]['graph_breaks']}" in line


def test_a_label_cannot_act_on_the_terminal(fixtures_db, tmp_path):
    path = tmp_path / "evil.db"
    shutil.copy(fixtures_db, path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET label = 'evil' || char(27) || ']0;title' || char(7) || char(10) || 'x' "
                 "WHERE id = (SELECT min(id) FROM runs)")
    conn.commit()
    conn.close()
    result = CliRunner().invoke(cli, ["trend", "--db", str(path), "--baseline", "evil"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output and "evil^[]0;title^G⏎ x" in result.output


@pytest.mark.slow
def test_the_trend_and_its_gate_on_100_runs(tmp_path):
    """The series' four days copied into 25 folders (100 runs, one process each), ingested; `tlindex trend` with
    the gate on the newest run against the first (the diff of the two included) lists every run and decides.
    benchmarks/trend.py times the same (the command and the page), in process and as a process."""
    from conftest import ingest

    logs = tmp_path / "logs"
    for n in range(25):
        (logs / f"model-{n:02d}").mkdir(parents=True)
        for log in SERIES:
            shutil.copy2(log, logs / f"model-{n:02d}" / log.name)
    db = tmp_path / "trend.db"
    assert not ingest(db, [str(logs)], jobs=2).problems
    conn = connect(db)
    first = conn.execute("SELECT id FROM runs ORDER BY start_time, id LIMIT 1").fetchone()[0]
    assert len(health(conn)) == 100
    result = CliRunner().invoke(cli, ["trend", "--db", str(db), "--baseline", str(first), "--fail-on",
                                      "compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0"])
    assert result.exit_code == 1 and len(result.output.splitlines()) > 100, result.output  # the series got worse
