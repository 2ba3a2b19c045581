"""The canned queries answer their questions, checked against the logs themselves."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, raw_envelopes, scenario_logs, scenario_run

from tlindex.answers.queries import load_queries, render_docs, run_sql
from tlindex.cli import cli
from tlindex.store.db import apply_schema

ROOT = Path(__file__).resolve().parents[1]
QUERIES = load_queries()


def rows(db, name: str, **params) -> list[dict]:
    cursor = run_sql(db, QUERIES[name].sql, {k: str(v) for k, v in params.items()})
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor]


def raw_records(scenario: str):
    """(envelope dict, payload bytes or None, envelope line bytes, payload lines bytes), read directly."""
    for path in scenario_logs(scenario):
        current = None
        for line in open(path, "rb"):
            if line.startswith(b"\t"):
                current[1].append(line[1:].rstrip(b"\n"))
                current[3] += len(line)
                continue
            if current:
                yield current[0], (b"\n".join(current[1]) if "has_payload" in current[0] else None), current[2], current[3]
            envelope = json.loads(line.split(b"] ", 1)[1])
            current = [envelope, [], len(line), 0]
        if current:
            yield current[0], (b"\n".join(current[1]) if "has_payload" in current[0] else None), current[2], current[3]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_query_is_valid_sql_on_an_empty_schema_and_documented(name):
    conn = sqlite3.connect(":memory:")
    apply_schema(conn)
    assert run_sql(conn, QUERIES[name].sql).fetchall() == []
    query = QUERIES[name]
    assert query.title and query.description
    assert f"## {name}" in (ROOT / "docs" / "queries.md").read_text()


def test_docs_queries_md_is_generated_from_the_query_headers():
    assert (ROOT / "docs" / "queries.md").read_text() == render_docs(), \
        "run: python -m tlindex.answers.queries > docs/queries.md"


def test_recompile_reasons_count_each_recompile_once_by_its_newest_entrys_guard(db):
    (run,) = scenario_run(db, "recompiles")
    found = rows(db, "recompile_reasons", run=run)
    raw = []
    for envelope, payload, *_ in raw_records("recompiles"):
        if envelope.get("artifact", {}).get("name") == "recompile_reasons":
            text = payload.decode()
            raw.append((json.loads(text) if text.startswith("[") else [text])[0])  # newest cache entry first
    # each recompile once, under the first guard torch lists (the older entries' failed for older changes)
    assert sum(r["compiles"] for r in found) == len(raw)
    assert {r["failed_guard"] for r in found} <= {reason.split(": ", 1)[1].split("#")[0].strip() for reason in raw}
    for r in found:  # the count agrees with the list beside it: every id once, or ×N for N compiles of it
        listed = [item.split(" ×") for item in r["compile_ids"].split(", ")]
        assert sum(int(item[1]) if len(item) > 1 else 1 for item in listed) == r["compiles"]
        assert (r["co_name"], r["recompiles"], r["hit_limit"]) in {("f", 3, 0), ("g", 4, 1)}
    groups = {(r["co_name"], r["input"], r["guard"]): r["compiles"] for r in found}
    assert groups == {("f", "L['x'].size()[0]", "size"): 1, ("f", "L['x']", "dtype"): 1, ("f", "L['n']", "value"): 1,
                      ("g", "L['x']", "dtype"): 4}


def test_log_volume_adds_up_to_the_log_bytes(db):
    total = sum(r["bytes"] for r in rows(db, "log_volume", by="run", limit=1000))
    sizes = sum(p.stat().st_size for p in DATA.glob("*/*.log"))
    errors = db.execute("SELECT coalesce(sum(bytes), 0) FROM ingest_errors").fetchone()[0]
    assert total == sizes - errors
    kinds = rows(db, "log_volume", limit=1000)
    assert sum(r["bytes"] for r in kinds) == total
    assert abs(sum(r["share_percent"] for r in kinds) - 100) < 0.5


def test_volume_counts_every_envelope_of_every_run_by_kind(db):
    """The run page's record counts per kind read `volume` (counted by the workers), not the envelopes."""
    counted = Counter({(run, kind): n for run, kind, n in db.execute(
        "SELECT s.run_id, v.kind, sum(v.records) FROM volume v JOIN sources s ON s.id = v.source_id GROUP BY 1, 2")})
    actual = Counter({(run, kind): n for run, kind, n in db.execute(
        "SELECT s.run_id, e.kind, count(*) FROM envelopes e JOIN sources s ON s.id = e.source_id GROUP BY 1, 2")})
    assert counted == actual and len(actual) > 100


