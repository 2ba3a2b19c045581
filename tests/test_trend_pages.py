"""The pages of compile health across runs: the trend, the graph breaks that cost most, a compile's configuration
and the config keys a diff names. Each shows the numbers the library computes (run_health, top_graph_breaks,
configs), checked against the run pages and the payloads the logs carried."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import scenario_run

from tlindex.answers.configs import config_changes
from tlindex.answers.health import health
from tlindex.answers.top_breaks import top_graph_breaks
from tlindex.answers.trend import mark_torch_changes
from tlindex.cli import cli


@pytest.mark.asyncio
async def test_the_trend_page_shows_each_runs_health_and_links_its_page(db, ds):
    every = mark_torch_changes(health(db))
    page = (await ds.client.get("/traces/-/tlindex/trend.json")).json()
    assert page["rows"] == json.loads(json.dumps(every))
    for series in page["series"]:
        assert [p["value"] for p in series["points"]] == [row[series["column"]] for row in every]
        assert any(p["value"] is not None for p in series["points"])
    logged = {s["column"] for s in page["series"]}
    assert {"compiles", "recompiles", "graph_breaks", "compile_time_s"} <= logged
    html = (await ds.client.get("/traces/-/tlindex/trend")).text
    for row in every:
        assert f'href="/traces/-/tlindex/run/{row["run_id"]}"' in html
    assert html.count("<svg class=\"trend\"") == len(page["series"])


@pytest.mark.asyncio
async def test_the_trend_of_runs_named_by_label_or_prefix(db, ds):
    runs = scenario_run(db, "series")
    labels = dict(db.execute(f"SELECT id, label FROM runs WHERE id IN ({','.join('?' * len(runs))})", runs))
    prefix = (await ds.client.get("/traces/-/tlindex/trend.json?label=series@")).json()
    assert [r["run_id"] for r in prefix["rows"]] == sorted(runs, key=lambda run: labels[run])  # oldest first
    named = (await ds.client.get("/traces/-/tlindex/trend.json", params=[("run", labels[runs[-1]]),
                                                                        ("run", str(runs[0]))])).json()
    assert {r["run_id"] for r in named["rows"]} == {runs[0], runs[-1]}
    missing = await ds.client.get("/traces/-/tlindex/trend?run=no+such+run")
    assert missing.status_code == 404 and "no such run" in missing.text


@pytest.mark.asyncio
async def test_the_graph_breaks_page_counts_what_the_run_pages_count(db, ds):
    everywhere = (await ds.client.get("/traces/-/tlindex/graph-breaks.json")).json()
    assert everywhere["groups"] == json.loads(json.dumps(
        [{**g, "type": everywhere["groups"][i]["type"], "site": everywhere["groups"][i]["site"]}
         for i, g in enumerate(top_graph_breaks(db))]))
    broke = [row for row in health(db) if row["graph_breaks"]]
    assert broke
    for row in broke:
        page = (await ds.client.get(f"/traces/-/tlindex/graph-breaks.json?run={row['run_id']}")).json()
        assert sum(g["breaks"] for g in page["groups"]) == row["graph_breaks"], row["label"]
        run_page = (await ds.client.get(f"/traces/-/tlindex/run/{row['run_id']}")).text
        assert f'href="/traces/-/tlindex/graph-breaks?run={row["run_id"]}"' in run_page
        html = (await ds.client.get(f"/traces/-/tlindex/graph-breaks?run={row['run_id']}")).text
        for group in page["groups"]:
            assert f'href="/traces/-/tlindex/compile/{group["compile"]}"' in html


@pytest.mark.asyncio
async def test_a_compile_page_shows_the_config_its_metrics_logged(db, ds):
    compile, payload = db.execute("""SELECT m.compile, m.dynamo_config FROM metrics m JOIN compiles c ON c.id = m.compile
        WHERE m.dynamo_config IS NOT NULL ORDER BY m.id LIMIT 1""").fetchone()
    logged = json.loads(db.execute("SELECT text FROM payloads WHERE hash = ?", (payload,)).fetchone()[0])
    page = (await ds.client.get(f"/traces/-/tlindex/compile/{compile}.json")).json()["compile"]
    dynamo = next(c for c in page["config"] if c["name"] == "dynamo")
    assert dynamo["payload"] == payload and dynamo["keys"] == len(logged)
    html = (await ds.client.get(f"/traces/-/tlindex/compile/{compile}")).text
    assert 'id="config"' in html and f"dynamo config</a>: {len(logged)} keys" in html
    # the config itself is its payload's page, which every compile run with it links (written once in a report)
    assert f'href="/traces/-/tlindex/payload/{payload}"' in html
    shown = (await ds.client.get(f"/traces/-/tlindex/payload/{payload}.json")).json()["payload"]["text"]
    assert json.loads(shown) == logged


@pytest.mark.asyncio
async def test_the_diff_page_names_the_config_keys_the_diff_command_names(db, ds, fixtures_db):
    runs = scenario_run(db, "series")
    first, last = min(runs), max(runs)
    changes = config_changes(db, first, last)
    assert changes, "the series raises recompile_limit on its last day"
    command = json.loads(CliRunner().invoke(cli, ["diff", str(first), str(last), "--db", str(fixtures_db),
                                                  "--json"]).output)
    assert [(c["config"], c["key"]) for c in command["config"]] == [(c["config"], c["key"]) for c in changes]
    html = (await ds.client.get(f"/traces/-/tlindex/diff/{first}/{last}")).text
    assert f"Configuration that changed ({len(changes)} key" in html
    for change in changes:
        assert f"<code>{change['config']}.{change['key']}</code>" in html
    same = (await ds.client.get(f"/traces/-/tlindex/diff/{first}/{first}")).text
    assert "Configuration that changed" not in same


def test_a_report_of_the_series_carries_its_trend_and_graph_breaks(db, fixtures_db, tmp_path):
    runs = scenario_run(db, "series")
    out = tmp_path / "report"
    args = ["report", "--db", str(fixtures_db), "--out", str(out), "--silent", "-j", "2"]
    for run in runs:
        args += ["--run", str(run)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    trend = (out / "trend.html").read_text()
    for run in runs:
        assert (out / f"run-{run}" / "graph-breaks.html").exists() or not any(
            r["graph_breaks"] for r in health(db, [run]))
    assert trend.count("<svg class=\"trend\"") >= 4


@pytest.mark.asyncio
async def test_trend_charts_label_each_point_and_leave_a_gap_where_a_run_has_no_value(db, ds):
    import re

    page = (await ds.client.get("/traces/-/tlindex/trend.json")).json()
    html = (await ds.client.get("/traces/-/tlindex/trend")).text
    charts = re.findall(r'<svg class="trend".*?</svg>', html, re.S)
    assert len(charts) == len(page["series"]) and any(
        p["value"] is None for s in page["series"] for p in s["points"])  # some run lacks some number
    for series, svg in zip(page["series"], charts):
        values = [p["value"] for p in series["points"]]
        runs = []  # the runs with a value, in a row: each row of two or more is one line
        for value in values:
            if value is None or not runs:
                runs.append([])
            if value is not None:
                runs[-1].append(value)
        assert svg.count("<polyline") == sum(len(row) > 1 for row in runs), series["column"]
        titles = re.findall(r"<title>(.*?)</title>", svg)
        assert titles == [f"{p['label']}: {p['value']} {series['unit']}".replace("'", "&#39;")
                          for p in series["points"] if p["value"] is not None]


def test_label_says_what_it_renamed(fixtures_db, tmp_path):
    from conftest import copy_db

    path = copy_db(fixtures_db, tmp_path / "t.db")
    (old,) = [row[0] for row in sqlite3.connect(path).execute("SELECT label FROM runs WHERE id = 1")]
    said = CliRunner().invoke(cli, ["label", "1", "renamed-run", "--db", str(path)])
    assert said.exit_code == 0 and said.output.strip() == f"run 1: {old!r} is now 'renamed-run'"
