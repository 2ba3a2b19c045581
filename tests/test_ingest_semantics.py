"""Ingest semantics: idempotent, --replace, growing logs, interruptions, parallel jobs, CLI."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, fixture_paths, indexes_out_of_step, ingest, scenario_logs

import tlindex.ingest.merge
import tlindex.ingest.pipeline
import tlindex.store.db
from tlindex.cli import cli

TABLES = ("files", "sources", "envelopes", "payloads", "compiles", "frames", "artifacts", "guards",
          "metrics", "chromium_events", "failed_guards", "graph_break_events", "cache_events", "symbols",
          "tensor_descriptions", "ingest_errors", "strings", "runs", "volume")


def counts(db_path) -> dict[str, int]:
    conn = connect(db_path)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()


def snapshot(db_path) -> list[tuple]:
    """What a query sees, independent of row ids."""
    conn = connect(db_path)
    try:
        return sorted(tuple(r) for r in conn.execute(
            "SELECT f.name, e.line, e.kind, e.name, e.compile_id, c.generation, c.status, e.payload, e.md5_ok "
            "FROM envelopes e JOIN sources s ON s.id = e.source_id JOIN files f ON f.id = s.file_id "
            "LEFT JOIN compiles c ON c.id = e.compile"))
    finally:
        conn.close()


def test_ingesting_the_same_logs_again_is_a_no_op(tmp_path):
    db_path = tmp_path / "t.db"
    first = ingest(db_path, [str(DATA / "recompiles"), str(DATA / "ddp_2ranks")], jobs=1)
    before = counts(db_path)
    again = ingest(db_path, [str(DATA / "recompiles"), str(DATA / "ddp_2ranks")], jobs=1)
    assert first.files == 3 and again.files == 0 and again.skipped == 3
    assert counts(db_path) == before


def test_a_bulk_ingest_of_copies_says_so_in_a_few_lines_with_a_count(tmp_path):
    """Hundreds of copied folders (a benchmark, a job's identical ranks): three notes, then one line counting the
    rest, where every copy had its own line."""
    log = scenario_logs("export")[0]
    for n in range(12):
        (tmp_path / "logs" / f"copy-{n}").mkdir(parents=True)
        shutil.copy(log, tmp_path / "logs" / f"copy-{n}" / log.name)
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "logs"), "--db", str(tmp_path / "t.db")])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert len(notes) == 4 and all("byte-identical copy of" in note for note in notes[:3])
    assert notes[3] == ("note: and 8 more byte-identical copies of files ingested before (each ingested as its own "
                        "file; files.copy_of names the first)")
    assert "12 files ingested" in result.output


def test_a_byte_identical_copy_is_its_own_file_and_says_whose_copy_it_is(tmp_path):
    """Two rank files of one job can be byte-identical: each is a file and a source of its own."""
    db_path = tmp_path / "t.db"
    log = scenario_logs("export")[0]
    copy = tmp_path / "copy" / log.name
    copy.parent.mkdir()
    shutil.copy(log, copy)
    ingest(db_path, [str(log)], jobs=1)
    before = counts(db_path)
    summary = ingest(db_path, [str(copy)], jobs=1)
    assert summary.files == 1 and summary.copies == [(str(copy.resolve()), str(log.resolve()))]
    assert any("byte-identical copy of" in note for note in summary.notes())
    after = counts(db_path)
    assert after["envelopes"] == 2 * before["envelopes"] and after["payloads"] == before["payloads"]
    conn = connect(db_path)
    (copy_of,) = conn.execute("SELECT copy_of FROM files WHERE path = ?", (str(copy.resolve()),)).fetchone()
    assert conn.execute("SELECT path FROM files WHERE id = ?", (copy_of,)).fetchone()[0] == str(log.resolve())
    assert ingest(db_path, [str(copy)], jobs=1).skipped == 1  # and only once


def test_a_moved_log_is_not_ingested_twice_and_its_path_follows(tmp_path):
    db_path = tmp_path / "t.db"
    original = tmp_path / "before" / "x.log"
    original.parent.mkdir()
    shutil.copy(scenario_logs("export")[0], original)
    ingest(db_path, [str(original)], jobs=1)
    before = counts(db_path)
    moved = tmp_path / "after" / "x.log"
    moved.parent.mkdir()
    original.rename(moved)
    summary = ingest(db_path, [str(moved)], jobs=1)
    assert summary.skipped == 1 and summary.moved == [(str(moved.resolve()), str(original.resolve()))]
    assert counts(db_path) == before
    assert [row[0] for row in connect(db_path).execute("SELECT path FROM files")] == [str(moved.resolve())]


def test_replace_reingests_a_file(tmp_path):
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(DATA / "graph_breaks")], jobs=1)
    before, rows, labels = counts(db_path), snapshot(db_path), run_labels(db_path)
    summary = ingest(db_path, [str(DATA / "graph_breaks")], replace=True, jobs=1)
    assert summary.files == 1
    assert counts(db_path) == before and snapshot(db_path) == rows
    assert run_labels(db_path) == labels  # the run keeps its name


def run_labels(db_path) -> list[str]:
    conn = connect(db_path)
    try:
        return [row[0] for row in conn.execute("SELECT label FROM runs ORDER BY label")]
    finally:
        conn.close()


def test_a_grown_log_is_continued_not_duplicated(tmp_path):
    log = scenario_logs("train_step")[0]
    content = log.read_bytes()
    cut = content.index(b"\nV", len(content) // 2) + 1        # a record boundary halfway
    cut_mid_line = cut + 40                                    # ... and a line being written
    live = tmp_path / "trace" / log.name
    live.parent.mkdir()
    live.write_bytes(content[:cut_mid_line])
    db_path = tmp_path / "t.db"
    first = ingest(db_path, [str(live)], jobs=1)
    conn = connect(db_path)
    assert [r[0] for r in conn.execute("SELECT kind FROM ingest_errors")] == ["incomplete_record"]
    assert conn.execute("SELECT bytes_ingested FROM files").fetchone()[0] == cut
    conn.close()
    live.write_bytes(content)                                  # the job wrote the rest
    second = ingest(db_path, [str(live)], jobs=1)
    assert first.files == 1 and second.continued == 1

    whole = tmp_path / "whole.db"
    ingest(whole, [str(log)], jobs=1)
    assert counts(db_path) == counts(whole)
    assert snapshot(db_path) == snapshot(whole)


def cut_before_a_failed_compiles_metrics(tmp_path):
    """A real log written up to a failed compile's metrics (they bring its failure, its name and file: the compile
    the grown log continues changes indexed columns), a line being written after it; (log, its bytes, the copy)."""
    log = scenario_logs("compile_errors")[0]
    content = log.read_bytes()
    cut = [m.start() for m in re.finditer(rb"\nV[^\n]*compilation_metrics[^\n]*fail_type", content)][1] + 1
    live = tmp_path / "trace" / log.name
    live.parent.mkdir()
    live.write_bytes(content[:cut + 41])
    return log, content, live


def test_every_ingest_keeps_every_search_index_exact_without_making_it_again(tmp_path, monkeypatch):
    """Reproduction: every ingest that continued a grown log (each round of `tlindex watch`) or replaced one made
    every full-text index of the database again, 2.4 s a round in a database of 3,682 runs; a log rewritten in place
    (smaller, no --replace) left its compiles' entries behind, under rowids new compiles then took. Now the rows an
    ingest deletes leave the indexes in its transaction, a compile it continues leaves and joins again, new rows join
    after: after each ingest every index holds exactly its table's rows, and none was made again."""
    log, content, live = cut_before_a_failed_compiles_metrics(tmp_path)
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(live)], jobs=1)
    ingest(db_path, [str(DATA / "recompiles")], jobs=1)  # another run's rows, indexed past the live log's
    assert indexes_out_of_step(db_path) == []

    made_again = []

    def traced(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: made_again.extend(re.findall(r"INSERT INTO (?:main\.)?\[?(\w+)\]? "
                                                                         r"\(\[?\w+\]?\) VALUES \('rebuild'\)", sql)))
        return conn

    real_connect = tlindex.store.db.connect
    monkeypatch.setattr(tlindex.store.db, "connect", traced)
    live.write_bytes(content)
    assert ingest(db_path, [str(live)], jobs=1).continued == 1
    assert (made_again, indexes_out_of_step(db_path)) == ([], [])
    assert ingest(db_path, [str(live)], jobs=1, replace=True).files == 1
    assert (made_again, indexes_out_of_step(db_path)) == ([], [])
    live.write_bytes(scenario_logs("export")[0].read_bytes())  # rewritten in place, smaller
    assert ingest(db_path, [str(live)], jobs=1).files == 1
    assert (made_again, indexes_out_of_step(db_path)) == ([], [])
    ingest(db_path, [str(DATA / "graph_breaks")], jobs=1)  # new compiles, at rowids the deleted ones had
    assert (made_again, indexes_out_of_step(db_path)) == ([], [])
    monkeypatch.undo()
    whole = tmp_path / "whole.db"
    ingest(whole, [str(DATA / "recompiles"), str(live), str(DATA / "graph_breaks")], jobs=1)
    assert counts(db_path) == counts(whole)


