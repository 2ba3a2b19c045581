"""The version matrix (tests/data/versions/<torch version>/): the scenarios of tests/data/generate.py run by other
torch releases, ingested whole; and what tlindex shows of them where issue 65 says it is wrong.

tests/test_tlparse_conformance.py compares these logs with tlparse (ISSUE_65_DIFFERENCES lists where tlindex is
wrong and tlparse is not). Where tlparse shows the same as tlindex, that test cannot see the bug: ISSUE_65_SHOWN
below holds what tlindex shows today, and each entry fails once it shows something else, so the fix removes it.
"""

from __future__ import annotations

import generate
import oracle
import pytest
from conftest import VERSIONS, connect, scenario_dirs, torch_versions

from tlindex.answers.diff import diff
from tlindex.answers.gate import unjudgeable
from tlindex.answers.health import run_health
from tlindex.answers.queries import load_queries, run_sql

VERSION_DIRS = [folder for version in torch_versions() for folder in scenario_dirs(version)]
TOO_BIG = {"series", "vllm_two_models"}  # over generate.MAX_VERSION_BYTES on 2.14.1 and 2.15.0: not kept


def run_of(conn, folder) -> list[int]:
    """The runs of one scenario folder of the version matrix."""
    return [row[0] for row in conn.execute(
        "SELECT DISTINCT s.run_id FROM sources s JOIN files f ON f.id = s.file_id WHERE f.directory = ? "
        "ORDER BY s.run_id", (str(folder.resolve()),))]


def test_every_version_of_the_matrix_is_a_row_of_the_readme():
    """tests/data/README.md's version table lists each folder of versions/ (a new version added by generate.py fails
    here until it has its row), and the matrix holds at least the three releases issue 65 compared."""
    import re

    listed = re.findall(r"^\| `versions/([^/`]+)/` \|", (VERSIONS.parent / "README.md").read_text(), re.M)
    assert listed == torch_versions()
    assert {"2.13.0", "2.14.1", "2.15.0"} <= set(listed)


@pytest.mark.parametrize("version", torch_versions())
def test_each_version_holds_the_scenarios_generate_runs_there(version, capsys):
    """Every scenario of generate.py is in each version's folder, but those it skips there (and says why): the sample
    set's in 2.13.0 (tests/data has them), one needing a newer torch (MIN_TORCH), those whose logs are too big."""
    expected = set(generate.chosen([], version, VERSIONS / version)) - TOO_BIG
    assert {folder.name for folder in scenario_dirs(version)} == expected
    said = capsys.readouterr().out
    assert all(f"{name}: skipped" in said for name in set(generate.SCENARIOS) - expected - TOO_BIG)


def test_a_scenario_needing_a_newer_torch_is_skipped_on_older_ones(monkeypatch, capsys):
    monkeypatch.setitem(generate.MIN_TORCH, "unbacked", "2.15.0")
    assert "unbacked" not in generate.chosen([], "2.14.1", VERSIONS / "2.14.1")
    assert "unbacked: skipped: needs torch >= 2.15.0, 2.14.1 is older" in capsys.readouterr().out
    assert "unbacked" in generate.chosen(["unbacked"], "2.15.0", VERSIONS / "2.15.0")


def test_the_sample_set_is_torch_2_13_s_alone():
    with pytest.raises(SystemExit, match="tests/data holds torch 2.13.0's logs"):
        generate.chosen([], "2.15.0", generate.HERE)


def test_each_folder_holds_the_logs_of_its_torch(versions_db):
    """The torch_version artifact of every log says the version of its folder (draft_export's own log has none:
    torch filters it out)."""
    conn = connect(versions_db)
    for folder in (folder for folder in VERSION_DIRS if folder.name != "draft_export"):
        versions = {row[0] for row in conn.execute(
            "SELECT DISTINCT s.torch_version FROM sources s JOIN files f ON f.id = s.file_id WHERE f.directory = ?",
            (str(folder.resolve()),))} - {None}
        assert versions and all(v.split("+")[0] == folder.parent.name for v in versions), (folder, versions)


