"""Several `tlindex ingest` processes writing one new database at the same moment."""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path

import pytest
from conftest import DATA, connect, ingest

SCENARIOS = ["graph_breaks", "recompiles", "export", "ddp_2ranks"]
TABLES = ["files", "sources", "envelopes", "compiles", "artifacts", "payloads", "strings", "volume"]


def _ingest_at_once(barrier, db_path: str, scenario: str, errors, defer: bool = False) -> None:
    try:
        if defer:  # each ingest a big one: those into the still empty database drop the deferred indexes
            import tlindex.ingest.deferred_indexes

            tlindex.ingest.deferred_indexes.DEFER_FROM = 0
        barrier.wait(timeout=60)  # every process starts its ingest at the same moment
        summary = ingest(db_path, [str(DATA / scenario)], jobs=1)
        assert not summary.problems, summary.problems
    except BaseException:
        errors.put(f"{scenario}: {traceback.format_exc()}")


def counts(db_path: Path) -> dict[str, int]:
    conn = connect(db_path)
    try:
        found = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}
        found["migrations"] = conn.execute("SELECT count(*) FROM _tlindex_migrations").fetchone()[0]
        found["fts rows"] = conn.execute("SELECT count(*) FROM artifacts_fts").fetchone()[0]
        found["index statements"] = conn.execute("SELECT group_concat(sql, ';') FROM (SELECT sql FROM sqlite_master "
                                                 "WHERE type = 'index' AND tbl_name = 'envelopes' ORDER BY name)"
                                                 ).fetchone()[0]
        return found
    finally:
        conn.close()


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
@pytest.mark.parametrize("defer", [False, True])
def test_four_ingests_started_at_once_into_a_new_database_all_land(tmp_path, defer):
    expected_path = tmp_path / "one_by_one.db"
    for scenario in SCENARIOS:
        ingest(expected_path, [str(DATA / scenario)], jobs=1)
    expected = counts(expected_path)
    context = multiprocessing.get_context("spawn")
    for attempt in range(3):
        db_path = tmp_path / f"at_once_{attempt}.db"
        barrier, errors = context.Barrier(len(SCENARIOS)), context.Queue()
        processes = [context.Process(target=_ingest_at_once, args=(barrier, str(db_path), scenario, errors, defer))
                     for scenario in SCENARIOS]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=300)
        failures = [errors.get() for _ in range(errors.qsize())] if not errors.empty() else []
        if failures:
            pytest.fail("\n".join(failures))  # the whole tracebacks
        assert [p.exitcode for p in processes] == [0] * len(SCENARIOS)
        assert counts(db_path) == expected


SAME = ["graph_breaks", "ddp_2ranks", "recompiles", "compile_errors"]


def _ingest_same_at_once(barrier, db_path: str, errors) -> None:
    try:
        barrier.wait(timeout=60)
        summary = ingest(db_path, [str(DATA / scenario) for scenario in SAME], jobs=2, chunk_bytes=64 << 10)
        assert not summary.problems, summary.problems
    except BaseException:
        errors.put(traceback.format_exc())


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
def test_two_ingests_of_the_same_paths_at_once_ingest_each_path_once(tmp_path):
    """Each path is claimed before it is planned: the second ingest waits, then finds it ingested
    (before, both parsed it, and split files were merged twice: 36-38 files rows for 32 paths)."""
    expected_path = tmp_path / "once.db"
    ingest(expected_path, [str(DATA / scenario) for scenario in SAME], jobs=2, chunk_bytes=64 << 10)
    expected = counts(expected_path)
    context = multiprocessing.get_context("spawn")
    for attempt in range(2):
        db_path = tmp_path / f"twice_{attempt}.db"
        barrier, errors = context.Barrier(2), context.Queue()
        processes = [context.Process(target=_ingest_same_at_once, args=(barrier, str(db_path), errors))
                     for _ in range(2)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=300)
        if not errors.empty():
            pytest.fail(errors.get())
        assert [p.exitcode for p in processes] == [0, 0]
        assert counts(db_path) == expected