def test_an_ingest_stopped_after_its_merges_leaves_every_search_index_exact(tmp_path, monkeypatch):
    """A grown log's continuation stopped after its merge, before the indexes take the new rows (a Ctrl-C), leaves
    indexes the next ingest brings up to date: its continued compiles left and joined again in the merge's
    transaction (the old code made them again only at the ingest's end, so a stop there left stale entries)."""
    log, content, live = cut_before_a_failed_compiles_metrics(tmp_path)
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(live)], jobs=1)
    ingest(db_path, [str(DATA / "recompiles")], jobs=1)  # (its compiles indexed past the continued one)
    live.write_bytes(content)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tlindex.ingest.pipeline, "refresh_fts", stopped)
    with pytest.raises(KeyboardInterrupt):
        ingest(db_path, [str(live)], jobs=1)
    monkeypatch.undo()
    ingest(db_path, [str(DATA / "graph_breaks")], jobs=1)
    assert indexes_out_of_step(db_path) == []


def test_an_interrupted_merge_leaves_no_half_source_and_a_rerun_completes(tmp_path, monkeypatch):
    db_path = tmp_path / "t.db"
    calls = {"n": 0}
    real = tlindex.ingest.merge.merge_statements

    def failing(conn):
        statements, offsets = real(conn)
        calls["n"] += 1
        if calls["n"] == 2:  # the second file dies half-way through its merge
            statements = statements[:len(statements) // 2] + ["INSERT INTO no_such_table VALUES (1)"]
        return statements, offsets

    monkeypatch.setattr(tlindex.ingest.merge, "merge_statements", failing)
    with pytest.raises(Exception):
        ingest(db_path, [str(DATA / "cache")], jobs=1)
    partial = counts(db_path)
    assert partial["files"] == 1 and partial["sources"] == 1
    conn = connect(db_path)
    assert conn.execute("SELECT count(*) FROM envelopes e LEFT JOIN sources s ON s.id = e.source_id "
                        "WHERE s.id IS NULL").fetchone()[0] == 0
    conn.close()
    monkeypatch.setattr(tlindex.ingest.merge, "merge_statements", real)
    ingest(db_path, [str(DATA / "cache")], jobs=1)
    clean = tmp_path / "clean.db"
    ingest(clean, [str(DATA / "cache")], jobs=1)
    assert counts(db_path) == counts(clean) and snapshot(db_path) == snapshot(clean)


@pytest.mark.slow
def test_kill_9_mid_ingest_leaves_a_consistent_database(tmp_path):
    db_path = tmp_path / "t.db"
    command = [sys.executable, "-m", "tlindex", "ingest", *fixture_paths(), "--db", str(db_path), "-j", "1",
               "--silent"]
    process = subprocess.Popen(command)
    deadline = time.time() + 30
    while time.time() < deadline and not (db_path.exists() and counts_or_none(db_path, "files")):
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    conn = connect(db_path)
    files = conn.execute("SELECT id, size, bytes_ingested FROM files").fetchall()
    for file_id, size, consumed in files:  # every file present is present whole
        (indexed,) = conn.execute(
            "SELECT coalesce(sum(envelope_bytes + payload_bytes), 0) FROM envelopes e JOIN sources s "
            "ON s.id = e.source_id WHERE s.file_id = ?", (file_id,)).fetchone()
        assert indexed == consumed == size
    conn.close()
    subprocess.run(command, check=True)
    clean = tmp_path / "clean.db"
    ingest(clean, fixture_paths(), jobs=2)
    assert counts(db_path) == counts(clean)
    assert snapshot(db_path) == snapshot(clean)


def counts_or_none(db_path, table: str) -> int | None:
    try:
        conn = connect(db_path)
        try:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            conn.close()
    except Exception:
        return None


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_parallel_jobs_give_the_same_database(tmp_path, fixtures_db):
    serial = tmp_path / "serial.db"
    ingest(serial, fixture_paths(), jobs=1)
    assert counts(serial) == counts(fixtures_db)
    assert snapshot(serial) == snapshot(fixtures_db)


def test_run_label_groups_files_into_one_run(tmp_path):
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(DATA / "recompiles"), str(DATA / "export")], run_label="nightly", jobs=1)
    conn = connect(db_path)
    assert [tuple(r) for r in conn.execute("SELECT label, source_count FROM runs")] == [("nightly", 2)]