def test_every_log_of_the_matrix_ingests_whole(versions_db):
    conn = connect(versions_db)
    assert conn.execute("SELECT count(*) FROM ingest_errors").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM envelopes WHERE md5_ok = 0").fetchone()[0] == 0
    for path, size, indexed in conn.execute(
            "SELECT f.path, f.size, (SELECT sum(envelope_bytes + payload_bytes) FROM envelopes e JOIN sources s "
            "ON s.id = e.source_id WHERE s.file_id = f.id) FROM files f"):
        assert indexed == size, path


# What tlindex shows today where issue 65 says it is wrong and tlparse 0.4.3 shows the same: (versions, scenario,
# why, SQL over the scenario's runs (:runs, a JSON list of run ids), the rows it gives today on each version).
IN_RUNS = "s.run_id IN (SELECT value FROM json_each(:runs))"
EXPORT_IN_RANKS = (
    "issue 65: from 2.15 rank 0's non-strict torch.export takes Dynamo frame id 0, so the ranks' compiles of the "
    "same `forward` and `loss` are numbered one apart (and 0/0 of rank 0 holds the export's records: status none, "
    "no compile); tlindex compares ranks by code object, not by these ids (tlparse --all-ranks-html compares ids)")
ISSUE_65_SHOWN: list[tuple[tuple[str, ...], str, str, str, list[tuple]]] = [
    (("2.15.0",), "export_in_ranks", EXPORT_IN_RANKS,
     f"SELECT s.rank, c.co_name, c.frame_id || '/' || c.frame_compile_id FROM compiles c "
     f"JOIN sources s ON s.id = c.source_id WHERE {IN_RUNS} AND c.frame_id IS NOT NULL ORDER BY 1, 3",
     [(0, None, "0/0"), (0, "forward", "1/0"), (0, "loss", "2/0"), (1, "forward", "0/0"), (1, "loss", "1/0")]),
]


@pytest.mark.parametrize("version, scenario, why, sql, rows", [
    pytest.param(version, scenario, why, sql, rows, id=f"{version}/{scenario}")
    for versions, scenario, why, sql, rows in ISSUE_65_SHOWN for version in versions])
def test_issue_65_still_shows(versions_db, version, scenario, why, sql, rows):
    conn = connect(versions_db)
    runs = run_of(conn, VERSIONS / version / scenario)
    assert [tuple(row) for row in conn.execute(sql, {"runs": str(runs)})] == rows, why


def test_the_same_program_numbers_both_ranks_alike_before_2_15(versions_db):
    """What export_in_ranks shows once issue 65 is fixed, as 2.13.0 and 2.14.1 show it already."""
    conn = connect(versions_db)
    for version in ("2.13.0", "2.14.1"):
        runs = run_of(conn, VERSIONS / version / "export_in_ranks")
        assert [tuple(row) for row in conn.execute(
            f"SELECT s.rank, c.co_name, c.frame_id || '/' || c.frame_compile_id FROM compiles c JOIN sources s "
            f"ON s.id = c.source_id WHERE {IN_RUNS} AND c.frame_id IS NOT NULL ORDER BY 1, 3", {"runs": str(runs)})] \
            == [(0, "forward", "0/0"), (0, "loss", "1/0"), (1, "forward", "0/0"), (1, "loss", "1/0")], version


def test_an_export_on_one_rank_shifts_its_ids_but_the_ranks_do_not_diverge(versions_db):
    """issue 65: on 2.15 the ranks' compiles of export_in_ranks are numbered one off (above); rank_divergence matches
    compiles by code object, so the ranks agree on 2.15 as on 2.14.1: no compile missing on a rank, no graph that
    differs, one group of ranks. The export's [0/0] of rank 0 holds no compilation and is not compared."""
    conn = connect(versions_db)
    for version in ("2.14.1", "2.15.0"):
        (run,) = run_of(conn, VERSIONS / version / "export_in_ranks")
        rows = [dict(row) for row in run_sql(conn, load_queries()["rank_divergence"].sql, {"run": run})]
        assert {row["finding"] for row in rows} <= {"group", "time"}, (version, rows)
        assert [row["ranks"] for row in rows if row["finding"] == "group"] == ["0, 1"], version


