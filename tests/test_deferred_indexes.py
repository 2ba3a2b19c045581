"""Indexes a big ingest into an empty database makes after its merges (tlindex.ingest.deferred_indexes): the same
database as when they are kept row by row, and never left out by a failed, stopped or killed ingest."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import DATA, canonical, ingest, sqlite_tables, stop_at_chunk_fit

import tlindex.ingest.deferred_indexes as deferred_indexes
import tlindex.ingest.pipeline
from tlindex import Database
from tlindex.store.db import DEFERRED_INDEXES as DEFERRED
from tlindex.store.db import deferred_indexes as missing

LOGS = [str(DATA / name) for name in ("train_step", "graph_breaks", "ddp_2ranks")]


def schema(db) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        conn.close()


def deferred_sql(db) -> list[tuple]:
    return [row for row in schema(db) if row[1] in DEFERRED]


def lacking_at_each_merge(monkeypatch) -> list[list[str]]:
    """Which DEFERRED indexes the database lacks when each staging file is merged."""
    seen = []
    call = tlindex.ingest.pipeline.Merger.__call__

    def merged(self, result):
        seen.append(missing(self.conn))
        return call(self, result)

    monkeypatch.setattr(tlindex.ingest.pipeline.Merger, "__call__", merged)
    return seen


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """The logs ingested with every index kept row by row (they are far below DEFER_FROM)."""
    db = tmp_path_factory.mktemp("kept") / "t.db"
    ingest(db, LOGS, jobs=2, chunk_bytes=50_000)
    return db


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("jobs", [1, 2])
def test_an_ingest_into_an_empty_database_makes_its_indexes_after_the_merges(tmp_path, monkeypatch, kept, jobs):
    monkeypatch.setattr(deferred_indexes, "DEFER_FROM", 0)
    seen = lacking_at_each_merge(monkeypatch)
    db = tmp_path / "t.db"
    ingest(db, LOGS, jobs=jobs, chunk_bytes=50_000)
    assert seen and all(lacking == list(DEFERRED) for lacking in seen)  # none kept up during the merges
    assert schema(db) == schema(kept)  # made again, with the schema's own statements
    assert canonical(sqlite_tables(db)) == canonical(sqlite_tables(kept))
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)  # each index holds every row
    conn.close()


def test_a_database_with_rows_keeps_its_indexes_up_to_date(tmp_path, monkeypatch):
    monkeypatch.setattr(deferred_indexes, "DEFER_FROM", 0)
    db = tmp_path / "t.db"
    ingest(db, LOGS[:1], jobs=1)
    seen = lacking_at_each_merge(monkeypatch)
    ingest(db, LOGS[1:], jobs=1)
    assert seen and all(lacking == [] for lacking in seen)


def test_a_small_ingest_keeps_its_indexes_up_to_date(tmp_path, monkeypatch):
    seen = lacking_at_each_merge(monkeypatch)
    ingest(tmp_path / "t.db", LOGS, jobs=1)
    assert seen and all(lacking == [] for lacking in seen)


def test_an_ingest_stopped_between_its_merges_leaves_its_indexes_made(tmp_path, monkeypatch, kept):
    monkeypatch.setattr(deferred_indexes, "DEFER_FROM", 0)
    stop_at_chunk_fit(monkeypatch, 3)
    db = tmp_path / "t.db"
    with pytest.raises(KeyboardInterrupt):
        ingest(db, LOGS, jobs=2, chunk_bytes=50_000)
    assert len(deferred_sql(db)) == len(DEFERRED) and deferred_sql(db) == deferred_sql(kept)
    monkeypatch.undo()
    ingest(db, LOGS, jobs=2, chunk_bytes=50_000)  # continued as a grown log
    assert canonical(sqlite_tables(db)) == canonical(sqlite_tables(kept))


def test_indexes_a_killed_ingest_left_out_are_made_by_the_next_writer(tmp_path, kept):
    db = tmp_path / "t.db"
    ingest(db, LOGS[:1], jobs=1)
    conn = sqlite3.connect(db)
    for name in DEFERRED:  # as a process killed between its merges leaves the database
        conn.execute(f"DROP INDEX {name}")
    conn.close()
    Database(db, write=True).close()
    assert len(deferred_sql(db)) == len(DEFERRED) and deferred_sql(db) == deferred_sql(kept)
    ingest(db, LOGS[1:], jobs=1)
    assert schema(db) == schema(kept)