def test_log_volume_names_the_compile_that_emitted_the_most_bytes(db):
    (run,) = scenario_run(db, "train_step")
    (top,) = rows(db, "log_volume", by="compile", run=run, limit=1)
    per_compile = Counter()
    for envelope, _, envelope_bytes, payload_bytes in raw_records("train_step"):
        if "frame_id" in envelope:
            key = f"{envelope['frame_id']}/{envelope['frame_compile_id']}"
            per_compile[key] += envelope_bytes + payload_bytes
    compile_id, most = per_compile.most_common(1)[0]
    assert (top["compile_id"], top["bytes"]) == (compile_id, most)


def test_compile_time_phases_fit_in_each_compile(db):
    runs = [row[0] for row in db.execute("SELECT id FROM runs ORDER BY id")]
    every = [r for run in runs for r in rows(db, "compile_time", run=run, limit=1000)]  # it needs a run
    # every compile, each once: the rows of compiles that began (not [-/-], not an export's compile context)
    assert len(every) == len({r["compile"] for r in every}) == db.execute(
        "SELECT count(*) FROM compiles WHERE compile_id != '-/-' AND (dynamo_start IS NOT NULL OR id IN "
        "(SELECT compile FROM metrics WHERE kind = 'compilation_metrics'))").fetchone()[0]
    assert rows(db, "compile_time", limit=1000) == []  # without one: nothing (tlindex query says it needs one)
    for r in every:
        if r["total_s"] is None:
            continue
        assert abs(r["total_s"] - (r["frames_s"] or 0) - (r["backward_s"] or 0)) <= 0.0011, r
        parts = sum(r[k] or 0 for k in ("tracing_s", "guards_s", "backend_s"))
        assert parts <= (r["frames_s"] or 0) + 0.002, r
        nested = [r[k] or 0 for k in ("aot_s", "inductor_s", "codegen_s")]
        assert max(nested) <= (r["backend_s"] or 0) + 0.002, r
        assert nested[2] <= nested[1] + 0.002  # code generation is part of inductor
    # slowest first: ordered by the compile time, the frame's and its backward's
    found = next(found for found in (rows(db, "compile_time", run=run, limit=1000) for run in runs)
                 if len(found) > 1 and any(r["backward_s"] for r in found))
    times = [r["total_s"] or 0 for r in found]
    assert times == sorted(times, reverse=True) and times[0] > times[-1]


def test_graph_breaks_lists_each_break_once_with_its_count(db):
    (run,) = scenario_run(db, "graph_breaks")
    found = rows(db, "graph_breaks", run=run)
    assert len({(r["reason"], r["location"]) for r in found}) == len(found)
    raw = Counter()
    for envelope, payload, *_ in raw_records("graph_breaks"):
        if envelope.get("artifact", {}).get("name") == "dynamo_graph_break_reason":
            raw[payload.decode().split("\n", 1)[0].removeprefix("Graph break in user code at ")] += 1
    assert Counter({r["location"]: r["times"] for r in found}) == raw
    assert max(r["times"] for r in found) == 3  # the print reached from three frames


def test_failures_count_each_failure_type(db):
    (run,) = scenario_run(db, "compile_errors")
    found = rows(db, "failures", run=run)
    raw = Counter(e["compilation_metrics"]["fail_type"] for e in raw_envelopes(scenario_logs("compile_errors"))
                  if "compilation_metrics" in e and e["compilation_metrics"].get("fail_type"))
    got = Counter()
    for r in found:
        if r["kind"] == "failure":
            got[r["type"]] += r["times"]
    assert got == raw == Counter({"Unsupported": 1, "BackendCompilerFailed": 2})


def test_failures_name_the_recompile_limit_apart_from_failed_compiles(db):
    (run,) = scenario_run(db, "recompiles")
    limit = [e["compilation_metrics"] for e in raw_envelopes(scenario_logs("recompiles"))
             if "compilation_metrics" in e and (e["compilation_metrics"].get("fail_reason") or "").startswith(
                 "Dynamo recompile limit exceeded")]
    found = [r for r in rows(db, "failures", run=run) if r["kind"] in ("failure", "recompile_limit")]
    assert [(r["kind"], r["times"]) for r in found] == [("recompile_limit", len(limit))] and len(limit) == 1


def test_an_export_failure_without_compile_id_is_a_failure_of_compile_minus_minus(db):
    """torch.export's compilation_metrics has compile_id null: it belongs to the process's [-/-]."""
    (run,) = scenario_run(db, "export")
    raw = [e["compilation_metrics"] for e in raw_envelopes(scenario_logs("export"))
           if "compilation_metrics" in e and e["compilation_metrics"].get("fail_type")]
    assert [m["compile_id"] for m in raw] == [None]
    (found,) = [r for r in rows(db, "failures", run=run) if r["kind"] == "failure"]
    assert (found["type"], found["compile_ids"]) == ("ConstraintViolationError", "-/-")
    assert found["reason"] == raw[0]["fail_reason"]
    (status,) = db.execute("SELECT status FROM compiles WHERE run_id = ? AND compile_id = '-/-'", (run,)).fetchone()
    assert status == "error"


