"""`tlindex run -- COMMAND` on real programs, and runs listed, renamed and deleted.

The programs need a Python with torch 2.13: `.venv-torch` beside the checkout (scripts/test.sh makes it
when TLINDEX_TORCH_TESTS=1, as CI does) or TLINDEX_TORCH_PYTHON; without one those tests skip.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, ingest, sqlite_tables

from tlindex.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def torch_python() -> str | None:
    for candidate in (os.environ.get("TLINDEX_TORCH_PYTHON"), str(ROOT / ".venv-torch" / "bin" / "python")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


TORCH = torch_python()
needs_torch = pytest.mark.skipif(TORCH is None, reason="no Python with torch (TLINDEX_TORCH_TESTS=1 scripts/test.sh)")

PROGRAM = """
import os, sys, time, torch
torch.set_num_threads(1)

@torch.compile(backend="eager")
def f(x):
    return x.sin() + 1

f(torch.ones(3))
print("compiled", flush=True)
if os.environ.get("SLEEP"):
    time.sleep(120)
sys.exit(int(os.environ.get("EXIT", "0")))
"""

DISTRIBUTED = """
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")

@torch.compile(backend="eager")
def f(x):
    return x.cos() * (dist.get_rank() + 1)

f(torch.ones(3))
dist.barrier()
dist.destroy_process_group()
"""


def tlindex(args: list[str], cwd: Path, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlindex", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600, **kwargs)


@needs_torch
def test_a_script_is_run_traced_and_ingested_as_one_run(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    done = tlindex(["run", "--db", "t.db", "--", TORCH, "prog.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "compiled" in done.stdout  # the command's own output, untouched
    assert "1 file ingested" in done.stderr and "tlindex serve t.db" in done.stderr
    conn = connect(tmp_path / "t.db")
    (label, sources, compiles) = conn.execute(
        "SELECT r.label, r.source_count, (SELECT compiles FROM run_totals t WHERE t.run_id = r.id) FROM runs r").fetchone()
    assert label == f"{TORCH} prog.py" and sources == 1 and compiles == 1
    assert len(list((tmp_path / "t.traces").iterdir())) == 1  # the trace is kept (--keep-trace)
    again = tlindex(["run", "--db", "t.db", "--no-keep-trace", "--", TORCH, "prog.py"], tmp_path, env={"EXIT": "3"})
    assert again.returncode == 3, again.stderr  # the command's exit code, after ingesting what it wrote
    labels = [row[0] for row in conn.execute("SELECT label FROM runs ORDER BY id")]
    assert labels == [f"{TORCH} prog.py", f"{TORCH} prog.py (2)"]
    assert len(list((tmp_path / "t.traces").iterdir())) == 1


@needs_torch
def test_a_torchrun_job_is_one_run_of_two_ranks(tmp_path):
    (tmp_path / "dist.py").write_text(DISTRIBUTED)
    done = tlindex(["run", "--db", "t.db", "--label", "ddp", "--", TORCH, "-m", "torch.distributed.run",
                    "--standalone", "--nproc-per-node", "2", "dist.py"], tmp_path, env={"GLOO_SOCKET_IFNAME": "lo"})
    assert done.returncode == 0, done.stderr
    (world, sources) = connect(tmp_path / "t.db").execute(
        "SELECT world_size, source_count FROM runs WHERE label = 'ddp'").fetchone()
    assert (world, sources) == (2, 2)


@needs_torch
def test_an_interrupted_command_still_lands_and_exits_130(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    proc = subprocess.Popen([sys.executable, "-m", "tlindex", "run", "--db", "t.db", "--", TORCH, "prog.py"],
                            cwd=tmp_path, env={**os.environ, "SLEEP": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while proc.stdout and time.monotonic() < deadline:  # wait until the compile is done and logged
            if "compiled" in proc.stdout.readline():
                break
        proc.send_signal(signal.SIGINT)  # to tlindex: it passes it on to the command's process group
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "1 file ingested" in err
    assert connect(tmp_path / "t.db").execute("SELECT count(*) FROM compiles WHERE compile_id = '0/0'").fetchone()[0] == 1


REPLAY = """
import os, shutil, signal, sys
shutil.copy(sys.argv[1], os.environ["TORCH_TRACE"])  # the log a real torch program wrote (tests/data)
if sys.argv[2] == "TERM":
    os.kill(os.getpid(), signal.SIGTERM)