def test_cli_ingest_reports_a_summary_and_fails_on_unreadable_paths(tmp_path):
    runner = CliRunner()
    db_path = tmp_path / "t.db"
    result = runner.invoke(cli, ["ingest", str(DATA / "export"), "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    assert "1 file ingested" in result.output and "envelopes" in result.output
    result = runner.invoke(cli, ["ingest", str(tmp_path / "missing.log"), "--db", str(db_path)])
    assert result.exit_code == 1 and "missing.log: no such file" in result.output
    result = runner.invoke(cli, ["ingest", str(DATA / "*" / "*rank_0*.log"), "--db", str(db_path), "--silent"])
    assert result.exit_code == 0 and result.output == ""
    rank_0_logs = {p.name for p in DATA.glob("*/*rank_0*.log")}
    assert len(rank_0_logs) > 1
    assert connect(db_path).execute("SELECT count(*) FROM files").fetchone()[0] == 1 + len(rank_0_logs)


def test_cli_version():
    from tlindex import __version__

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_cli_refuses_a_db_that_is_not_a_tlindex_database_and_leaves_it_untouched(tmp_path):
    runner = CliRunner()
    text_file = tmp_path / "notes.db"
    text_file.write_text("not a database\n")
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.commit()
    conn.close()
    for db_path, message in [(text_file, "not a SQLite database"), (foreign, "tlindex did not make (tables: people)")]:
        before = db_path.read_bytes()
        result = runner.invoke(cli, ["ingest", str(DATA / "export"), "--db", str(db_path)])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert result.output.startswith(f"Error: {db_path}: ") and message in result.output, result.output
        assert db_path.read_bytes() == before
        assert not list(tmp_path.glob(f".{db_path.name}.staging-*"))
    result = runner.invoke(cli, ["ingest", str(DATA / "export"), "--db", str(tmp_path / "no" / "dir" / "t.db")])
    assert result.exit_code == 1 and "cannot be opened" in result.output and "Traceback" not in result.output


def test_a_database_of_a_newer_tlindex_is_refused(tmp_path):
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(DATA / "export")], jobs=1)
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO _tlindex_migrations VALUES ('999_from_the_future', NULL)")
    conn.commit()
    conn.close()
    result = CliRunner().invoke(cli, ["ingest", str(DATA / "graph_breaks"), "--db", str(db_path)])
    assert result.exit_code == 1 and "newer tlindex" in result.output and "999_from_the_future" in result.output
    assert connect(db_path).execute("SELECT count(*) FROM files").fetchone()[0] == 1


