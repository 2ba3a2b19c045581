"""Shared fixtures: databases built from the real logs in tests/data."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import sys

import pytest

from tlindex.ingest import ingest

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))  # tests read the scenario programs of generate.py
SHARED_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "tlparse"
ENVELOPE_RE = re.compile(rb"^(?:\[[^\]]*\]:)?[VIWEC]\d{4} [\d:.]+ +\d+ .+?:\d+\] (\{.*\})\r?$")


def scenario_logs(name: str) -> list[Path]:
    return sorted((DATA / name).iterdir())


def raw_envelopes(paths: list[Path]) -> list[dict]:
    """The envelope JSON of every envelope line, parsed independently of tlindex."""
    found = []
    for path in paths:
        with open(path, "rb") as file:
            for line in file:
                if not line.startswith(b"\t"):
                    match = ENVELOPE_RE.match(line.rstrip(b"\n"))
                    if match:
                        found.append(json.loads(match.group(1)))
    return found


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    return conn


@pytest.fixture(scope="session")
def fixtures_db(tmp_path_factory) -> Path:
    """Every real fixture of tests/data ingested once, two files at a time."""
    path = tmp_path_factory.mktemp("db") / "traces.db"
    summary = ingest(path, [str(DATA)], jobs=2)
    assert not summary.problems
    return path


@pytest.fixture(scope="session")
def traces_db(fixtures_db, tmp_path_factory) -> Path:
    """A copy of the fixtures database named traces.db (so Datasette serves it at /traces)."""
    import shutil

    path = tmp_path_factory.mktemp("served") / "traces.db"
    source = sqlite3.connect(fixtures_db)
    source.execute("PRAGMA wal_checkpoint(FULL)")
    source.close()
    shutil.copy(fixtures_db, path)
    return path


@pytest.fixture
def db(fixtures_db) -> sqlite3.Connection:
    conn = connect(fixtures_db)
    yield conn
    conn.close()


def scenario_run(conn: sqlite3.Connection, name: str) -> list[int]:
    """Run ids of the runs whose files come from tests/data/<name>."""
    return [row[0] for row in conn.execute(
        "SELECT DISTINCT s.run_id FROM sources s JOIN files f ON f.id = s.file_id "
        "WHERE f.directory LIKE ? ORDER BY s.run_id", (f"%/{name}",))]
