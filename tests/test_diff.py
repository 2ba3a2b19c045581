"""tlindex diff: two runs' compiles matched by code location and compile number, changes named and ranked."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import scenario_run

from tlindex.cli import cli
from tlindex.diff import diff


def test_a_cold_and_a_warm_cache_run_match_every_compile_and_show_cache_and_time(db):
    cold, warm = scenario_run(db, "cache")  # the same program twice, sharing an inductor cache
    result = diff(db, str(cold), str(warm))
    assert result["summary"]["only_a"] == result["summary"]["only_b"] == 0
    compiled = [c for c in result["compiles"] if c["key"].get("compile") != "-/-"]
    (n,) = db.execute("SELECT count(*) FROM compiles WHERE run_id = ? AND compile_id != '-/-'", (cold,)).fetchone()
    assert len(compiled) == n > 0
    for entry in compiled:
        assert {"cache", "compile_time"} <= set(entry["changes"]), entry
        timing = entry["detail"]["compile_time"]
        assert timing["b_s"] < timing["a_s"]  # warm is faster
        # the phases that moved, from the chromium spans: the backend (AOT and inductor) most of all
        spans = dict(db.execute("SELECT name, sum(duration_us) / 1e6 FROM chromium_events WHERE compile = ? AND "
                                "ph = 'X' AND name = 'backend_compile' GROUP BY name", (entry["a"]["id"],)).fetchall())
        assert timing["phases"]["backend"][0] == round(spans["backend_compile"], 3)
        assert timing["phases"]["backend"][1] < timing["phases"]["backend"][0]
        for cache, (before, after) in entry["detail"]["cache"].items():
            assert "miss" in (before or []) and set(after or []) <= {"hit"}, cache
        assert {"compile_id", "status", "duration_s"} <= set(entry["a"]) and entry["a"]["compile_id"] == \
            entry["b"]["compile_id"]


def test_a_run_diffed_with_itself_has_no_changes(db):
    for scenario in ("ddp_4ranks_diverge", "compile_errors", "graph_breaks"):
        (run,) = scenario_run(db, scenario)
        result = diff(db, str(run), str(run))
        assert all(not c["changes"] and c["a"] and c["b"] for c in result["compiles"]), scenario


def test_a_rank_in_one_run_only_and_a_run_without_compiles_are_reported_not_errors(db):
    (four,) = scenario_run(db, "ddp_4ranks_diverge")
    (two,) = scenario_run(db, "ddp_2ranks")
    result = diff(db, str(four), str(two))
    only_a_ranks = {c["a"]["rank"] for c in result["compiles"] if c["b"] is None}
    assert {2, 3} <= only_a_ranks and result["a"]["ranks"] == [0, 1, 2, 3] and result["b"]["ranks"] == [0, 1]
    (draft,) = scenario_run(db, "draft_export")  # no compilation at all
    result = diff(db, str(draft), str(two))
    assert result["a"]["compiles"] == 0 and result["summary"]["matched"] <= 2  # at most the [-/-] of each rank


def test_cli_diff_table_json_and_bad_input(fixtures_db, db):
    cold, warm = scenario_run(db, "cache")
    runner = CliRunner()
    table = runner.invoke(cli, ["diff", str(cold), str(warm), "--db", str(fixtures_db)])
    assert table.exit_code == 0 and "compiles matched" in table.output and "cache" in table.output
    result = json.loads(runner.invoke(cli, ["diff", str(cold), str(warm), "--db", str(fixtures_db), "--json"]).output)
    assert set(result) == {"a", "b", "summary", "compiles"}
    assert {"key", "a", "b", "changes"} <= set(result["compiles"][0])
    unknown = runner.invoke(cli, ["diff", "nosuchrun", str(warm), "--db", str(fixtures_db)])
    assert unknown.exit_code == 1 and "no run match" in unknown.output
    same = runner.invoke(cli, ["diff", str(cold), str(cold), "--db", str(fixtures_db)])
    assert same.exit_code == 0 and "the same run twice" in same.output and "0 changed" in same.output