def test_a_rank_known_only_from_the_file_name_is_the_rank(tmp_path):
    """Older torch logged no "rank" key: the file name's rank is the source's and its compiles'."""
    trace = tmp_path / "trace"
    trace.mkdir()
    for rank, scenario in enumerate(["graph_breaks", "recompiles"]):  # real logs without "rank" keys
        (log,) = scenario_logs(scenario)
        assert b'"rank"' not in log.read_bytes()
        shutil.copy(log, trace / f"dedicated_log_torch_trace_rank_{rank}_copy.log")
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(trace)], jobs=1)
    conn = connect(db_path)
    assert [tuple(r) for r in conn.execute("SELECT rank, file_rank FROM sources ORDER BY rank")] == [(0, 0), (1, 1)]
    assert conn.execute("SELECT count(*) FROM compiles WHERE rank IS NULL").fetchone()[0] == 0
    # two rank files of one directory, each rank once: one job, though their times do not overlap
    assert [tuple(r) for r in conn.execute("SELECT world_size, source_count FROM runs")] == [(2, 2)]


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_kill_9_takes_the_workers_with_it_and_the_next_ingest_clears_its_staging(tmp_path):
    db_path = tmp_path / "t.db"
    command = [sys.executable, "-m", "tlindex", "ingest", *fixture_paths(), "--db", str(db_path), "-j", "2", "--silent"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline and not list(tmp_path.glob(".t.db.staging-*/*.db")):
        time.sleep(0.01)  # workers are parsing into their staging databases
    os.kill(process.pid, signal.SIGKILL)
    # Every process holding the pipes (workers, resource tracker) must be gone for this to return.
    process.communicate(timeout=30)
    assert list(tmp_path.glob(".t.db.staging-*"))  # what the killed ingest left behind
    subprocess.run(command, check=True, timeout=120)
    assert not list(tmp_path.glob(".t.db.staging-*"))


def test_a_log_rewritten_in_place_replaces_what_was_ingested(tmp_path):
    log = tmp_path / "x.log"
    (original,) = scenario_logs("graph_breaks")
    (other,) = scenario_logs("recompiles")
    log.write_bytes(original.read_bytes())
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(log)], jobs=1)
    for content in (original.read_bytes()[: original.stat().st_size // 2], other.read_bytes()):
        log.write_bytes(content)  # truncated, then rewritten (longer, another prefix)
        os.utime(log, (time.time() + 5, time.time() + 5))
        summary = ingest(db_path, [str(log)], jobs=1)
        assert summary.files == 1 and summary.rewritten == [str(log.resolve())]
        assert any("changed in place" in note for note in summary.notes())
        clean = tmp_path / f"clean{len(content)}.db"
        ingest(clean, [str(log)], jobs=1)
        assert counts(db_path) == counts(clean)
        assert [tuple(r) for r in connect(db_path).execute("SELECT path, size FROM files")] == \
            [(str(log.resolve()), len(content))]


# --- what the user said survives a re-ingest (issue 62, point 4) -----------------------------------------------------

FACTS = {"command": '["python", "train.py"]', "cwd": "/work", "host": "box", "user": "me",
         "started": "2026-01-02T03:04:05.000000", "duration_s": 4.5, "exit_code": 0, "signal": None}


def said(db_path) -> list[tuple]:
    """What a user said of each run: id, label, kept mark, run facts, and how many processes it has."""
    conn = connect(db_path)
    try:
        return [tuple(row) for row in conn.execute(
            "SELECT id, label, kept, command, cwd, host, user, started, duration_s, exit_code, signal, "
            "(SELECT count(*) FROM sources s WHERE s.run_id = runs.id) FROM runs ORDER BY id")]
    finally:
        conn.close()


@pytest.mark.parametrize("scenario", ["graph_breaks", "ddp_2ranks"])
def test_a_reingest_or_replace_keeps_the_runs_label_kept_mark_and_facts(tmp_path, scenario):
    """Reproduction: `ingest --replace` gave a run labelled `baseline` a folder-derived label and lost its run facts,
    so the next gate failed with "no run matches 'baseline'". A log rewritten in place is re-ingested the same way."""
    from tlindex import Database

    folder = tmp_path / scenario
    shutil.copytree(DATA / scenario, folder)
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(folder)], jobs=1)
    labelled = CliRunner().invoke(cli, ["label", "1", "baseline", "--keep", "--db", str(db_path)])
    assert labelled.exit_code == 0 and "kept" in labelled.output, labelled.output
    with Database(db_path, write=True) as db:
        db.record_facts(1, FACTS)
    before = said(db_path)
    assert before[0][1:3] == ("baseline", 1)
    replaced = CliRunner().invoke(cli, ["ingest", str(folder), "--replace", "--db", str(db_path), "--silent"])
    assert replaced.exit_code == 0, replaced.output
    assert said(db_path) == before
    log = sorted(folder.glob("*.log"))[0]
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2].rsplit(b"\n", 1)[0] + b"\n")  # rewritten in place
    os.utime(log, (time.time() + 5, time.time() + 5))
    assert ingest(db_path, [str(folder)], jobs=1).rewritten == [str(log.resolve())]
    assert said(db_path) == before
    gate = CliRunner().invoke(cli, ["trend", "--db", str(db_path), "--baseline", "baseline"])
    assert gate.exit_code == 0, gate.output