sys.exit(int(sys.argv[2]))
"""


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("ending, code, exit_code, signal_name", [("3", 3, 3, None), ("TERM", 143, None, "SIGTERM")])
def test_a_run_keeps_what_its_command_was_and_how_it_ended(tmp_path, ending, code, exit_code, signal_name):
    """A command that writes a real log (tests/data/series, copied into TORCH_TRACE), then exits 3 or is killed:
    the run keeps its command line, exit or signal, duration, directory, host and user; relabelling keeps them;
    `tlindex runs` (text and JSON), the runs page and the run page show them."""
    import getpass
    import socket

    (tmp_path / "replay.py").write_text(REPLAY)
    log = sorted((DATA / "series").glob("*.log"))[0]
    command = [sys.executable, "replay.py", str(log), ending]
    done = tlindex(["run", "--db", "t.db", "--label", "replayed", "--", *command], tmp_path)
    assert done.returncode == code, done.stderr
    conn = connect(tmp_path / "t.db")
    row = dict(conn.execute("SELECT * FROM runs WHERE label = 'replayed'").fetchone())
    assert json.loads(row["command"]) == command
    assert (row["exit_code"], row["signal"]) == (exit_code, signal_name)
    assert row["cwd"] == str(tmp_path) and row["host"] == socket.gethostname() and row["user"] == getpass.getuser()
    assert 0 < row["duration_s"] < 600
    from datetime import datetime, timezone
    started = datetime.fromisoformat(row["started"]).replace(tzinfo=timezone.utc)
    assert abs((datetime.now(timezone.utc) - started).total_seconds()) < 600  # when it ran, not when the log began
    assert tlindex(["label", "replayed", "renamed", "--db", "t.db"], tmp_path).returncode == 0
    again = dict(conn.execute("SELECT * FROM runs WHERE label = 'renamed'").fetchone())
    assert {k: again[k] for k in ("command", "exit_code", "signal", "duration_s")} == \
           {k: row[k] for k in ("command", "exit_code", "signal", "duration_s")}
    listed = json.loads(tlindex(["runs", "--db", "t.db", "--json"], tmp_path).stdout)
    assert listed[0]["ran"]["command"] == command and listed[0]["ran"]["signal"] == signal_name
    ended = f"killed by {signal_name}" if signal_name else f"exit {exit_code}"
    text = tlindex(["runs", "--db", "t.db"], tmp_path).stdout
    assert f"$ {sys.executable} replay.py {log} {ending}" in text and ended in text
    page = json.loads(tlindex(["show", "run", "renamed", "--db", "t.db", "--json"], tmp_path).stdout)
    assert page["run"]["ran"]["ended"] == ended and page["run"]["ran"]["cwd"] == str(tmp_path)


def test_runs_ingested_from_logs_have_no_command(db):
    from tlindex.answers.runs import runs_listing

    assert all(run["ran"] is None for run in runs_listing(db))


def test_a_command_that_cannot_start_is_one_line_and_127(tmp_path):
    result = CliRunner().invoke(cli, ["run", "--db", str(tmp_path / "t.db"), "--", "no-such-command-here"])
    assert result.exit_code == 127
    assert result.output.strip() == "tlindex run: cannot start 'no-such-command-here': No such file or directory"
    assert not (tmp_path / "t.db").exists()


SCENARIOS = ["graph_breaks", "recompiles", "ddp_2ranks", "compile_errors"]


def test_rm_leaves_the_database_a_fresh_ingest_of_the_rest_would_be(tmp_path):
    both = tmp_path / "all.db"
    ingest(both, [str(DATA / name) for name in SCENARIOS], jobs=1)
    rest = tmp_path / "rest.db"
    ingest(rest, [str(DATA / name) for name in SCENARIOS if name != "recompiles"], jobs=1)
    runs = {row[0]: row[1] for row in connect(both).execute("SELECT label, id FROM runs")}
    gone = [run for label, run in runs.items() if label.startswith("recompiles")]
    assert len(gone) == 1
    result = CliRunner().invoke(cli, ["rm", str(gone[0]), "--db", str(both)])
    assert result.exit_code == 0, result.output
    kept, fresh = connect(both), connect(rest)
    assert kept.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert kept.execute("PRAGMA foreign_key_check").fetchall() == []
    tables = [row[0] for row in fresh.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                              "'%_fts_%' AND name NOT LIKE 'sqlite_%'")]
    for table in tables:
        assert kept.execute(f"SELECT count(*) FROM [{table}]").fetchone() == \
            fresh.execute(f"SELECT count(*) FROM [{table}]").fetchone(), table
    per_run = "SELECT r.label, count(DISTINCT s.id), count(e.id) FROM runs r JOIN sources s ON s.run_id = r.id " \
              "JOIN envelopes e ON e.source_id = s.id GROUP BY r.label ORDER BY r.label"
    assert [tuple(r) for r in kept.execute(per_run)] == [tuple(r) for r in fresh.execute(per_run)]
    for index in ("compiles_fts", "guards_fts", "artifacts_fts", "payloads_fts"):
        term = '"recompile"' if index == "compiles_fts" else '"L"'
        count = f"SELECT count(*) FROM {index} WHERE {index} MATCH ?"
        assert kept.execute(count, (term,)).fetchone() == fresh.execute(count, (term,)).fetchone(), index
    assert sqlite_tables(both)["payload_data"] and len(sqlite_tables(both)["payload_data"]) == \
        len(sqlite_tables(rest)["payload_data"])


def test_runs_are_listed_oldest_first_as_on_the_runs_page_and_renamed(fixtures_db, tmp_path):
    import shutil

    db = tmp_path / "copy.db"
    source = sqlite3.connect(fixtures_db)
    source.execute("PRAGMA wal_checkpoint(FULL)")
    source.close()
    shutil.copy(fixtures_db, db)
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).stdout)
    starts = [run["start"] for run in listed]
    assert starts == sorted(starts) and len(listed) == connect(db).execute(
        "SELECT count(*) FROM runs").fetchone()[0]
    from tlindex.pages.rows import Args
    from tlindex.pages.runs import runs_data

    assert [run["id"] for run in runs_data(connect(db), Args())["runs"]] == [run["id"] for run in listed]  # one order
    failing = next(run for run in listed if run["failures"])
    assert failing["worst_finding"] and "failed" in failing["worst_finding"]
    first = listed[0]
    assert CliRunner().invoke(cli, ["label", str(first["id"]), "baseline", "--db", str(db)]).exit_code == 0
    assert connect(db).execute("SELECT label FROM runs WHERE id = ?", (first["id"],)).fetchone()[0] == "baseline"
    clash = CliRunner().invoke(cli, ["label", str(listed[-1]["id"]), "baseline", "--db", str(db)])
    assert clash.exit_code == 1 and "already labelled 'baseline'" in clash.output
    text = CliRunner().invoke(cli, ["runs", "--db", str(db)]).stdout
    assert "baseline" in text and len(text.strip().splitlines()) == len(listed)


def test_the_run_page_url_is_printed_only_when_a_server_answers(tmp_path):
    import http.server
    import threading

    from tlindex.run import served_url

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # a stand-in for `tlindex serve`: only run 1 of t.db exists
            self.send_response(200 if self.path == "/t/-/tlindex/run/1" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert served_url(tmp_path / "t.db", 1, port) == f"http://127.0.0.1:{port}/t/-/tlindex/run/1"
        assert served_url(tmp_path / "t.db", 2, port) is None
    finally:
        server.shutdown()
    assert served_url(tmp_path / "t.db", 1, port) is None  # nobody answers