def test_cache_counts_hits_and_misses_per_run(db):
    runs = scenario_run(db, "cache")
    found = {(r["run_id"], r["cache"]): r for r in rows(db, "cache")}
    logs = sorted(scenario_logs("cache"), key=lambda p: p.read_bytes()[:30])  # by first timestamp
    for run, log in zip(runs, logs):
        names = Counter(e["artifact"]["name"] for e in raw_envelopes([log]) if "artifact" in e)
        for cache in ("fx_graph", "aotautograd"):
            row = found[(run, cache)]
            assert (row["hits"], row["misses"]) == (names[f"{cache}_cache_hit"], names[f"{cache}_cache_miss"])


def test_rank_divergence_shows_the_rank_that_recompiled_alone(db):
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    missing = [r for r in rows(db, "rank_divergence", run=run) if r["finding"] == "missing_compile"]
    assert missing and all(r["ranks"] == "1" for r in missing)
    (symmetric,) = scenario_run(db, "ddp_2ranks")
    assert not [r for r in rows(db, "rank_divergence", run=symmetric) if r["finding"] not in ("time", "group")]
    assert [r["ranks"] for r in rows(db, "rank_divergence", run=symmetric) if r["finding"] == "group"] == ["0, 1"]


def test_guards_diff_shows_what_changed_between_recompiles(db):
    (run,) = scenario_run(db, "recompiles")
    (first,) = db.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '0/0'", (run,)).fetchone()
    found = rows(db, "guards_diff", compile=first)
    assert {r["before"] for r in found} == {"0/0"} and {r["after"] for r in found} == {"0/1"}
    only_before = [r["text"] for r in found if r["change"] == "only in 0/0"]
    assert any("size=[4]" in text for text in only_before)  # the static shape guard went away


def test_biggest_artifacts_starts_with_the_largest_payload(db):
    (run,) = scenario_run(db, "train_step")
    (top,) = rows(db, "biggest_artifacts", run=run, limit=1)
    largest = max(len(payload) for envelope, payload, *_ in raw_records("train_step")
                  if payload is not None and "chromium_event" not in envelope)
    assert top["size"] == largest


def test_dynamic_shapes_lists_every_symbol(db):
    (run,) = scenario_run(db, "dynamic")
    found = rows(db, "dynamic_shapes", run=run)
    raw = raw_envelopes(scenario_logs("dynamic"))
    assert sum(r["what"] == "symbol" for r in found) == sum(
        1 for e in raw if next(iter(e)) in ("create_symbol", "create_unbacked_symbol"))
    assert sum(r["what"] == "specialization" for r in found) == sum(
        1 for e in raw if "symbolic_shape_specialization" in e)


