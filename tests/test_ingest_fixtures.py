"""What the ingest finds in the real torch 2.13 logs of tests/data, checked against the logs."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import DATA, raw_envelopes, scenario_dirs, scenario_logs, scenario_run


def program_line(scenario: str, text: str) -> int:
    """Line number of `text` in the program tests/data/generate.py runs for a scenario."""
    import generate

    program = generate.program(scenario)
    return next(n for n, line in enumerate(program.splitlines(), 1) if text in line)


def test_every_envelope_line_is_one_envelope_row(db):
    for scenario in [folder.name for folder in scenario_dirs()]:
        expected = len(raw_envelopes(scenario_logs(scenario)))
        (found,) = db.execute(
            "SELECT count(*) FROM envelopes e JOIN sources s ON s.id = e.source_id "
            "JOIN files f ON f.id = s.file_id WHERE f.directory LIKE ?", (f"%/{scenario}",)).fetchone()
        assert found == expected, scenario
    assert db.execute("SELECT count(*) FROM ingest_errors").fetchone()[0] == 0


def test_every_byte_of_every_log_is_accounted_for(db):
    for row in db.execute("SELECT id, path, size FROM files"):
        (indexed,) = db.execute(
            "SELECT sum(envelope_bytes + payload_bytes) FROM envelopes e JOIN sources s ON s.id = e.source_id "
            "WHERE s.file_id = ?", (row["id"],)).fetchone()
        assert indexed == row["size"], row["path"]


def test_every_payload_md5_verifies_and_is_stored_once(db):
    assert db.execute("SELECT count(*) FROM envelopes WHERE md5_ok = 0").fetchone()[0] == 0
    claimed = db.execute("SELECT count(*) FROM envelopes WHERE payload IS NOT NULL").fetchone()[0]
    assert claimed == sum("has_payload" in e for s in scenario_dirs()
                          for e in raw_envelopes(scenario_logs(s.name)))
    for hash_, text in db.execute("SELECT hash, text FROM payloads ORDER BY random() LIMIT 200"):
        assert hashlib.md5(text.encode()).hexdigest() == hash_


def test_compiles_are_the_distinct_compile_ids_of_each_process(db):
    for scenario in ("train_step", "graph_breaks", "recompiles", "dynamic", "compiled_autograd"):
        envelopes = raw_envelopes(scenario_logs(scenario))
        # Records without any compile id (other than the string table) form tlparse's [-/-].
        ids = {(e.get("compiled_autograd_id"), e.get("frame_id"), e.get("frame_compile_id"))
               for e in envelopes if "str" not in e}
        (run,) = scenario_run(db, scenario)
        found = {(r[0], r[1], r[2]) for r in db.execute(
            "SELECT compiled_autograd_id, frame_id, frame_compile_id FROM compiles WHERE run_id = ?", (run,))}
        assert found == ids, scenario


def test_compile_ids_that_repeat_after_reset_are_separate_compiles(db):
    (run,) = scenario_run(db, "compile_errors")
    rows = db.execute("SELECT generation, co_name, status, fail_type FROM compiles "
                      "WHERE run_id = ? AND compile_id = '0/0' ORDER BY generation", (run,)).fetchall()
    assert [tuple(r) for r in rows] == [
        (0, "strict_print", "error", "Unsupported"),
        (1, "uses_broken", "error", "BackendCompilerFailed"),
        (2, "suppressed", "error", "BackendCompilerFailed"),
    ]


def _first_compile_of_0_0(scenario: str) -> tuple[str, list[str], int]:
    """Read from the raw log, without tlindex: the time of the last record of the first compile of 0/0, the times of
    the chromium B events logged under 0/0 before the dynamo_start that begins its next compile (after
    torch._dynamo.reset()) whose E comes after that dynamo_start (they open the next compile's spans), and how
    many such B events there are."""
    import oracle

    (log,) = scenario_logs(scenario)
    records = [(time, envelope, payload) for time, _, envelope, payload in oracle.records(log)]
    of_0_0 = [i for i, (_, e, _) in enumerate(records) if (e.get("frame_id"), e.get("frame_compile_id")) == (0, 0)
              and "compiled_autograd_id" not in e]
    starts = [i for i in of_0_0 if "dynamo_start" in records[i][1]]
    second = starts[1]
    events = {i: json.loads(records[i][2]) for i in range(len(records))
              if "chromium_event" in records[i][1] and records[i][2]}
    opening = [i for i in of_0_0 if i < second and i in events and events[i]["ph"] == "B"
               and next(j for j in sorted(events) if j > i and events[j]["ph"] == "E"
                        and events[j]["name"] == events[i]["name"]) > second]
    own = [i for i in of_0_0 if i < second and i not in opening]
    return records[own[-1]][0].split()[1], [records[i][0].split()[1] for i in opening], len(opening)


@pytest.mark.parametrize("scenario", ["compile_errors", "closures"])
def test_a_compile_ends_with_its_own_last_record_not_with_the_spans_the_next_one_opens(db, scenario):
    """issue 64: after torch._dynamo.reset() the next compile of 0/0 opens its spans before its dynamo_start, under
    the id of the compile that finished: they are no record of that compile (its span ends with its own last
    record), and filed under no compile, with their compile id."""
    end, opening_times, opening = _first_compile_of_0_0(scenario)
    (run,) = scenario_run(db, scenario)
    first = db.execute("SELECT id, end_time FROM compiles WHERE run_id = ? AND compile_id = '0/0' AND generation = 0",
                       (run,)).fetchone()
    assert opening >= 2 and first["end_time"].split("T")[1] == end
    unfiled = db.execute("SELECT e.time, e.compile_id FROM envelopes e JOIN sources s ON s.id = e.source_id "
                         "WHERE s.run_id = ? AND e.kind = 'chromium_event' AND e.compile IS NULL "
                         "AND e.frame_id = 0 AND e.frame_compile_id = 0 ORDER BY e.id", (run,)).fetchall()
    assert [(row["time"].split("T")[1], row["compile_id"]) for row in unfiled][:opening] == \
        [(time, "0/0") for time in opening_times]


def test_recompile_reasons_are_the_guard_failures_provoked(db):
    (run,) = scenario_run(db, "recompiles")
    rows = db.execute(
        "SELECT c.co_name, c.compile_id, r.previous_compile_id, r.reason FROM failed_guards r "
        "JOIN compiles c ON c.id = r.compile WHERE c.run_id = ? AND r.position = 0 ORDER BY c.id",
        (run,)).fetchall()
    first = {(r["compile_id"], r["previous_compile_id"]): r["reason"].split("#")[0].strip() for r in rows}
    # f: shape change, dtype change, python int change (see tests/data/generate.py)
    assert first[("0/1", "0/0")] == "tensor 'x' size mismatch at index 0. expected 4, actual 8"
    assert first[("0/2", "0/1")] == "tensor 'x' dtype mismatch. expected Float, actual Double"
    assert first[("0/3", "0/2")] == "n == 2"
    # g: a new dtype each call until the limit (4) is exceeded
    assert first[("1/4", "1/3")] == "tensor 'x' dtype mismatch. expected BFloat16, actual Int"
    limit = db.execute("SELECT compile_id, status, fail_type, fail_reason, recompile_reason FROM compiles "
                       "WHERE run_id = ? AND fail_type IS NOT NULL", (run,)).fetchall()
    assert [(r[0], r[1], r[2]) for r in limit] == [("1/4", "error", "Unsupported")]
    assert limit[0]["fail_reason"].startswith("Dynamo recompile limit exceeded")
    assert limit[0]["recompile_reason"].startswith("1/3: tensor 'x' dtype mismatch")


def test_graph_breaks_are_the_breaks_provoked(db):
    (run,) = scenario_run(db, "graph_breaks")
    rows = db.execute("SELECT g.reason, g.user_line, c.co_name FROM graph_break_events g JOIN compiles c "
                      "ON c.id = g.compile WHERE c.run_id = ?", (run,)).fetchall()
    reasons = " | ".join(r["reason"] for r in rows)
    assert "print" in reasons and "graph_break" in reasons and "Data-dependent" in reasons
    by_function = {r["co_name"] for r in rows}
    assert {"with_print", "with_explicit_break", "with_branch", "also_noisy"} <= by_function | {"noisy"}
    # the print inside noisy() breaks in each frame that reaches it: inlined into
    # with_print and also_noisy, and in noisy's own frame after the restart
    print_line = program_line("graph_breaks", 'print("side effect")')
    printing = sorted(r["co_name"] for r in rows if r["user_line"] == print_line)
    assert printing == ["also_noisy", "noisy", "with_print"]
    assert program_line("graph_breaks", "torch._dynamo.graph_break()") in {r["user_line"] for r in rows}
    counts = dict(db.execute("SELECT status, count(*) FROM compiles WHERE run_id = ? GROUP BY 1", (run,)))
    assert counts.get("error", 0) == 0


def test_four_rank_fixture_is_one_run_with_ranks_0_to_3(db):
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    row = db.execute("SELECT world_size, source_count, torch_version FROM runs WHERE id = ?", (run,)).fetchone()
    assert tuple(row) == (4, 4, "2.13.0+cpu")
    ranks = [r[0] for r in db.execute("SELECT rank FROM sources WHERE run_id = ? ORDER BY rank", (run,))]
    assert ranks == [0, 1, 2, 3]
    for source in db.execute("SELECT id, rank, file_rank FROM sources WHERE run_id = ?", (run,)):
        assert source["rank"] == source["file_rank"]
    # rank 1 fed a different batch and recompiled alone
    recompiled = db.execute("SELECT DISTINCT c.rank FROM failed_guards r JOIN compiles c ON c.id = r.compile "
                            "WHERE c.run_id = ?", (run,)).fetchall()
    assert [r[0] for r in recompiled] == [1]


def test_two_processes_into_one_dir_one_after_the_other_are_two_runs(db):
    runs = scenario_run(db, "cache")
    assert len(runs) == 2
    results = [dict(db.execute("SELECT c.cache || ':' || c.result, count(*) FROM cache_events c "
                               "JOIN compiles k ON k.id = c.compile WHERE k.run_id = ? GROUP BY 1", (run,)))
               for run in runs]
    cold, warm = results  # run ids follow start times
    assert cold.get("fx_graph:miss") and not cold.get("fx_graph:hit")
    assert warm.get("fx_graph:hit") and warm.get("aotautograd:hit")
    assert db.execute("SELECT count(*) FROM cache_events WHERE key IS NULL").fetchone()[0] == 0


def test_training_step_has_forward_backward_and_paired_spans(db):
    (run,) = scenario_run(db, "train_step")
    kinds = dict(db.execute("SELECT m.kind, count(*) FROM metrics m JOIN compiles c ON c.id = m.compile "
                            "WHERE c.run_id = ? GROUP BY 1", (run,)))
    assert kinds["compilation_metrics"] == 2 and kinds["bwd_compilation_metrics"] >= 1
    names = {r[0] for r in db.execute("SELECT a.name FROM artifacts a JOIN compiles c ON c.id = a.compile "
                                      "WHERE c.run_id = ?", (run,))}
    assert {"dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
            "inductor_output_code", "fx_graph_cache_miss"} <= names
    spans = db.execute("SELECT ph, count(*) FROM chromium_events e JOIN sources s ON s.id = e.source_id "
                       "WHERE s.run_id = ? GROUP BY 1", (run,)).fetchall()
    spans = dict(spans)
    raw = [e for e in raw_envelopes(scenario_logs("train_step")) if "chromium_event" in e]
    assert spans.get("B", 0) == 0 and spans.get("E", 0) == 0
    assert 2 * spans["X"] + spans.get("i", 0) == len(raw)
    # the grad-mode recompile of the no_grad call
    reason = db.execute("SELECT recompile_reason FROM compiles WHERE run_id = ? AND compile_id = '0/1'",
                        (run,)).fetchone()[0]
    assert "grad_mode" in reason


def test_every_metrics_key_is_kept(db):
    from tlindex.store.tables import METRICS_CONFIGS, METRICS_TYPED

    envelopes = [e for e in raw_envelopes(scenario_logs("train_step")) if "compilation_metrics" in e]
    (run,) = scenario_run(db, "train_step")
    rows = db.execute("SELECT m.* FROM metrics m JOIN compiles c ON c.id = m.compile WHERE c.run_id = ? "
                      "AND m.kind = 'compilation_metrics' ORDER BY m.id", (run,)).fetchall()
    assert len(rows) == len(envelopes)
    for envelope, row in zip(envelopes, rows):
        metrics = envelope["compilation_metrics"]
        other = json.loads(row["other"])
        for key, value in metrics.items():
            if key in METRICS_CONFIGS:
                text = db.execute("SELECT text FROM payloads WHERE hash = ?", (row[key],)).fetchone()[0]
                assert text == value
            elif key in METRICS_TYPED:
                stored = row[key]
                if isinstance(value, bool):
                    assert stored == int(value)
                elif isinstance(value, (list, dict)):
                    assert json.loads(stored) == value
                else:
                    assert stored == value, key
            elif key != "compile_id":
                assert other[key] == value, key


def test_stack_frames_resolve_through_the_string_table(db):
    unresolved = db.execute("SELECT count(*) FROM frames WHERE filename IS NULL").fetchone()[0]
    assert unresolved == 0
    (run,) = scenario_run(db, "train_step")
    frames = db.execute(
        "SELECT f.filename, f.name, f.loc FROM frames f JOIN envelopes e ON e.id = f.envelope_id "
        "JOIN compiles c ON c.id = e.compile WHERE c.run_id = ? AND e.kind = 'dynamo_start' "
        "AND c.compile_id = '0/0' ORDER BY f.depth", (run,)).fetchall()
    assert frames[0]["filename"].endswith("train_step.py") and frames[0]["name"] == "<module>"
    assert frames[-1]["name"] == "forward"


def test_guards_keep_tree_depth_and_user_code(db):
    (run,) = scenario_run(db, "recompiles")
    rows = db.execute("SELECT g.depth, g.guard_type, g.text, g.user_code FROM guards g JOIN compiles c "
                      "ON c.id = g.compile WHERE c.run_id = ? AND c.compile_id = '0/2' "
                      "AND g.origin = 'dynamo_cpp_guards_str' ORDER BY g.position", (run,)).fetchall()
    assert rows[0]["guard_type"] == "RootGuardManager" and rows[0]["depth"] == 0
    equals = [r for r in rows if r["guard_type"] == "EQUALS_MATCH"]
    assert equals and equals[0]["text"].startswith("L['n'] == 2") and equals[0]["depth"] == 2
    assert "return x * n" in equals[0]["user_code"]


def test_dynamic_shapes_record_symbols_and_specializations(db):
    (run,) = scenario_run(db, "dynamic")
    symbols = db.execute("SELECT s.symbol, s.unbacked FROM symbols s JOIN compiles c ON c.id = s.compile "
                         "WHERE c.run_id = ?", (run,)).fetchall()
    assert any(r["unbacked"] for r in symbols) and any(not r["unbacked"] for r in symbols)
    raw = raw_envelopes(scenario_logs("dynamic"))
    assert len(symbols) == sum(1 for e in raw if next(iter(e)) in ("create_symbol", "create_unbacked_symbol"))
    guards = db.execute("SELECT count(*) FROM guards WHERE origin = 'guard_added_fast'").fetchone()[0]
    assert guards == sum(1 for s in scenario_dirs()
                         for e in raw_envelopes(scenario_logs(s.name)) if "guard_added_fast" in e)


def test_compiled_autograd_compiles_carry_the_bang_id(db):
    (run,) = scenario_run(db, "compiled_autograd")
    ids = [r[0] for r in db.execute("SELECT compile_id FROM compiles WHERE run_id = ? AND "
                                    "compiled_autograd_id IS NOT NULL", (run,))]
    assert ids and all(i.startswith("!") for i in ids)


def test_tensor_descriptions_are_kept(db):
    (run,) = scenario_run(db, "train_step")
    rows = db.execute("SELECT t.kind, count(*) FROM tensor_descriptions t JOIN compiles c ON c.id = t.compile "
                      "WHERE c.run_id = ? GROUP BY 1", (run,)).fetchall()
    raw = raw_envelopes(scenario_logs("train_step"))
    for kind, count in rows:
        assert count == sum(1 for e in raw if f"describe_{kind}" in e)


def test_compile_bytes_add_up_to_the_envelopes_they_emitted(db):
    mismatched = db.execute("""
        SELECT c.id FROM compiles c JOIN (
            SELECT compile, count(*) n, sum(envelope_bytes) eb, sum(payload_bytes) pb
            FROM envelopes WHERE compile IS NOT NULL GROUP BY compile) e ON e.compile = c.id
        WHERE c.envelope_count != e.n OR c.envelope_bytes != e.eb OR c.payload_bytes != e.pb""").fetchall()
    assert mismatched == []


def test_foreign_keys_hold(db):
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_text_people_search_is_full_text_indexed(db):
    rows = db.execute("SELECT r.reason FROM failed_guards r JOIN failed_guards_fts f "
                      "ON f.rowid = r.id WHERE failed_guards_fts MATCH 'dtype AND BFloat16'").fetchall()
    assert rows and all("BFloat16" in r[0] for r in rows)
    assert db.execute("SELECT count(*) FROM compiles_fts WHERE compiles_fts MATCH 'recompile'").fetchone()[0] >= 1


def test_full_text_index_follows_later_ingests(tmp_path):
    import sqlite3

    from conftest import ingest

    db_path = tmp_path / "t.db"

    def matches() -> tuple[int, int]:
        conn = sqlite3.connect(db_path)
        found = conn.execute("SELECT count(*) FROM failed_guards_fts WHERE failed_guards_fts MATCH 'BFloat16'").fetchone()[0]
        want = conn.execute("SELECT count(*) FROM failed_guards WHERE reason LIKE '%BFloat16%'").fetchone()[0]
        conn.close()
        return found, want

    ingest(db_path, [str(DATA / "graph_breaks")], jobs=1)
    ingest(db_path, [str(DATA / "recompiles")], jobs=1)       # rows appended to the index
    found, want = matches()
    assert found == want > 0
    ingest(db_path, [str(DATA / "recompiles")], jobs=1, replace=True)  # rows replaced: rebuilt
    assert matches() == (found, want)
