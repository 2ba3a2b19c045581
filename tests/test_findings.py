"""Findings: what is wrong with a run, said before anyone clicks (run page, runs page, `tlindex findings`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner
from conftest import raw_envelopes, scenario_logs, scenario_run
from datasette.app import Datasette

from tlindex.answers.findings import findings, problems
from tlindex.cli import cli


def by_kind(db, scenario: str) -> dict:
    (run,) = scenario_run(db, scenario)
    return {f.kind: f for f in findings(db, run)}


def test_a_rank_that_recompiled_alone_is_a_divergence_naming_it(db):
    found = by_kind(db, "ddp_4ranks_diverge")
    divergence = found["divergence:missing_compile"]
    assert divergence.severity == "error" and "[0/1], [4/1] only on rank 1 (1 of 4)" in divergence.text
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    only_rank_1 = [r[0] for r in db.execute(
        "SELECT compile_id FROM compiles WHERE run_id = ? AND compile_id != '-/-' GROUP BY compile_id "
        "HAVING count(DISTINCT rank) = 1 AND min(rank) = 1", (run,))]
    assert divergence.count == len(only_rank_1) and f"[{only_rank_1[0]}]" in divergence.text


def test_a_divergence_names_every_rank_group_so_the_outlier_is_never_hidden(db, corpus_db):
    """tlparse's multi_rank_logs (4 ranks, each compiling a different number of graphs) and the 4-rank DDP
    fixture: the compile-id finding gives every rank's count grouped by value, counted here from the
    raw envelopes, so the rank that compiled more than the rest is named even when the first compile id
    the finding quotes is not its."""
    from conftest import SHARED_CORPUS, connect

    cases = [(db, "ddp_4ranks_diverge", scenario_logs("ddp_4ranks_diverge")),
             (connect(corpus_db), "multi_rank_logs", sorted((SHARED_CORPUS / "multi_rank_logs").iterdir()))]
    for conn, scenario, logs in cases:
        counts = {}
        for log in logs:
            ids = {(e.get("frame_id"), e.get("frame_compile_id")) for e in raw_envelopes([log])
                   if "dynamo_start" in e}
            rank = int(log.name.split("rank_")[1].split("_")[0].split(".")[0])
            counts[rank] = len(ids)
        (run,) = scenario_run(conn, scenario)
        text = {f.kind: f for f in findings(conn, run)}["divergence:missing_compile"].text
        for count in set(counts.values()):
            ranks = sorted(r for r, n in counts.items() if n == count)
            label = ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
            assert f"{label}: {count} compile" in text, (scenario, label, count, text)


def test_ranks_are_grouped_by_value_and_the_smallest_groups_are_never_cut():
    from tlindex.answers.findings import group_ranks, rank_list

    assert rank_list([3, 0, 1, 2, 5]) == "ranks 0–3, 5" and rank_list([4]) == "rank 4"
    assert group_ranks({0: 5, 1: 5, 2: 5, 3: 6}) == "ranks 0–2: 5; rank 3: 6"
    many = {rank: (rank if rank >= 100 else 0) for rank in range(110)}  # 10 outliers, one value each
    text = group_ranks(many)
    assert text.startswith("ranks 0–99: 0; ") and text.endswith("rank 109: 109; 5 other groups of ranks")
    assert text.count("; rank ") == 5  # the largest group and the 5 smallest (the outliers) are named
    uneven = {0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "d", 7: "e", 8: "f", 9: "g", 10: "g"}
    assert "ranks 0–2: a" in group_ranks(uneven) and all(f": {v}" in group_ranks(uneven) for v in "cdef")


def test_collective_schedules_that_differ_name_the_rank_groups(db):
    found = by_kind(db, "collectives_3ranks")
    assert "ranks 0, 2:" in found["divergence:collective_schedule"].text and \
        "rank 1:" in found["divergence:collective_schedule"].text
    assert "[2/0] only on rank 2" in found["divergence:missing_compile"].text  # rank 2 ran one more graph


def test_failures_breaks_and_recompiles_are_counted_from_the_logs(db):
    failures = Counter(e["compilation_metrics"]["fail_type"] for e in raw_envelopes(scenario_logs("compile_errors"))
                       if "compilation_metrics" in e and e["compilation_metrics"].get("fail_type"))
    (run,) = scenario_run(db, "compile_errors")
    found = [f for f in findings(db, run) if f.kind == "failures"]  # one per kind of failure
    assert Counter({kind: sum(f.count for f in found if f", {kind} at " in f.text) for kind in failures}) == failures
    breaks = sum(e.get("artifact", {}).get("name") == "dynamo_graph_break_reason"
                 for e in raw_envelopes(scenario_logs("graph_breaks")))
    assert by_kind(db, "graph_breaks")["graph_breaks"].count == breaks > 0
    recompiles = by_kind(db, "recompiles")
    assert recompiles["recompile_limit"].severity == "warning" and "g hit the recompile limit" in \
        recompiles["recompile_limit"].text
    assert "failures" not in recompiles  # its one failed compile is the recompile limit, a finding of its own


def test_a_healthy_run_has_nothing_to_report(db):
    (run,) = scenario_run(db, "dynamic")
    found = findings(db, run)
    assert problems(found) == [] and [f.kind for f in found] == ["slowest_compile"]


def test_cli_findings_exit_code_gates_on_problems(fixtures_db, db):
    runner = CliRunner()
    (healthy,) = scenario_run(db, "dynamic")
    (broken,) = scenario_run(db, "compile_errors")
    ok = runner.invoke(cli, ["findings", str(healthy), "--db", str(fixtures_db)])
    assert ok.exit_code == 0 and "nothing to report" in ok.output
    bad = runner.invoke(cli, ["findings", "compile_err", "--db", str(fixtures_db), "--json"])  # a label prefix
    assert bad.exit_code == 1
    (report,) = json.loads(bad.output)
    assert report["run"] == broken and report["findings"][0]["severity"] == "error"
    assert {"severity", "kind", "count", "text", "query", "params", "compile"} <= set(report["findings"][0])
    unknown = runner.invoke(cli, ["findings", "no-such-run", "--db", str(fixtures_db)])
    assert unknown.exit_code == 1 and "no run match" in unknown.output


@pytest.mark.asyncio
async def test_the_run_and_runs_pages_say_what_is_wrong_first(traces_db):
    from conftest import connect

    conn = connect(traces_db)
    ds = Datasette([str(traces_db)])
    (diverging,) = scenario_run(conn, "ddp_4ranks_diverge")
    html = (await ds.client.get(f"/traces/-/tlindex/run/{diverging}")).text
    section = html.split('<h2 id="findings">')[1].split("<h2")[0]
    assert "Ranks diverge in compile ids:" in section and "only on rank 1" in section
    assert html.index('id="findings"') < html.index("<h2>Stack trie")  # at the top
    (healthy,) = scenario_run(conn, "dynamic")
    assert "No problem found" in (await ds.client.get(f"/traces/-/tlindex/run/{healthy}")).text
    runs = (await ds.client.get("/traces/-/tlindex")).text
    row = runs.split(f'href="/traces/-/tlindex/run/{diverging}"')[1].split("</tr>")[0]
    assert "Ranks diverge in compile ids" in row
    row = runs.split(f'href="/traces/-/tlindex/run/{healthy}"')[1].split("</tr>")[0]
    assert "nothing to report" in row
