"""The vLLM page, the pass-by-pass pages and vLLM's findings, on real traces of a backend that logs what vLLM
logs (tests/data/vllm_two_models: two models compiled in one process, started cold then warm with one
piece changed). Expected values come from the raw log, read here without tlindex."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ENVELOPE_RE, connect, scenario_logs, scenario_run

from tlindex.answers.findings import findings
from tlindex.cli import cli

SNAPSHOT_NAMES = {"before_pre_grad_graph", "after_pre_grad_graph", "before_joint_graph", "after_joint_graph",
                  "before_post_grad_graph", "inductor_post_grad_graph"}
SNAPSHOT_KINDS = ("aot_inference_graph", "graph_dump", "inductor_post_grad_graph")
DYNAMO_OWN = ("dynamo_guards", "dynamo_cpp_guards_str", "compilation_metrics", "dynamo_start")


def raw_records(log: Path) -> list[tuple[str, str | None, str]]:
    """(kind, name, payload text) of every envelope of a log, in order."""
    records: list[list] = []
    for line in log.read_text().split("\n"):
        if line.startswith("\t"):
            records[-1][2].append(line[1:])
            continue
        match = ENVELOPE_RE.match(line.encode())
        if match:
            envelope = json.loads(match.group(1))
            kind = next(k for k in envelope if k not in ("rank", "frame_id", "frame_compile_id", "attempt",
                                                         "compiled_autograd_id", "has_payload", "stack"))
            name = envelope[kind].get("name") if isinstance(envelope[kind], dict) else None
            records.append([kind, name, []])
    return [(kind, name, "\n".join(lines)) for kind, name, lines in records]


def raw_pieces(log: Path) -> list[dict]:
    """Each piece compile of a log: its start record, compile call, snapshots and cache results."""
    pieces, calls, current = [], 0, None
    for kind, name, text in raw_records(log):
        if name == "vllm_compilation_config":
            calls, current = calls + 1, None
        elif name == "vllm_piecewise_compile_start":
            current = {**json.loads(text), "call": calls, "snapshots": [], "cache": [], "output_code": False}
            pieces.append(current)
        elif kind in DYNAMO_OWN:
            current = None
        elif current is not None:
            if (kind == "artifact" and name in SNAPSHOT_NAMES) or kind in SNAPSHOT_KINDS:
                current["snapshots"].append((name or kind, text))
            current["output_code"] |= kind == "inductor_output_code"
            if name and re.fullmatch(r"(fx_graph|aotautograd)_cache_(hit|miss)", name):
                current["cache"].append(name.rsplit("_", 1)[1])
    return pieces


@pytest.fixture(scope="module")
def runs(fixtures_db) -> dict[str, int]:
    """The cold and the warm run of vllm_two_models, by their log."""
    conn = connect(fixtures_db)
    found = {}
    for run in scenario_run(conn, "vllm_two_models"):
        (name,) = conn.execute("SELECT f.name FROM files f JOIN sources s ON s.file_id = f.id WHERE s.run_id = ?",
                               (run,)).fetchone()
        found[name] = run
    logs = scenario_logs("vllm_two_models")
    assert sorted(found) == sorted(log.name for log in logs)
    return found


def test_two_compile_calls_share_their_common_settings_once(ds, runs):
    import asyncio

    for log in scenario_logs("vllm_two_models"):
        configs = [json.loads(text) for kind, name, text in raw_records(log) if name == "vllm_compilation_config"]
        assert len(configs) == 2
        shared = {k: v for k, v in configs[0].items() if configs[1].get(k, object()) == v}
        assert shared and set(configs[0]) - set(shared) == {"model", "compile_sizes"}
        response = asyncio.run(ds.client.get(f"/traces/-/tlindex/run/{runs[log.name]}/vllm.json"))
        assert response.status_code == 200
        page = response.json()
        assert page["shared"] == shared
        assert [set(call["own"]) for call in page["calls"]] == [{"model", "compile_sizes"}] * 2
        assert [call["own"]["model"] for call in page["calls"]] == [c["model"] for c in configs]
        # every piece compile of the log, in its call and range (dynamic range first, then sizes)
        raw = raw_pieces(log)
        shown = [(call["number"], piece["submod_name"], piece["compile_range_start"], piece["compile_range_end"])
                 for call in page["calls"] for r in call["ranges"] for piece in r["pieces"]]
        expected = sorted(((p["call"], p["submod_name"], p["compile_range_start"], p["compile_range_end"]) for p in raw),
                          key=lambda t: (t[0], t[2] == t[3], t[2], t[3]))
        assert sorted(shown, key=lambda t: (t[0], t[2] == t[3], t[2], t[3])) == expected
        assert len(shown) == len(raw) == 15


def test_the_warm_start_names_the_changed_piece_and_the_cold_start_none(fixtures_db, runs):
    conn = connect(fixtures_db)
    for log in scenario_logs("vllm_two_models"):
        raw = raw_pieces(log)
        expected = []
        for piece in raw:  # missed where every other piece of its call and range hit
            others = [p for p in raw if p is not piece and p["call"] == piece["call"]
                      and (p["compile_range_start"], p["compile_range_end"]) ==
                      (piece["compile_range_start"], piece["compile_range_end"])]
            if "miss" in piece["cache"] and others and all("miss" not in p["cache"] and p["cache"] for p in others):
                expected.append(piece)
        found = {f.kind: f for f in findings(conn, runs[log.name])}
        if expected:
            finding = found["vllm_cache_miss"]
            assert finding.count == len(expected) and finding.severity == "warning"
            assert expected[0]["submod_name"] in finding.text and f"compile call {expected[0]['call']}" in finding.text
        else:
            assert "vllm_cache_miss" not in found
        assert "vllm_slowest_range" in found
    # the warm start (CHANGE_PIECE) is the one with the finding
    warm = max(scenario_logs("vllm_two_models"), key=lambda log: sum("hit" in p["cache"] for p in raw_pieces(log)))
    assert "vllm_cache_miss" in {f.kind for f in findings(conn, runs[warm.name])}


def test_each_piece_shows_its_graphs_in_order_against_the_one_before(ds, fixtures_db, runs):
    import asyncio

    conn = connect(fixtures_db)
    log = scenario_logs("vllm_two_models")[0]
    raw = raw_pieces(log)
    pieces = [row[0] for row in conn.execute(
        "SELECT p.id FROM piece_compiles p JOIN compiles c ON c.id = p.compile WHERE c.run_id = ? ORDER BY p.id",
        (runs[log.name],))]
    assert len(pieces) == len(raw)
    for piece, expected in zip(pieces, raw):
        response = asyncio.run(ds.client.get(f"/traces/-/tlindex/piece/{piece}/passes.json"))
        assert response.status_code == 200
        (way,) = response.json()["ways"]
        snapshots = [s for s in way if s["step"]["kind"] != "inductor_output_code"]
        assert [s["step"]["name"] for s in snapshots] == [name for name, _ in expected["snapshots"]]
        assert (way[-1]["step"]["kind"] == "inductor_output_code") == expected["output_code"]
        for (name, text), (_, before), shown in zip(expected["snapshots"][1:], expected["snapshots"], snapshots[1:]):
            assert shown["step"]["compared"]
            assert (shown["changed"] == 0) == (text == before), name
        html = asyncio.run(ds.client.get(f"/traces/-/tlindex/piece/{piece}/passes")).text
        assert ("vllm_post_grad.0.NoopFusion" in html) == any(n.startswith("vllm_post_grad.") for n, _ in expected["snapshots"])
        assert ('class="sidebyside' in html) == any(s["changed"] for s in snapshots)


def test_the_run_and_compile_pages_lead_to_the_vllm_and_passes_pages(ds, runs):
    import asyncio

    run = next(iter(runs.values()))
    page = asyncio.run(ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    assert f'href="/traces/-/tlindex/run/{run}/vllm"' in page
    vllm = asyncio.run(ds.client.get(f"/traces/-/tlindex/run/{run}/vllm")).text
    compile_row = int(re.search(r'href="/traces/-/tlindex/compile/(\d+)"', vllm).group(1))
    compile_page = asyncio.run(ds.client.get(f"/traces/-/tlindex/compile/{compile_row}")).text
    assert f'/traces/-/tlindex/compile/{compile_row}/passes"' in compile_page
    assert f'/traces/-/tlindex/run/{run}/vllm"' in compile_page
    passes = asyncio.run(ds.client.get(f"/traces/-/tlindex/compile/{compile_row}/passes")).text
    assert "vllm_piecewise_split_graph" in passes and "/-/tlindex/piece/" in passes
    # a run without vLLM records has no vLLM page
    assert asyncio.run(ds.client.get(f"/traces/-/tlindex/run/{max(runs.values()) + 1000}/vllm")).status_code == 404


def test_the_report_writes_the_vllm_and_passes_pages(fixtures_db, runs, tmp_path):
    run = next(iter(runs.values()))
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "--run", str(run), "-o", str(out), "--silent"])
    assert result.exit_code == 0, result.output
    assert 'href="vllm.html"' in (out / "index.html").read_text()
    vllm = (out / "vllm.html").read_text()
    piece_links = re.findall(r'href="(compiles/\d+-piece-\d+-passes\.html)"', vllm)
    assert len(set(piece_links)) == 15 and all((out / link).is_file() for link in piece_links)
    passes = re.findall(r'href="(compiles/\d+-passes\.html)"', vllm)
    assert passes and all((out / link).is_file() for link in passes)
    assert "/-/tlindex/" not in vllm


def test_piece_spans_and_records_are_found_by_seeks_not_by_walking_the_process(fixtures_db):
    """Each piece's end and records are read through an index seek or an id range within its own process: walking
    the process's records per piece grew with pieces x records (46 s for one page of a 1 GB vLLM log), and a seek
    by kind alone walked every later run's records of that kind (0.5 s for an early run of 3,000)."""
    from tlindex.answers.queries import load_queries

    conn = connect(fixtures_db)
    view_plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN SELECT * FROM piece_compile_spans")]
    boundaries = [step for step in view_plan if step.startswith("SEARCH b ")]
    kinds = [s for s in boundaries
             if "envelopes_source_kind (source_id=? AND kind=? AND name=? AND rowid>?)" in s]
    attempts = [s for s in boundaries if "envelopes_compile (compile=? AND rowid>? AND rowid<?)" in s]
    assert len(set(kinds)) == 1 and len(kinds) >= 6 and len(attempts) == 1  # the next attempt: within the piece
    assert len(kinds) + len(attempts) == len(boundaries)
    assert any("SEARCH c USING COVERING INDEX envelopes_source_kind (source_id=? AND kind=? AND name=? AND rowid<?)"
               in step for step in view_plan)  # the compile calls before it: its process's only
    query_plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + load_queries()["vllm_pieces"].sql, {"run": 1})]
    ranges = [step for step in query_plan if "(envelope_id>? AND envelope_id<?)" in step
              or "(begin_envelope>? AND begin_envelope<?)" in step]
    assert len(ranges) == 3  # its artifacts, cache lookups and spans, by the piece's id range
    # (the runs derived, whose stored rows are read when every run is asked: a WHERE on the parameter alone, tested
    # once before the loop, skips it for one run)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} - {
        "runs", "_tlindex_migrations", "derived_runs"}
    aliases = {"e", "a", "x", "c", "s"}  # the query's aliases of envelopes, artifacts, cache and chromium events, sources
    assert not [step for step in query_plan if step.startswith("SCAN") and step.split()[1] in tables | aliases]


