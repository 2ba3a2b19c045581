"""tlindex diff: two runs' compiles matched by code location and compile number, changes named and ranked."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import connect, raw_envelopes, scenario_logs, scenario_run

from tlindex.answers.diff import compare, diff, graph_pairs
from tlindex.cli import cli
from tlindex.ingest.guard_keys import PROCESS_ADDRESS


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
    assert set(result) == {"torch", "a", "b", "config", "summary", "compiles"}
    assert {"key", "a", "b", "changes"} <= set(result["compiles"][0])
    unknown = runner.invoke(cli, ["diff", "nosuchrun", str(warm), "--db", str(fixtures_db)])
    assert unknown.exit_code == 1 and "no run match" in unknown.output
    same = runner.invoke(cli, ["diff", str(cold), str(cold), "--db", str(fixtures_db)])
    assert same.exit_code == 0 and "the same run twice" in same.output and "0 changed" in same.output


def break_added_runs(db) -> tuple[int, int]:
    """(run without the break, run with it) of the break_added pair, told apart by their raw logs."""
    breaking = {path.name for path in scenario_logs("break_added")
                if any(e.get("artifact", {}).get("name") == "dynamo_graph_break_reason" for e in raw_envelopes([path]))}
    assert len(breaking) == 1
    runs = {}
    for run in scenario_run(db, "break_added"):
        (name,) = db.execute("SELECT f.name FROM files f JOIN sources s ON s.file_id = f.id WHERE s.run_id = ?",
                             (run,)).fetchone()
        runs[name in breaking] = run
    return runs[False], runs[True]


def test_a_graph_break_added_mid_function_is_reported_once_and_the_rest_match_unchanged(db):
    plain, breaking = break_added_runs(db)
    result = diff(db, str(plain), str(breaking))
    entries = result["compiles"]
    assert result["summary"]["only_a"] == 0  # every compile of the run without the break is matched
    # the break is reported once, on the function that now breaks, and comes first
    with_new_breaks = [c for c in entries if c.get("detail", {}).get("graph_breaks", {}).get("added")]
    assert len(with_new_breaks) == 1 and entries[0] is with_new_breaks[0]
    (reason,) = with_new_breaks[0]["detail"]["graph_breaks"]["added"]
    assert "torch._dynamo.graph_break()" in reason and with_new_breaks[0]["b"]["status"] == "break"
    body_b = with_new_breaks[0]["b"]["id"]
    # the compiles that started before the break compile, and those after it whose compile ids moved, are unchanged
    others = [c for c in entries if c["a"] and c["b"] and c is not with_new_breaks[0]]
    assert others and all(not c["changes"] for c in others)
    before = [c for c in others if c["b"]["id"] < body_b and c["key"].get("compile") != "-/-"]
    after = [c for c in others if c["b"]["id"] > body_b]
    assert before and after and all(c["a"]["compile_id"] != c["b"]["compile_id"] for c in after)
    # the resume function the break created is the one compile of B alone
    (alone,) = [c for c in entries if c["a"] is None]
    assert alone["b"]["co_name"].startswith("torch_dynamo_resume_in_" + with_new_breaks[0]["b"]["co_name"])


def test_graph_diffs_show_the_code_cut_off_by_the_break(db):
    plain, breaking = break_added_runs(db)
    entry = next(c for c in diff(db, str(plain), str(breaking))["compiles"] if "graph" in c["changes"])
    pairs = {pair.kind: pair for pair in graph_pairs(db, entry["a"]["id"], entry["b"]["id"])}
    graph = pairs["dynamo_output_graph"]
    # the code after the break: traced into A's graph, in B left to the resume function
    after_break = "return (y * y).sum() + y"
    assert after_break in graph.a_text and after_break not in graph.b_text
    removed = [line for line in graph.unified().splitlines() if line.startswith("-") and not line.startswith("---")]
    assert any(after_break in line for line in removed)
    assert set(entry["detail"]["graph"]) == {kind for kind, pair in pairs.items() if pair.changed}


def test_object_ids_in_guards_are_not_changes(db):
    (run,) = scenario_run(db, "ddp_2ranks")
    rank0, rank1 = db.execute("""
        SELECT a.id, b.id FROM compiles a JOIN compiles b ON b.run_id = a.run_id AND b.compile_id = a.compile_id
        AND b.rank = 1 WHERE a.run_id = ? AND a.rank = 0 AND a.co_name = 'forward'""", (run,)).fetchone()
    ids = [{text for (text,) in db.execute("SELECT text FROM guards WHERE compile = ? AND guard_type = 'ID_MATCH'",
                                           (compile,))} for compile in (rank0, rank1)]
    assert ids[0] and ids[0] != ids[1]  # two processes: other addresses
    assert "guards" not in compare(db, rank0, rank1)["changes"]


def masked_guard_set(db, compile_row: int) -> set[str]:
    """A compile's guards as a diff compares them, computed here from the rows' text."""
    return {f"{t}\0{PROCESS_ADDRESS.sub('<id>', text) if '___' in text else text}"
            for t, text in db.execute("SELECT guard_type, text FROM guards WHERE compile = ?", (compile_row,))}


def test_equal_guard_fingerprints_are_equal_guards_and_unknown_ones_are_compared(db, tmp_path):
    """compiles.guards_print (written at ingest) stands for the set of masked guard lines, so a diff skips
    comparing guards where the prints agree; without prints (an older database) it compares the lines."""
    rows = db.execute("SELECT id, guards_print FROM compiles WHERE guards_print IS NOT NULL").fetchall()
    assert len(rows) > 100
    by_print: dict[str, list[int]] = {}
    for row, fingerprint in rows:
        by_print.setdefault(fingerprint, []).append(row)
    sets = {row: frozenset(masked_guard_set(db, row)) for row, _ in rows}
    assert {len({sets[r] for r in group}) for group in by_print.values()} == {1}  # one print, one guard set
    assert len({sets[r] for r in sets}) == len(by_print)  # and no two prints for one set
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    with_prints = diff(db, str(run), str(run))
    copy = tmp_path / "no_prints.db"
    db.execute("VACUUM INTO ?", (str(copy),))
    old = connect(copy)
    old.execute("UPDATE compiles SET guards_print = NULL")
    old.commit()
    assert diff(old, str(run), str(run))["compiles"] == with_prints["compiles"]
    rank0, rank2 = old.execute("SELECT min(id), max(id) FROM compiles WHERE run_id = ? AND compile_id = '0/0' "
                               "AND rank IN (0, 2)", (run,)).fetchone()
    assert compare(old, rank0, rank2)["changes"] == compare(db, rank0, rank2)["changes"]


def test_the_counts_agree_with_the_lists_and_records_without_a_compile_id_are_counted_apart(db):
    """break_added: A has 3 compiles and B 4 (the totals above the diff); the diff matched 3 of them and
    lists B's resume function alone; each process's [-/-] records are counted on a line of their own."""
    from tlindex.answers.diff import as_text, diff

    a, b = scenario_run(db, "break_added")
    result = diff(db, str(a), str(b))
    s = result["summary"]
    real = [c for c in result["compiles"] if c["key"].get("compile") != "-/-"]
    assert s["matched"] + s["only_a"] == result["a"]["compiles"] and s["matched"] + s["only_b"] == result["b"]["compiles"]
    assert s["matched"] == sum(1 for c in real if c["a"] and c["b"])
    assert s["without_compile_id"]["matched"] >= 1
    assert any(line.startswith("records without a compile id ([-/-]") for line in as_text(result))


def test_compiles_of_one_run_only_are_listed_in_rank_order_and_said_once_per_compile_id(db):
    """A 4-rank run against a 2-rank one: ranks 2 and 3 compiled alone; every compile id several ranks have alone is
    one line naming them, and the entries (JSON too) come rank by rank in numeric order."""
    from tlindex.answers.diff import as_text
    from tlindex.answers.findings.words import rank_list

    (four,) = scenario_run(db, "ddp_4ranks_diverge")
    (two,) = scenario_run(db, "ddp_2ranks")
    result = diff(db, str(four), str(two))
    alone = [c["a"] for c in result["compiles"] if c["b"] is None]
    ranks = [side["rank"] for side in alone]
    assert ranks == sorted(ranks) and {2, 3} <= set(ranks)
    groups: dict[tuple, list[int]] = {}
    for side in alone:
        groups.setdefault((side["compile_id"], side["co_name"]), []).append(side["rank"])
    assert any(len(group) > 1 for group in groups.values())
    lines = as_text(result)
    for (compile_id, co_name), group in groups.items():
        one = [line for line in lines if line.startswith(f"  [{compile_id}] {co_name or ''}: only in A, on ")]
        each = [line for line in lines if any(line.startswith(f"  [{compile_id}] rank {rank} {co_name or ''}: only in A")
                                              for rank in group)]
        if len(group) > 1:
            assert one == [f"  [{compile_id}] {co_name or ''}: only in A, on {len(group)} ranks ({rank_list(group)})"]
            assert each == []
        else:
            assert one == [] and len(each) == 1