def test_export_issues_lists_what_the_draft_export_found(db):
    """Every issue record of the draft export log (read without tlindex), with its user frame."""
    (log,) = scenario_logs("draft_export")
    strings, expected, program_line = {}, [], None
    with open(log, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if line.startswith("\t") or "] {" not in line:
                continue
            envelope = json.loads(line.split("] ", 1)[1])
            kind = next(iter(envelope))
            meta = envelope[kind]
            if kind == "str":
                strings[meta[1]] = meta[0]
            elif kind == "exported_program":
                program_line = number
            elif kind in ("propagate_real_tensors_provenance", "missing_fake_kernel", "mismatched_fake_kernel") or \
                    (kind == "guard_added" and meta.get("prefix") == "eval"):
                frame = (meta.get("user_stack") or [None])[-1]
                expected.append((number, meta.get("expr") or meta.get("op"),
                                 frame and f"{strings[frame['filename']]}:{frame['line']} in {frame['name']}"))
    assert len(expected) == 4 and program_line > expected[-1][0]  # the generator asserts 5 reported failures
    (run,) = scenario_run(db, "draft_export")
    rows = [dict(r) for r in run_sql(db, load_queries()["export_issues"].sql, {"run": run})]
    assert [(r["line"], r["subject"], r["user_frame"]) for r in rows] == expected
    assert [r["issue"] for r in rows] == ["data-dependent error", "guard evaluated", "missing fake kernel",
                                          "mismatched fake kernel"]
    (program,) = db.execute("SELECT a.id FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id "
                            "WHERE e.kind = 'exported_program' AND e.line = ? AND e.source_id IN "
                            "(SELECT id FROM sources WHERE run_id = ?)", (program_line, run)).fetchone()
    assert {r["artifact"] for r in rows} == {program}
    assert "mismatch between fake value" in rows[-1]["detail"]


def test_cli_query_formats(fixtures_db):
    runner = CliRunner()
    base = ["query", "cache", "--db", str(fixtures_db)]
    as_json = json.loads(runner.invoke(cli, base).output)
    assert as_json and {"run_id", "rank", "cache", "hits"} <= set(as_json[0])
    nl = runner.invoke(cli, base + ["--nl"]).output.splitlines()
    assert [json.loads(line) for line in nl] == as_json
    csv_lines = runner.invoke(cli, base + ["--csv"]).output.splitlines()
    assert csv_lines[0].startswith("run_id,rank,cache,hits") and len(csv_lines) == len(as_json) + 1
    table = runner.invoke(cli, ["query", "graph_breaks", "--db", str(fixtures_db), "-t"]).output
    assert "…" in table and max(len(line) for line in table.splitlines()) < 400
    result = runner.invoke(cli, ["query", "log_volume", "-p", "by", "rank", "--db", str(fixtures_db)])
    assert result.exit_code == 0 and json.loads(result.output)
    result = runner.invoke(cli, ["query", "select nope", "--db", str(fixtures_db)])
    assert result.exit_code == 1 and "SQL error" in result.output


def test_cli_queries_lists_titles_and_params():
    output = CliRunner().invoke(cli, ["queries"]).output
    for query in QUERIES.values():
        assert query.name in output and query.title in output
    assert ":by :run :rank :limit" in output


def test_no_query_is_named_like_a_table():
    """Datasette 1.0 serves a table, not a canned query, when both have one name."""
    conn = sqlite3.connect(":memory:")
    apply_schema(conn)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not tables & set(QUERIES)


def test_cli_query_reads_and_never_writes_a_file(fixtures_db, tmp_path):
    """Read-only means no file written: no VACUUM INTO, no ATTACH, no writes, every canned query still runs."""
    runner = CliRunner()
    before = fixtures_db.read_bytes()
    for sql in [f"vacuum into '{tmp_path / 'copy.db'}'", f"attach database '{tmp_path / 'new.db'}' as e",
                "delete from runs", "create table x (a)", "pragma journal_mode=delete", "begin immediate",
                "update sqlite_master set sql = 1", "pragma writable_schema = 1"]:
        result = runner.invoke(cli, ["query", sql, "--db", str(fixtures_db)])
        assert result.exit_code == 1 and "SQL error" in result.output and "Traceback" not in result.output, sql
    assert list(tmp_path.iterdir()) == [] and fixtures_db.read_bytes() == before
    ok = runner.invoke(cli, ["query", "select count(*) as n from compiles", "--db", str(fixtures_db)])
    assert ok.exit_code == 0 and '"n"' in ok.output
    for name, query in load_queries().items():
        needs = ["-p", query.needs[-1], "1"] if query.needs else []  # guards_diff: a compile or a run
        assert runner.invoke(cli, ["query", name, "--db", str(fixtures_db), *needs]).exit_code == 0, name


def test_query_rows_that_name_one_compile_carry_its_row_id_so_pages_link_it(db):
    """Datasette links a compile_id cell to the compile page when its row has the compile's id."""
    across_ranks = {"rank_divergence"}  # a compile id compared across ranks: no one compile to link
    for name, query in load_queries().items():
        cursor = run_sql(db, query.sql, {})
        columns = [d[0] for d in cursor.description]
        if "compile_id" in columns and name not in across_ranks:
            assert "compile" in columns, name
            row = next((dict(zip(columns, r)) for r in cursor if r[columns.index("compile")] is not None), None)
            if row is not None:
                (compile_id,) = db.execute("SELECT compile_id FROM compiles WHERE id = ?", (row["compile"],)).fetchone()
                assert compile_id == row["compile_id"], name


def test_a_query_that_cannot_be_bounded_without_an_argument_asks_for_it(fixtures_db):
    """guards_diff of every recompile of a database of many runs is too much at once: it needs a compile or a run
    (one line, exit 2), and a run's answer is the recompiles of that run."""
    result = CliRunner().invoke(cli, ["query", "guards_diff", "--db", str(fixtures_db)])
    assert result.exit_code == 2 and "needs -p compile ... or -p run ..." in result.output
    assert "Traceback" not in result.output
    conn = sqlite3.connect(fixtures_db)
    runs = [run for (run,) in conn.execute("SELECT DISTINCT run_id FROM compiles WHERE frame_compile_id > 0")]
    assert runs
    for run in runs:
        found = rows(conn, "guards_diff", run=run)
        assert all(row["run_id"] == run for row in found)
    assert any(rows(conn, "guards_diff", run=run) for run in runs)