# --- vLLM attempts (tests/data/vllm_restart: Dynamo restarts [0/1] after vLLM's backend began) ---------------

def raw_attempts(log: Path) -> list[tuple[int, str | None]]:
    """(attempt, name) of every record of compile 0/1, in order, read from the raw log."""
    found = []
    for line in log.read_text().split("\n"):
        match = ENVELOPE_RE.match(line.encode())
        if match:
            envelope = json.loads(match.group(1))
            if (envelope.get("frame_id"), envelope.get("frame_compile_id")) == (0, 1):
                kind = next(iter(envelope))
                name = envelope[kind].get("name") if isinstance(envelope[kind], dict) else None
                found.append((envelope.get("attempt"), name))
    return found


@pytest.mark.asyncio
async def test_an_abandoned_vllm_attempt_is_shown_as_one_and_counted_in_no_total(ds, traces_db):
    (log,) = scenario_logs("vllm_restart")
    raw = raw_attempts(log)
    aborted_starts = [a for a, name in raw if name == "vllm_piecewise_compile_start" and a == 0]
    compiled_starts = [a for a, name in raw if name == "vllm_piecewise_compile_start" and a == 1]
    assert len(aborted_starts) == 1 and len(compiled_starts) == 9  # what the log holds
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "vllm_restart")
    data = (await ds.client.get(f"/traces/-/tlindex/run/{run}/vllm.json")).json()
    abandoned = [c for c in data["calls"] if c["abandoned"] is not None]
    assert len(abandoned) == 1 and abandoned[0]["abandoned"] == "TensorifyScalarRestartAnalysis"
    assert abandoned[0]["attempt"] == 0 and abandoned[0]["attempts"] == 2
    assert sum(len(r["pieces"]) for r in abandoned[0]["ranges"]) == 1
    assert all(p["abandoned"] for r in abandoned[0]["ranges"] for p in r["pieces"])
    after = [c for c in data["calls"] if c["compiles"] == abandoned[0]["compiles"] and c["abandoned"] is None]
    assert len(after) == 1 and after[0]["attempt"] == 1
    assert sum(len(r["pieces"]) for r in after[0]["ranges"]) == len(compiled_starts)
    page = (await ds.client.get(f"/traces/-/tlindex/run/{run}/vllm")).text
    assert "abandoned" in page and "TensorifyScalarRestartAnalysis" in page and "1 started, none compiled" in page
    # the compile page counts the compiled pieces only (it said 10)
    compile_row = abandoned[0]["compiles"][0][0]
    compile_page = (await ds.client.get(f"/traces/-/tlindex/compile/{compile_row}")).text
    assert f"{len(compiled_starts)} piece compiles" in compile_page
    found = {f.kind: f for f in findings(conn, run)}
    assert "TensorifyScalarRestartAnalysis" in found["vllm_abandoned_call"].text
    assert found["vllm_slowest_range"].count == 3  # a range of the compiled call: 3 pieces, none cut short