def test_the_census_reads_the_changes_docs_torch_versions_lists():
    """tests/data/envelope_census.py (which reads the logs without tlindex) finds what docs/torch_versions.md says."""
    import envelope_census

    def census(version, scenario):
        return envelope_census.census(envelope_census.folders(version)[scenario])

    old, new = census("2.14.1", "train_step"), census("2.15.0", "train_step")
    assert ("artifact", "runtime_wrapper_orchestration") in old and ("artifact", "runtime_wrapper_orchestration") not in new
    assert ("artifact", "aot_autograd_runtime_wrappers") in new and ("artifact", "aot_autograd_runtime_wrappers") not in old
    assert ("chromium", "B", "pass.post_grad_passes.slice_scatter_chunking") in set(new) - set(old)
    assert ("chromium", "B", "Scheduler.simple_overlap") in set(old) - set(census("2.13.0", "train_step"))
    assert {key for key in census("2.15.0", "export_contexts") if key[0] == "no dynamo_start"} == {
        ("no dynamo_start", "0/0"), ("no dynamo_start", "1/0")}
    assert not [key for key in census("2.14.1", "export_contexts") if key[0] == "no dynamo_start"]


@pytest.mark.parametrize("scenario", ["flex_attention", "unbacked"])
def test_a_diff_across_torch_versions_names_them_first_and_says_why_each_config_key_moved(versions_db, scenario):
    """Issue 65: the diff of one program run by torch 2.13.0 and 2.15.0 says the version changed before anything else,
    and each config key's cause is the one the raw logs give (test_config_diff reads them without tlindex):
    flex_attention compiles with Inductor, whose repros list the keys set, so the keys both torches have are
    defaults that moved; unbacked (aot_eager) logs no repro, so whether a run set them is unknown."""
    from collections import Counter

    from test_config_diff import expected_changes

    from tlindex.answers.diff import as_text, diff
    from tlindex.answers.trend import torch_change_lines, trend

    conn = connect(versions_db)
    old_folder, new_folder = VERSIONS / "2.13.0" / scenario, VERSIONS / "2.15.0" / scenario
    (old,), (new,) = run_of(conn, old_folder), run_of(conn, new_folder)
    result = diff(conn, str(old), str(new))
    assert list(result)[0] == "torch" and result["torch"]["changed"] == "version"
    first = as_text(result)[0]
    assert first.startswith("torch changed: 2.13.0") and " -> 2.15.0" in first, first
    (log_a,), (log_b,) = sorted(old_folder.glob("*.log")), sorted(new_folder.glob("*.log"))
    assert result["config"] == expected_changes(log_a, log_b)
    causes = Counter(change["cause"] for change in result["config"])
    assert causes["new_key"] and causes["gone_key"], causes
    assert (causes["default"] > 0, causes["unknown"] > 0) == ((True, False) if scenario == "flex_attention"
                                                            else (False, True)), causes
    rows = trend(conn, [str(old), str(new)]).rows  # oldest first by the logs' clocks (2.13.0's ran last here)
    assert [row["torch_changed_from"] for row in rows] == [None, rows[0]["torch_version"]]
    assert torch_change_lines(rows) == [f"torch changed at run {rows[1]['run_id']} {rows[1]['label']}: "
                                        f"{rows[0]['torch_version']} -> {rows[1]['torch_version']} (what moved there "
                                        f"may be torch's)"]


def oracle_runs(folder) -> list[list[oracle.Process]]:
    return oracle.runs_of(folder)


def ids(processes, test) -> set[tuple]:
    """(rank, compile id) of the compiles of the processes that `test` keeps (tests/oracle.py's reading)."""
    return {(p.rank, oracle.compile_id(c)) for p in processes for c in p.compiles if not c.anonymous and test(c)}