def test_a_killed_replace_leaves_no_run_emptied_of_its_files(tmp_path, monkeypatch):
    """Reproduction: a `--replace` stopped after its first merge left the run labelled `baseline` without any
    process until the next ingest (the file's new processes were in a provisional run)."""
    import tlindex.ingest.pipeline as pipeline

    for name in ("graph_breaks", "dynamic"):
        shutil.copytree(DATA / name, tmp_path / name)
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(tmp_path / "graph_breaks")], run_label="baseline", jobs=1)
    ingest(db_path, [str(tmp_path / "dynamic")], jobs=1)
    before = said(db_path)
    real, calls = pipeline.merge, []

    def stopped_at_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "merge", stopped_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        ingest(db_path, [str(tmp_path / "graph_breaks"), str(tmp_path / "dynamic")], replace=True, jobs=1)
    assert said(db_path) == before  # the replaced file's processes are in their run already, its label kept


# --- `tlindex rm` and an ingest still running ------------------------------------------------------------------------

def _rm_during_the_first_merge(monkeypatch, db_path, names) -> list:
    """Make the next ingest run `tlindex rm NAMES` right after its first merge (the ingest still running)."""
    import tlindex.ingest.pipeline as pipeline

    real, results = pipeline.merge, []

    def then_rm(*args, **kwargs):
        file_id = real(*args, **kwargs)
        if not results:
            results.append(CliRunner().invoke(cli, ["rm", *names(), "--db", str(db_path)]))
        return file_id

    monkeypatch.setattr(pipeline, "merge", then_rm)
    return results