@pytest.mark.asyncio
async def test_the_cut_piece_s_passes_stop_where_the_next_attempt_begins(ds, traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "vllm_restart")
    (piece,) = conn.execute("SELECT p.id FROM piece_compile_spans p JOIN compiles c ON c.id = p.compile "
                            "WHERE c.run_id = ? AND p.abandoned", (run,)).fetchone()
    data = (await ds.client.get(f"/traces/-/tlindex/piece/{piece}/passes.json")).json()
    steps = [entry["step"] for way in data["ways"] for entry in way]
    assert steps and {step["attempt"] for step in steps} == {0}  # no graph of the next attempt
    assert "dynamo_output_graph" not in {step["kind"] for step in steps}
    (rows,) = [r for r in [conn.execute("SELECT count(*) FROM envelopes e, piece_compile_spans p WHERE p.id = ? "
                                       "AND e.id > p.envelope_id AND e.id < p.end_envelope AND e.attempt != 0",
                                       (piece,)).fetchone()]]
    assert rows[0] == 0


@pytest.mark.asyncio
async def test_a_run_with_only_vllm_pass_dumps_has_a_vllm_page_with_its_passes(ds, traces_db):
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "vllm_passes_only")
    response = await ds.client.get(f"/traces/-/tlindex/run/{run}/vllm")
    assert response.status_code == 200  # it was a 404
    data = (await ds.client.get(f"/traces/-/tlindex/run/{run}/vllm.json")).json()
    assert data["calls"] == [] and len(data["pass_compiles"]) == 1
    passes = (await ds.client.get(f"/traces/-/tlindex/compile/{data['pass_compiles'][0]['compile']}/passes")).text
    assert "vllm_post_grad.0.NoopFusion" in passes