@pytest.mark.parametrize("folder", VERSION_DIRS, ids=lambda folder: f"{folder.parent.name}/{folder.name}")
def test_a_compile_id_no_compile_began_under_is_no_compile_and_never_missing(versions_db, folder):
    """issue 65: the ids of a log that have records but neither a dynamo_start nor a compilation_metrics (an
    export's or AOTInductor's compile context from torch 2.15, a strict export, compiled autograd's captured graph)
    are status none and counted as no compile; every compile that began has an end in these logs, so none is
    missing (the logs were written whole)."""
    conn = connect(versions_db)
    processes = [p for run in oracle_runs(folder) for p in run]
    contexts = ids(processes, lambda c: not c.counted)
    rows = conn.execute(
        f"SELECT c.rank, c.compile_id, c.status FROM compiles c JOIN sources s ON s.id = c.source_id "
        f"WHERE {IN_RUNS} AND c.compile_id != '-/-'", {"runs": str(run_of(conn, folder))}).fetchall()
    assert {(rank, cid) for rank, cid, status in rows if status == "none"} == contexts
    assert "missing" not in {status for *_, status in rows}
    counted = sum(c.counted for p in processes for c in p.compiles)  # (an id after a reset is a compile again)
    assert sum(run_health(conn, run)["compiles"] for run in run_of(conn, folder)) == counted


def test_the_export_scenarios_of_2_15_hold_compile_contexts_that_are_no_compiles(versions_db):
    """What the test above covers, seen: 2.15's export scenarios have such ids, and none of them is a compile."""
    conn = connect(versions_db)
    for scenario in ("export_contexts", "draft_export", "export", "export_in_ranks"):
        processes = [p for run in oracle_runs(VERSIONS / "2.15.0" / scenario) for p in run]
        assert ids(processes, lambda c: not c.counted), scenario
    (run,) = run_of(conn, VERSIONS / "2.15.0" / "export_contexts")
    assert run_health(conn, run)["compiles"] == 0  # a non-strict export, another, AOTInductor: no torch.compile


@pytest.mark.parametrize("version", torch_versions())
def test_a_warm_start_from_the_mega_cache_finished_its_compile_and_is_judged(versions_db, version):
    """issue 65: the warm process of mega_cache_warm logs no compilation_metrics; its compile loaded its guards from
    the cache (precompile_load_guards) and its whole-frame span ended: it is ok, counted, timed by that span, its
    bundled FX-graph hits are FX-graph hits, the gate judges it against the cold run, and the diff pairs their
    compiles."""
    conn = connect(versions_db)
    folder = VERSIONS / version / "mega_cache_warm"
    (cold_log,), (warm_log,) = oracle_runs(folder)  # two processes, one after the other: two runs
    assert cold_log.compiles and not any(c.metrics for c in warm_log.compiles)  # the warm one logs no metrics
    cold, warm = run_of(conn, folder)
    (started,) = [c for c in warm_log.compiles if c.started]
    assert "precompile_load_guards" in started.spans and "entire_frame_compile" in started.spans  # (read from the log)
    row = conn.execute("SELECT status, co_name FROM compiles WHERE run_id = ? AND compile_id = ?",
                       (warm, oracle.compile_id(started))).fetchone()
    assert row["status"] == "ok"
    health = run_health(conn, warm)
    expected = oracle.health([warm_log])
    assert health["compiles"] == expected["compiles"] == 1
    assert abs(health["compile_time_s"] - started.spans["entire_frame_compile"]) <= 0.0015
    bundled = [name for name, result in started.cache if name == "fx_graph_bundled" and result == "hit"]
    assert bundled and health["fx_graph_hits"] == expected["fx_graph_hits"] >= len(bundled)
    assert unjudgeable(conn, warm, cold) == []
    compared = diff(conn, str(cold), str(warm))
    assert compared["summary"]["matched"] == 1 and not compared["summary"]["only_a"] + compared["summary"]["only_b"]
    (pair,) = [c for c in compared["compiles"] if c["key"].get("compile") != "-/-"]
    assert pair["a"]["co_name"] == pair["b"]["co_name"] == row["co_name"]
