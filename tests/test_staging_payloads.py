"""A worker stages only the payloads the main database lacks, looked up a batch at a time."""

from __future__ import annotations

import hashlib
import sqlite3

from tlindex.ingest.staging import FLUSH_ROWS, StagingWriter
from tlindex.store.db import open_db


def _digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_payloads_the_main_database_holds_are_not_staged_again(tmp_path):
    main = tmp_path / "traces.db"
    conn = open_db(main)
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