def test_two_compiles_of_the_same_graphs_show_the_same_passes(fixtures_db):
    """Every rank of a job logs the same graphs: the pass-by-pass page compares each pair of snapshots once per
    process (by their payloads' hashes) and shows every compile the same comparison as it would alone."""
    from conftest import connect

    import tlindex.pages.passes as passes
    from tlindex.pages.rows import Args

    conn = connect(fixtures_db)
    rows = conn.execute("""SELECT a.compile, group_concat(a.payload) FROM artifacts a WHERE a.payload IS NOT NULL
                           AND a.kind LIKE '%graph' GROUP BY a.compile ORDER BY a.compile""").fetchall()
    by_graphs: dict[str, list[int]] = {}
    for compile, payloads in rows:
        by_graphs.setdefault(payloads, []).append(compile)
    twins = next(compiles for compiles in by_graphs.values() if len(compiles) > 1)  # the ranks of a job
    passes.COMPARED.clear()
    first = passes.passes_data(conn, Args(), compile=twins[0])
    passes.COMPARED.clear()
    alone = passes.passes_data(conn, Args(), compile=twins[1])
    again = passes.passes_data(conn, Args(), compile=twins[1])  # its pairs compared already
    strip = lambda data: [[{k: v for k, v in s.items() if k != "step"} for s in way] for way in data["ways"]]  # noqa: E731
    assert strip(again) == strip(alone) == strip(first) and any(s["hunks"] for way in alone["ways"] for s in way)
