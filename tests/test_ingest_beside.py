"""`tlindex report LOG` ingests in a forked child while it imports the renderer (tlindex.ingest.beside): the same
rows and the same report as an ingest in the process, what the child raised raised by the command, nothing left.

Each case runs in a fresh interpreter (a fork needs a process with no other thread, which a test runner may not be).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import DATA, canonical, sqlite_tables

from tlindex.ingest.pipeline import ingest
from tlindex.store.compression import RAW_UP_TO

ROOT = Path(__file__).resolve().parents[1]
LOG = next((DATA / "vllm_two_models").glob("*.log"))  # a real log with compiles, pieces and payloads
RANKS = DATA / "ddp_2ranks"  # two rank files: the child's ingest starts workers of its own

BESIDE = """
import json, shutil, sys
from tlindex.ingest.beside import ingest_beside
beside = ingest_beside(sys.argv[2:], jobs=2)
assert beside is not None, "no fork"
try:
    summary = beside.wait()
    shutil.copy(beside.db, sys.argv[1])
finally:
    beside.end()
print(json.dumps({"folder_left": beside.folder.exists(), "envelopes": summary.envelopes, "files": summary.files}))
"""

# The command line, with the child's ingest replaced by what a case asks (TLINDEX_TEST_CHILD), and a word on
# stderr when the parent waits for a child (the ingest was beside).
COMMAND = """
import os, sys
import tlindex.ingest.beside as beside
from tlindex.cli import cli
from tlindex.errors import DatabaseError

class Odd(Exception):  # pickles, but cannot be unpickled (its class takes two arguments)
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")

def broken(*args, **kwargs):
    what = os.environ["TLINDEX_TEST_CHILD"]
    if what == "error":
        raise DatabaseError("the disk said no")
    if what == "bug":
        raise ValueError("a bug in the ingest")
    if what == "odd":
        raise Odd("one", "two")
    if what == "unreadable":
        raise PermissionError(13, "Permission denied", "locked/x.log")
    os._exit(3)  # killed, as by the OOM killer: no result

def no_fork():
    raise BlockingIOError(11, "Resource temporarily unavailable")

what = os.environ.get("TLINDEX_TEST_CHILD")
if what == "unreadable":
    beside._size = broken  # before the ingest: as discover meets a folder it may not read
elif what == "no fork":
    beside.fork = no_fork
elif what:
    beside.ingest = broken
waited = beside.Beside.wait
def wait(self):
    sys.stderr.write("WAITED FOR THE CHILD\\n")
    return waited(self)
beside.Beside.wait = wait
cli(sys.argv[1:], prog_name="tlindex")
"""


def run(script: str, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    tmp = cwd / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TMPDIR": str(tmp), **env})


def schema(db: Path) -> dict:
    conn = sqlite3.connect(db)
    try:
        return {"objects": sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")),
                "migrations": sorted(row[0] for row in conn.execute("SELECT name FROM _tlindex_migrations")),
                "journal": conn.execute("PRAGMA journal_mode").fetchone()[0]}
    finally:
        conn.close()


def stored_raw(db: Path) -> tuple[float, int]:
    """(the share of the payloads up to RAW_UP_TO bytes stored as they are, how many bigger ones are)."""
    conn = sqlite3.connect(db)
    try:
        small, big = conn.execute("SELECT avg(length(data) = text_size) FILTER (WHERE text_size <= ?), "
                                  "count(*) FILTER (WHERE text_size > ? AND length(data) = text_size) "
                                  "FROM payload_data", (RAW_UP_TO, RAW_UP_TO)).fetchone()
        return small, big
    finally:
        conn.close()


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_an_ingest_beside_writes_the_rows_an_ingest_in_the_process_writes(tmp_path):
    for name, paths in (("one log", [LOG]), ("two ranks, with workers", sorted(RANKS.glob("*.log")))):
        work = tmp_path / name.replace(" ", "_").replace(",", "")
        work.mkdir()
        done = run(BESIDE, str(work / "beside.db"), *map(str, paths), cwd=work)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)
        here = ingest(work / "here.db", [str(path) for path in paths], jobs=2, search_index=False)
        assert said == {"folder_left": False, "envelopes": here.envelopes, "files": len(paths)}, name
        assert canonical(sqlite_tables(work / "beside.db")) == canonical(sqlite_tables(work / "here.db")), name
        assert schema(work / "beside.db") == schema(work / "here.db"), name  # a scratch database, copied: the same
        assert stored_raw(work / "beside.db") == (1.0, 0), name  # read once: its payloads not compressed
        assert stored_raw(work / "here.db")[0] < 0.5, name
        assert list((work / "tmp").iterdir()) == [], name


def test_the_report_of_a_log_ingested_beside_is_the_report_of_it_ingested_in_the_process(tmp_path):
    beside = run(COMMAND, "report", str(LOG), "-o", "beside", cwd=tmp_path)
    assert beside.returncode == 0 and "WAITED FOR THE CHILD" in beside.stderr, beside.stderr
    here = run(COMMAND, "report", str(LOG), "--db", "traces.db", "-o", "here", cwd=tmp_path)  # a database named
    assert here.returncode == 0 and "WAITED FOR THE CHILD" not in here.stderr, here.stderr
    assert files_of(tmp_path / "beside") == files_of(tmp_path / "here")
    assert len(files_of(tmp_path / "beside")) > 300  # its pages, payloads and tlparse's files
    assert list((tmp_path / "tmp").iterdir()) == []


LAST_FIRST = """
import concurrent.futures, sys
import tlindex.ingest.pipeline as pipeline
from tlindex.cli import cli