@pytest.mark.parametrize("label", [None, "nightly"])
def test_rm_refuses_a_run_an_ingest_is_still_writing_and_says_which_ingest(tmp_path, monkeypatch, label):
    """Reproduction: `rm` of a run an ingest was still writing succeeded, and the ingest then reported the removed
    files as ingested, exit 0. Its provisional run, and a labelled run it attaches files to, are refused."""
    db_path = tmp_path / "t.db"
    if label:
        ingest(db_path, [str(DATA / "dynamic")], run_label=label, jobs=1)
    logs = scenario_logs("cache")  # one folder, two logs: merged one after the other
    results = _rm_during_the_first_merge(monkeypatch, db_path, lambda: [
        str(run) for (run,) in connect(db_path).execute("SELECT DISTINCT run_id FROM sources")])
    summary = ingest(db_path, [str(log) for log in logs], run_label=label, jobs=1)
    (refused,) = results
    assert refused.exit_code == 1 and "is being written by an ingest still running" in refused.output, refused.output
    assert ".t.db.staging-" in refused.output and "nothing removed" in refused.output
    assert summary.files == 2 and not summary.problems
    conn = connect(db_path)
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 2 + bool(label)
    removed = CliRunner().invoke(cli, ["rm", *[str(r) for (r,) in conn.execute("SELECT id FROM runs")],
                                       "--db", str(db_path)])
    assert removed.exit_code == 0, removed.output  # the ingest has ended: its runs can go


def test_an_ingest_continuing_a_log_whose_run_was_removed_says_so(tmp_path, monkeypatch):
    """The other order: the run of a grown log is removed after the ingest read where the log stood, before it
    merged the rest (the run was not being written yet, so `rm` may remove it): the ingest says what it lost."""
    log = scenario_logs("train_step")[0]
    content = log.read_bytes()
    live = tmp_path / "trace" / log.name
    live.parent.mkdir()
    live.write_bytes(content[:content.index(b"\nV", len(content) // 2) + 1])
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(live)], jobs=1)
    live.write_bytes(content)
    import tlindex.ingest.pipeline as pipeline

    real, removed = pipeline.merge, []

    def rm_first(*args, **kwargs):
        if not removed:
            removed.append(CliRunner().invoke(cli, ["rm", "1", "--db", str(db_path)]))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "merge", rm_first)
    summary = ingest(db_path, [str(live)], jobs=1)
    assert removed[0].exit_code == 0, removed[0].output
    assert summary.files == 0 and summary.continued == 0
    (problem,) = summary.problems
    assert str(live) in problem and "its run was removed" in problem and "ingest it again" in problem
