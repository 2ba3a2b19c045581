"""A big file parsed in chunks by several workers gives the database one worker gives.

Chunks are parsed without the state before them and fitted to the file's rows
when merged (tlindex.ingest.continuation). Tiny chunks put boundaries everywhere: inside
compilations, between spans' begin and end events, after torch._dynamo.reset(),
between a string table entry and its uses.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3

import pytest
from conftest import DATA, SHARED_CORPUS, VERSIONS, canonical, indexes_out_of_step, ingest, sqlite_tables, stop_at_chunk_fit

import tlindex.ingest.chunks
import tlindex.ingest.pipeline
from tlindex.ingest.chunks import shrinking, split_points

SCENARIOS = ["train_step", "recompiles", "compile_errors", "graph_breaks", "dynamic", "cache", "ddp_2ranks",
             "compiled_autograd", "export", "ddp_4ranks_diverge", "collectives_3ranks", "draft_export", "provenance"]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    db = tmp_path_factory.mktemp("whole") / "t.db"
    ingest(db, [str(DATA / name) for name in SCENARIOS], jobs=1)
    return canonical(sqlite_tables(db))


@pytest.mark.parametrize("chunk_bytes", [pytest.param(4096, marks=pytest.mark.slow), 50_000, None])
def test_chunked_ingest_equals_one_pass(tmp_path, whole, chunk_bytes, monkeypatch):
    db = tmp_path / "t.db"
    if chunk_bytes is None:  # the default: big files and each worker's last ones in shrinking chunks, made small here
        monkeypatch.setattr(tlindex.ingest.chunks, "MIN_CHUNK", 200_000)
        monkeypatch.setattr(tlindex.ingest.chunks, "TAIL_CHUNK", 20_000)
        monkeypatch.setattr(tlindex.ingest.pipeline, "TAIL_CHUNK", 20_000)
    summary = ingest(db, [str(DATA / name) for name in SCENARIOS], jobs=2, chunk_bytes=chunk_bytes)
    got = canonical(sqlite_tables(db))
    assert set(got) == set(whole)
    for table in whole:
        assert got[table] == whole[table], table
    assert summary.files == sum(len(list((DATA / name).iterdir())) for name in SCENARIOS)
    # Indexed between merges (text_index.APPEND_ONLY) and after the last: every index holds exactly its table's rows.
    assert indexes_out_of_step(db) == []


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason="needs ../shared/corpus/tlparse")
def test_chunked_ingest_of_the_tlparse_corpus_equals_one_pass(tmp_path):
    """Real logs with resets followed by other compile ids, CRLF, launcher prefixes, ranks."""
    # The corpus holds byte-identical copies; which one is kept depends on which
    # finishes first, so each content is ingested once here.
    unique = {hashlib.sha256(p.read_bytes()).digest(): str(p)
              for p in sorted(SHARED_CORPUS.rglob("*"), reverse=True) if p.is_file()}
    paths = sorted(unique.values())
    ingest(tmp_path / "whole.db", paths, jobs=1)
    ingest(tmp_path / "chunked.db", paths, jobs=2, chunk_bytes=20_000)
    whole, got = canonical(sqlite_tables(tmp_path / "whole.db")), canonical(sqlite_tables(tmp_path / "chunked.db"))
    for table in whole:
        assert got[table] == whole[table], table


@pytest.mark.skipif(not (SHARED_CORPUS / "artifacts.log").exists(), reason="needs ../shared/corpus/tlparse")
@pytest.mark.parametrize("chunk_bytes", [None, 20_000])
def test_a_compile_is_named_by_its_metrics_not_its_stacks_last_frame_however_it_is_chunked(tmp_path, chunk_bytes):
    """artifacts.log (an older torch) logs a dynamo_start whose stack ends in torch's own _convert_frame; its
    compilation_metrics name the frame compiled: `fn` of test_codecache.py, line 439. In one pass and in chunks."""
    import json

    log = SHARED_CORPUS / "artifacts.log"
    metrics = [json.loads(line.split("] ", 1)[1])["compilation_metrics"] for line in log.read_text().splitlines()
               if '] {"compilation_metrics"' in line]
    ingest(tmp_path / "t.db", [str(log)], jobs=2 if chunk_bytes else 1, chunk_bytes=chunk_bytes)
    conn = sqlite3.connect(tmp_path / "t.db")
    named = conn.execute("SELECT co_name, co_filename, co_firstlineno FROM compiles WHERE compile_id != '-/-'").fetchall()
    conn.close()
    assert named == [(m["co_name"], m["co_filename"], m["co_firstlineno"]) for m in metrics]


def test_split_points_fall_on_envelope_lines():
    log = sorted((DATA / "train_step").iterdir())[0]
    content = log.read_bytes()
    points = split_points(str(log), len(content), 10_000)
    assert len(points) > 10 and points[0] == 0
    for point in points[1:]:
        assert content[point - 1:point] == b"\n" and content[point:point + 1] in b"VIWEC"


def test_shrinking_chunks_fall_on_envelope_lines_and_shrink():
    log = sorted((DATA / "train_step").iterdir())[0]
    content = log.read_bytes()
    points = split_points(str(log), len(content), lambda left: max(5_000, left // 3))
    lengths = [end - start for start, end in zip(points, points[1:] + [len(content)])]
    assert len(points) > 5 and points[0] == 0
    assert lengths[0] > lengths[len(lengths) // 2] > 4_000 and lengths[-1] >= 2_500  # no last sliver: it joins
    for point in points[1:]:
        assert content[point - 1:point] == b"\n" and content[point:point + 1] in b"VIWEC"
    assert shrinking(2)(300 << 20) == 100 << 20 and shrinking(2)(1 << 20) == tlindex.ingest.chunks.TAIL_CHUNK


def test_a_file_under_a_few_tail_chunks_is_cut_in_equal_ones(monkeypatch):
    """Shrinking chunks are at least TAIL_CHUNK (16 MB): a 27 MB log was cut in 16 + 11 MB, and one worker waited
    for the other. Under (jobs + 1) tail chunks, a file is cut in equal ones: jobs + 1, or as many of MIN_CHUNK as
    it holds. Every byte a record start here, so the chunks are exactly as long as asked."""
    import tlindex.ingest.chunks

    monkeypatch.setattr(tlindex.ingest.chunks, "next_record_start", lambda file, position, size: position + 1)
    log = str(sorted((DATA / "train_step").iterdir())[0])
    mb = 1 << 20

    def chunks(size: int, jobs: int) -> list[float]:
        points = split_points(log, size, shrinking(jobs, size))
        return [round((end - start) / mb, 2) for start, end in zip(points, points[1:] + [size])]

    assert chunks(27 * mb, 2) == [9, 9, 9] and chunks(27 * mb, 4) == [9, 9, 9]
    assert chunks(12 * mb, 2) == [12] and chunks(20 * mb, 2) == [10, 10]
    assert len(chunks(60 * mb, 8)) == 7 and max(chunks(60 * mb, 8)) - min(chunks(60 * mb, 8)) < 0.02
    assert chunks(47 * mb, 2) == [15.67, 15.67, 15.67]
    for size, jobs in ((48 * mb, 2), (200 * mb, 2), (400 * mb, 8)):  # from (jobs + 1) tail chunks up: as before
        assert split_points(log, size, shrinking(jobs, size)) == split_points(log, size, shrinking(jobs))


@pytest.mark.parametrize("many", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_an_interrupted_chunked_ingest_reads_as_a_grown_log_and_is_continued(tmp_path, whole, monkeypatch, many):
    """A chunked ingest merges in the plan's order, so a stop leaves one file part-merged; many at once are left by
    several stopped ingests (or by an older tlindex, which merged chunks in the order they finished)."""
    db = tmp_path / "t.db"
    paths = [str(DATA / name) for name in SCENARIOS]
    for stopped in [[path] for path in paths[:6]] if many else [paths]:
        stop_at_chunk_fit(monkeypatch, 2 if many else 5)
        with pytest.raises(KeyboardInterrupt):
            ingest(db, stopped, jobs=2, chunk_bytes=50_000)
        monkeypatch.undo()
    conn = sqlite3.connect(db)
    partial = [path for path, size in conn.execute("SELECT path, bytes_ingested FROM files")
               if size < os.path.getsize(path)]
    conn.close()
    assert len(partial) == (6 if many else 1)

    again = ingest(db, paths, jobs=2, chunk_bytes=50_000)
    assert again.continued == len(partial)
    got = canonical(sqlite_tables(db))
    for table in whole:
        assert got[table] == whole[table], table


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
def test_workers_finishing_in_any_order_give_the_same_rows(tmp_path, monkeypatch):
    """Files and chunks are merged in an order fixed by the input (tlindex.ingest.pipeline.merge_order) whatever
    order the workers finish them in: every row has the same id from one ingest to the next (a compile's page, a
    report's file names), not only the same content (the one process gives: test_chunked_ingest_equals_one_pass)."""
    import concurrent.futures

    def last_first(pending, timeout=None, return_when=None):  # every task done, said in the reverse order
        finished, _ = concurrent.futures.wait(pending)
        return sorted(finished, key=lambda future: future.result().staging, reverse=True), set()

    paths = [str(DATA / name) for name in ("ddp_4ranks_diverge", "collectives_3ranks", "cache", "train_step")]
    for chunk_bytes in (10**9, 400_000):
        ingest(tmp_path / f"{chunk_bytes}.db", paths, jobs=2, chunk_bytes=chunk_bytes)
        with monkeypatch.context() as patched:
            patched.setattr(tlindex.ingest.pipeline, "wait", last_first)
            ingest(tmp_path / f"{chunk_bytes}-last-first.db", paths, jobs=2, chunk_bytes=chunk_bytes)
        got, expected = sqlite_tables(tmp_path / f"{chunk_bytes}-last-first.db"), sqlite_tables(tmp_path / f"{chunk_bytes}.db")
        for table in expected:
            assert [_without_times(row) for row in got[table]] == [_without_times(row) for row in expected[table]], \
                (chunk_bytes, table)


def test_tasks_are_merged_in_the_order_they_are_expected_to_finish():
    """A slow task planned first (a big .gz log) does not hold back the merges of the small logs after it."""
    from tlindex.ingest.pipeline import Planned, merge_order
    from tlindex.ingest.task import Task

    def planned(*files: tuple[str, int]) -> list[Planned]:
        return [Planned(Task(name, f"{number}.db"), size) for number, (name, size) in enumerate(files)]

    assert merge_order(planned(("a.log", 10), ("b.log", 10), ("c.log", 10), ("d.log", 10)), 2) == [0, 1, 2, 3]
    assert merge_order(planned(("big.log.gz", 20), ("s1.log", 10), ("s2.log", 10), ("s3.log", 10)), 2) == [1, 2, 3, 0]
    assert merge_order(planned(("a.log", 30), ("b.log", 10), ("c.log", 10)), 1) == [0, 1, 2]


def _without_times(row: dict) -> dict:
    return {column: value for column, value in row.items() if column != "ingested_at"}


def test_a_process_that_changes_rank_is_reported_once_however_it_is_chunked(tmp_path):
    """Hand-made from a real rank log: its second half claims rank 0 (envelope lines only, md5s hold)."""
    log = next(p for p in sorted((DATA / "ddp_2ranks").iterdir()) if "rank_1" in p.name)
    lines = log.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    edited = tmp_path / "logs" / "two_ranks_in_one_process.log"
    edited.parent.mkdir()
    edited.write_bytes(b"".join(lines[:half] + [line.replace(b'"rank": 1', b'"rank": 0')
                                                 if not line.startswith(b"\t") else line for line in lines[half:]]))
    ingest(tmp_path / "whole.db", [str(edited)], jobs=1)
    for chunk_bytes in (3000, 20_000, 100_000):
        db = tmp_path / f"chunked-{chunk_bytes}.db"
        ingest(db, [str(edited)], jobs=2, chunk_bytes=chunk_bytes)
        assert canonical(sqlite_tables(db)) == canonical(sqlite_tables(tmp_path / "whole.db"))
    conn = sqlite3.connect(tmp_path / "whole.db")
    assert conn.execute("SELECT count(*) FROM ingest_errors WHERE message LIKE '%logs rank 0 after rank 1'").fetchone()[0] == 1


@pytest.mark.slow
def test_replace_of_a_chunked_file_gives_the_same_database(tmp_path, whole):
    db = tmp_path / "t.db"
    paths = [str(DATA / name) for name in SCENARIOS]
    ingest(db, paths, jobs=2, chunk_bytes=50_000)
    summary = ingest(db, paths, jobs=2, chunk_bytes=30_000, replace=True)
    assert summary.files == sum(len(list((DATA / name).iterdir())) for name in SCENARIOS)
    got = canonical(sqlite_tables(db))
    for table in whole:
        assert got[table] == whole[table], table


def test_a_chunk_that_starts_inside_a_reset_or_a_warm_start_gives_the_rows_of_one_pass(tmp_path, monkeypatch):
    """The chunks of a log are cut where a compile's state is decided: between the spans the next compile of 0/0
    opens after torch._dynamo.reset() and its dynamo_start (closures), and between a warm start's loading of its guards
    and the end of its whole-frame span (mega_cache_warm, torch 2.15): the rows are those of one pass."""
    logs = [next((DATA / "closures").glob("*.log")), *sorted((VERSIONS / "2.15.0" / "mega_cache_warm").glob("*.log"))]
    one = tmp_path / "one.db"
    ingest(one, [str(log) for log in logs], jobs=1)
    cuts = {}
    for log in logs:
        data, offsets = log.read_bytes(), set()
        for needle in (b'{"dynamo_start"', b'"name": "precompile_build_guards"'):
            at = data.find(needle)
            while at != -1:  # a chunk begins with the record (the envelope line) that holds it
                offsets.add(data.rfind(b"\nV", 0, at) + 1)
                at = data.find(needle, at + 1)
        cuts[str(log)] = sorted({0} | offsets)
        assert len(cuts[str(log)]) > 1
    monkeypatch.setattr(tlindex.ingest.pipeline, "split_points", lambda path, size, chunk_bytes: cuts[str(path)])
    chunked = tmp_path / "chunked.db"
    ingest(chunked, [str(log) for log in logs], jobs=2, chunk_bytes=1000)
    expected, got = canonical(sqlite_tables(one)), canonical(sqlite_tables(chunked))
    for table in expected:
        assert got[table] == expected[table], table