def last_first(pending, timeout=None, return_when=None):  # every task done, said in the reverse order
    finished, _ = concurrent.futures.wait(pending)
    return sorted(finished, key=lambda future: future.result().staging, reverse=True), set()

if sys.argv[1] == "last-first":
    pipeline.wait = last_first
cli(sys.argv[2:])
"""


def test_two_reports_of_the_same_logs_are_identical_whichever_of_the_ingest_workers_finishes_first(tmp_path):
    """Reproduction: one report of 4 rank files in 3 had every file of its compiles and payloads named otherwise (the
    child's workers' results were merged as they finished: file, source and compile ids changed)."""
    logs = [str(path) for name in ("ddp_4ranks_diverge", "collectives_3ranks") for path in
            sorted((DATA / name).glob("*.log"))]
    for order in ("as-they-come", "last-first"):
        done = run(LAST_FIRST, order, "report", *logs, "-o", order, "-j", "2", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert files_of(tmp_path / "as-they-come") == files_of(tmp_path / "last-first")


def test_what_the_child_raises_the_report_says_and_nothing_is_left(tmp_path):
    error = run(COMMAND, "report", str(LOG), "-o", "out", cwd=tmp_path, TLINDEX_TEST_CHILD="error")
    assert error.returncode == 1, error.stderr
    assert error.stderr.splitlines()[-1] == "Error: the disk said no", error.stderr
    assert "Traceback" not in error.stderr
    bug = run(COMMAND, "report", str(LOG), "-o", "out", cwd=tmp_path, TLINDEX_TEST_CHILD="bug")
    assert bug.returncode == 1 and "ValueError: a bug in the ingest" in bug.stderr, bug.stderr
    assert "In the ingest's process:" in bug.stderr and "in broken" in bug.stderr  # the child's traceback
    gone = run(COMMAND, "report", str(LOG), "-o", "out", cwd=tmp_path, TLINDEX_TEST_CHILD="killed")
    assert gone.returncode == 1, gone.stderr
    assert gone.stderr.splitlines()[-1] == ("Error: the logs' ingest ended without a result (its process's exit "
                                            "code: 3)"), gone.stderr
    assert not (tmp_path / "out").exists() and list((tmp_path / "tmp").iterdir()) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tmp"]  # no partial report either


def test_an_error_the_child_meets_before_its_ingest_or_one_that_does_not_unpickle_is_said(tmp_path):
    """Review: what the child met before the ingest (a folder it may not read) was lost ("ended without a result"),
    and an error whose class takes other arguments than its message failed in the parent with a TypeError."""
    unreadable = run(COMMAND, "report", str(LOG), "-o", "out", cwd=tmp_path, TLINDEX_TEST_CHILD="unreadable")
    assert unreadable.returncode == 1 and "without a result" not in unreadable.stderr, unreadable.stderr
    assert "Permission denied" in unreadable.stderr and "locked/x.log" in unreadable.stderr, unreadable.stderr
    odd = run(COMMAND, "report", str(LOG), "-o", "out", cwd=tmp_path, TLINDEX_TEST_CHILD="odd")
    assert odd.returncode == 1 and "RuntimeError: Odd: one and two" in odd.stderr, odd.stderr
    assert "In the ingest's process:" in odd.stderr and "TypeError" not in odd.stderr, odd.stderr
    assert not (tmp_path / "out").exists() and list((tmp_path / "tmp").iterdir()) == []


def test_a_report_that_cannot_fork_ingests_in_its_own_process(tmp_path):
    """Review: a fork refused (a limit of processes) ended the report; the ingest now runs in the process."""
    done = run(COMMAND, "report", str(LOG), "-o", "out", cwd=tmp_path, TLINDEX_TEST_CHILD="no fork")
    assert done.returncode == 0 and "WAITED FOR THE CHILD" not in done.stderr, done.stderr
    assert "Report of 1 run" in done.stderr and (tmp_path / "out" / "index.html").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_pool_whose_start_fails_leaves_no_thread_and_the_switch_interval_as_it_was(monkeypatch):
    """Review: a submit that failed while the workers started left the pool's threads and its switch interval."""
    from tlindex.report.workers import start_workers
    from tlindex.worker_pool import HANDOFF_S, WorkerPool

    before, threads = sys.getswitchinterval(), threading.active_count()
    with WorkerPool(1, multiprocessing.get_context("spawn")):
        assert sys.getswitchinterval() == min(before, HANDOFF_S)  # while a pool runs: its threads hand over quickly
    assert sys.getswitchinterval() == before
    monkeypatch.setattr(WorkerPool, "submit", lambda self, fn: (_ for _ in ()).throw(OSError(11, "no process")))
    with pytest.raises(OSError):
        start_workers(2)
    assert sys.getswitchinterval() == before and threading.active_count() == threads


def test_a_full_disk_during_the_childs_ingest_is_said_in_one_line(tmp_path):
    """Review: files limited to 2 MB (as a full disk) broke the child's staging file mid-write; the normalizer took the
    disk's error for a record's (a handler error) and wrote its rows again: a traceback (UNIQUE constraint failed)."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))

    (tmp_path / "tmp").mkdir()
    done = subprocess.run([sys.executable, "-m", "tlindex", "report", str(LOG), "-o", "out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, preexec_fn=limited,
                          env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error: "), done.stderr
    assert list((tmp_path / "tmp").iterdir()) == [] and not (tmp_path / "out").exists()
