"""`tlindex report LOG` ingests in a forked child while it imports the renderer (tlindex.ingest.beside): the same
rows and the same report as an ingest in the process, what the child raised raised by the command, nothing left.

Each case runs in a fresh interpreter (a fork needs a process with no other thread, which a test runner may not be).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

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

def broken(*args, **kwargs):
    what = os.environ["TLINDEX_TEST_CHILD"]
    if what == "error":
        raise DatabaseError("the disk said no")
    if what == "bug":
        raise ValueError("a bug in the ingest")
    os._exit(3)  # killed, as by the OOM killer: no result

if os.environ.get("TLINDEX_TEST_CHILD"):
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
