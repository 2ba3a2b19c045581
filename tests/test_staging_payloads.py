"""A worker stages only the payloads the main database lacks, looked up a batch at a time."""

from __future__ import annotations

import hashlib
import sqlite3

from conftest import DATA

from tlindex import Database
from tlindex.ingest.chunks import split_points
from tlindex.ingest.staging import FLUSH_ROWS, StagingWriter
from tlindex.ingest.task import StagedBefore, Task, run_task


def _digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_payloads_the_main_database_holds_are_not_staged_again(tmp_path):
    main = tmp_path / "traces.db"
    conn = Database(main, create=True).conn
    known = [f"graph {i}" for i in range(0, 2 * FLUSH_ROWS + 7, 3)]  # across several batches
    with conn:
        conn.executemany("INSERT INTO payload_data (hash, size, text_size, data) VALUES (?, ?, ?, ?)",
                         [(_digest(text), len(text), len(text), text.encode()) for text in known])
    conn.close()
    staging = StagingWriter(tmp_path / "staging.db", main_db=main)
    texts = [f"graph {i}" for i in range(2 * FLUSH_ROWS + 7)]
    for text in texts:
        staging.add_payload(_digest(text), text, len(text))
    staging.close()
    staged = sqlite3.connect(tmp_path / "staging.db")
    hashes = {row[0] for row in staged.execute("SELECT hash FROM payload_data")}
    assert hashes == {_digest(text) for text in texts if text not in known}


def test_without_a_main_database_every_payload_is_staged(tmp_path):
    staging = StagingWriter(tmp_path / "staging.db")
    for text in ("a", "b" * 5000):
        staging.add_payload(_digest(text), text, len(text))
    staging.close()
    staged = sqlite3.connect(tmp_path / "staging.db")
    assert staged.execute("SELECT count(*) FROM payload_data").fetchone()[0] == 2


def _staged_and_referenced(path) -> tuple[set[str], set[str]]:
    conn = sqlite3.connect(path)
    try:
        return ({row[0] for row in conn.execute("SELECT hash FROM payload_data")},
                {row[0] for row in conn.execute("SELECT payload FROM envelopes WHERE payload IS NOT NULL")})
    finally:
        conn.close()


def test_a_worker_stages_a_payload_once_for_the_chunks_of_one_file(tmp_path):
    """The chunks of a file merge in order: what a worker staged for an earlier chunk is in the main database by
    the time a later chunk of it is merged (a real log whose second half repeats payloads of its first)."""
    log = next((DATA / "ddp_4ranks_diverge").glob("*rank_1_*.log"))
    main = tmp_path / "traces.db"
    Database(main, create=True).close()
    size = log.stat().st_size
    points = split_points(str(log), size, size // 2)
    assert len(points) == 2
    chunks = [Task(str(log), str(tmp_path / f"{i}.db"), main_db=str(main), start=start, end=end)
              for i, (start, end) in enumerate(zip(points, points[1:] + [None]))]
    staged = StagedBefore()
    for chunk in chunks:
        run_task(chunk, staged=staged)
    (first, _), (second, referenced) = (_staged_and_referenced(chunk.staging) for chunk in chunks)
    assert referenced <= first | second and referenced & first  # the second chunk leaves some to the first
    assert not first & second
    alone = Task(chunks[1].path, str(tmp_path / "alone.db"), main_db=str(main), start=points[1])
    run_task(alone)  # without what the worker staged before: every payload the main database lacks
    staged_alone, referenced_alone = _staged_and_referenced(alone.staging)
    assert referenced_alone == referenced and referenced <= staged_alone
