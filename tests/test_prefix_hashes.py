"""A split file's prefix hashes, taken ahead by a thread, are the sha256 of exactly the bytes before each offset."""

from __future__ import annotations

import hashlib

import pytest
from conftest import DATA

import tlindex.ingest.prefix_hashes
from tlindex.ingest.chunks import split_points
from tlindex.ingest.prefix_hashes import PrefixHashes

LOG = next((DATA / "graph_breaks").glob("*.log"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_hash_at_each_chunk_end_and_between_them_is_that_of_the_bytes_before(monkeypatch):
    monkeypatch.setattr(tlindex.ingest.prefix_hashes, "BLOCK", 4096)  # many blocks between two marks
    content = LOG.read_bytes()
    points = split_points(str(LOG), len(content), len(content) // 5)
    assert len(points) >= 4
    hashes = PrefixHashes(str(LOG), points[1:])
    hashes.start()
    offsets = points[1:] + [len(content), 0, 1, points[1] + 17, points[-1] + 3]  # in merge order, then any
    assert [hashes.upto(offset) for offset in offsets] == [_sha256(content[:offset]) for offset in offsets]


def test_without_start_the_first_look_up_starts_it():
    content = LOG.read_bytes()
    hashes = PrefixHashes(str(LOG), [len(content) // 2])
    assert hashes.thread.ident is None  # no thread until asked: workers are forked first
    assert hashes.upto(len(content) // 2) == _sha256(content[:len(content) // 2])


def test_a_stopped_hasher_still_answers_by_hashing_the_rest_itself():
    content = LOG.read_bytes()
    hashes = PrefixHashes(str(LOG), [len(content) // 3, 2 * len(content) // 3])
    hashes.stop()
    hashes.start()
    hashes.stop()  # waits for the thread
    assert not hashes.thread.is_alive() and list(hashes.at) == [0]  # it hashed nothing ahead
    assert hashes.upto(2 * len(content) // 3) == _sha256(content[:2 * len(content) // 3])


def test_a_file_gone_before_the_thread_reads_it_leaves_the_error_to_the_merge(tmp_path):
    log = tmp_path / "gone.log"
    log.write_bytes(LOG.read_bytes())
    hashes = PrefixHashes(str(log), [1000])
    log.unlink()
    hashes.start()
    with pytest.raises(FileNotFoundError) as error:  # a file that cannot be read fails its merge
        hashes.upto(1000)
    assert error.value.filename == str(log)
