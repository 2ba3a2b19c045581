"""What a new user meets at the command line: every bad input gets one clear line and an exit code."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import DATA, connect

from tlindex.cli import cli


def test_a_file_with_no_trace_record_is_named_recorded_and_fails_the_command(tmp_path):
    notalog = tmp_path / "notalog.txt"
    notalog.write_text("hello\nthis is not a torch trace\n")
    db_path = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["ingest", str(notalog), str(DATA / "export"), "--db", str(db_path)])
    assert result.exit_code == 1, result.output
    assert f"error: {notalog.resolve()}: no trace record in 2 lines (is it a TORCH_TRACE log?)" in result.output
    conn = connect(db_path)  # still recorded, and the good log beside it landed
    assert conn.execute("SELECT count(*) FROM ingest_errors e JOIN files f ON f.id = e.file_id "
                        "WHERE f.name = 'notalog.txt' AND e.kind = 'bad_prefix'").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 2


def test_nothing_to_ingest_creates_no_database(tmp_path):
    db_path = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "missing.log"), "--db", str(db_path)])
    assert result.exit_code == 1 and "missing.log: no such file or directory" in result.output
    assert list(tmp_path.iterdir()) == []


def test_query_parameters_are_checked_against_the_query(fixtures_db):
    runner = CliRunner()
    db = ["--db", str(fixtures_db)]
    cases = [
        (["query", "failures", "-p", "nosuchparam", "3"],
         "failures has no parameter :nosuchparam (its parameters: :run, :rank)"),
        (["query", "failures", "-p", "run", "abc"], "no run matches 'abc'"),  # a run by any of its names
        (["query", "log_volume", "-p", "by", "colour"],
         "-p by 'colour': one of kind, emitter, compile, rank, run"),
        (["query", "failures", "--db", str(fixtures_db), "-p", "run"], "Option '-p' requires 2 arguments"),
        (["query", "failures", "-p", "run", "--db", str(fixtures_db)],
         "-p run needs a value (got '--db'): -p NAME VALUE"),
        (["query", "cache", "-t", "--fmt", "nosuchfmt"], "--fmt 'nosuchfmt' is not a table format"),
        (["query", "select 1", "-p", "x", "1", "--db", str(fixtures_db) + ".missing"], "no such database"),
    ]
    for args, message in cases:
        result = runner.invoke(cli, args + (db if "--db" not in args else []))
        assert result.exit_code != 0 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    ok = runner.invoke(cli, ["query", "failures", "-p", "run", "", "-p", "rank", "1"] + db)
    assert ok.exit_code == 0 and isinstance(json.loads(ok.output), list)
