"""Split one big log into chunks at record boundaries, so that several workers parse it.

A chunk starts at an envelope line (a payload line starts with a TAB, so no
record is ever cut in two). The one piece of state that changes how a record
is read is which compile ids the process has started or finished since its
last torch._dynamo.reset(): a dynamo_start of such an id is a reset. The main
process finds it before each chunk by scanning only the dynamo_start and
compilation_metrics lines of the chunks before (CompileState), so each worker
parses its chunk exactly as a single pass would; everything else (ids, totals,
spans, string tables) is fitted when the chunk is merged, in order (tlindex.ingest.continuation).
Every chunk is merged (and committed) as soon as the chunks before it are: an
interrupted ingest leaves the file's first chunks, which read like a log that
has since grown, and the next ingest continues it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from typing import BinaryIO, Callable

import orjson

from tlindex.ingest.continuation import fit_chunk, report_file_ranks
from tlindex.ingest.merge import merge
from tlindex.ingest.normalize.state import CompileState
from tlindex.ingest.prefix_hashes import PrefixHashes
from tlindex.ingest.reader import ENVELOPE_RE, LAUNCHER_PREFIX_RE
from tlindex.ingest.task import Task, TaskResult

STATE_RECORDS = (b'] {"dynamo_start"', b'] {"compilation_metrics"')  # envelopes that change it

MIN_CHUNK = 8 << 20      # smaller chunks cost more in fitting than parallel parsing saves (with forked workers:
# a 27 MB log in 8 MB chunks, 1.06 -> 0.83 s wall for +22 % CPU; with spawned ones 64 MB was the least)
TAIL_CHUNK = 16 << 20  # the least a shrinking chunk holds: each chunk costs a merge and a worker's start
WINDOW = 1 << 20         # bytes read at a time while looking for a record start
MARGIN = 4096            # an envelope line's prefix is decided within this many bytes


def chunk_size(total_bytes: int, jobs: int) -> int:
    """How big a file must be to be split: about two chunks' worth per worker over the whole ingest."""
    return max(MIN_CHUNK, -(-total_bytes // (2 * jobs)))


def shrinking(jobs: int, size: int | None = None) -> Callable[[int], int]:
    """Chunk lengths for a split file, each a share of what is left (`remaining // (jobs + 1)`, at least
    TAIL_CHUNK): the chunks shrink towards the file's end, so the main process merges the first ones while
    the workers parse the later ones, and what is left to merge once every worker is done is a small last
    chunk (equal chunks left two whole chunks to merge on one core at the end: at 1 GB, 2 of 4 chunks of 256 MB).
    A file of `size` under (jobs + 1) tail chunks is cut in equal ones instead, jobs + 1 of them or as many of
    MIN_CHUNK as it holds (a file under two is not cut): a 27 MB log was cut in 16 + 11 MB, and one worker waited
    for the other (in thirds: 0.88x the wall, 10 pairs)."""
    least = TAIL_CHUNK
    if size is not None and size < (jobs + 1) * TAIL_CHUNK:
        chunks = max(1, min(jobs + 1, size // MIN_CHUNK))
        least = -(-size // chunks)
    return lambda remaining: max(least, remaining // (jobs + 1))


def _is_record_start(window: bytes, at: int) -> bool:
    if ENVELOPE_RE.match(window, at):
        return True
    prefix = LAUNCHER_PREFIX_RE.match(window, at)
    return prefix is not None and ENVELOPE_RE.match(window, prefix.end()) is not None


def next_record_start(file: BinaryIO, position: int, size: int) -> int | None:
    """The offset of the first envelope line that starts after `position`, if any."""
    while position < size:
        file.seek(position)
        window = file.read(WINDOW + MARGIN)
        newline = window.find(b"\n")
        while newline != -1 and (newline + 1 < len(window) - MARGIN or position + len(window) >= size):
            if newline + 1 >= len(window):
                return None  # the file ends with this newline
            if _is_record_start(window, newline + 1):
                return position + newline + 1
            newline = window.find(b"\n", newline + 1)
        if len(window) <= MARGIN:
            return None
        position += len(window) - MARGIN
    return None


def split_points(path: str, size: int, chunk_bytes: int | Callable[[int], int]) -> list[int]:
    """Start offsets of the chunks of a file (the first is 0), about `chunk_bytes` apart, or each the length
    `chunk_bytes(bytes left)` after the one before (`shrinking`); a last piece under half a chunk joins the one before."""
    length = chunk_bytes if callable(chunk_bytes) else (lambda remaining: chunk_bytes)
    points = [0]
    with open(path, "rb") as file:
        step = length(size)
        target = step
        while target < size and (not callable(chunk_bytes) or size - target >= step // 2):
            start = next_record_start(file, target - 1, size)  # the line that starts at `target` counts
            if start is None:
                break
            points.append(start)
            step = length(size - start)
            target = start + step
    return points


def scan_compile_state(path: str, start: int, end: int, state: CompileState) -> None:
    """Fold the dynamo_start and compilation_metrics records of bytes [start, end) into state."""
    with open(path, "rb") as file:
        file.seek(start)
        remaining = end - start
        carry = b""
        while remaining > 0:
            block = file.read(min(WINDOW, remaining))
            if not block:
                break
            remaining -= len(block)
            block = carry + block if carry else block
            cut = block.rfind(b"\n") + 1 if remaining > 0 else len(block)  # whole lines only
            carry = block[cut:]
            found = []
            for needle in STATE_RECORDS:  # bytes.find is far faster than a regex here
                at = block.find(needle, 0, cut)
                while at != -1:
                    found.append(at)
                    at = block.find(needle, at + len(needle), cut)
            for at in sorted(found):
                line_start = block.rfind(b"\n", 0, at) + 1
                if block[line_start:line_start + 1] == b"\t":
                    continue  # inside a payload
                line_end = block.find(b"\n", at, cut)
                _fold(block[line_start:line_end if line_end != -1 else cut], state)


def _fold(line: bytes, state: CompileState) -> None:
    envelope = ENVELOPE_RE.search(line)
    if envelope is None:
        return
    body = line[envelope.end():].rstrip(b"\r")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # as the reader does
            data = json.loads(body.decode("utf-8", "replace"))
        except ValueError:
            return
    if isinstance(data, dict) and data:
        state.fold(int(envelope.group(5)), data)


@dataclass
class Counts:
    envelopes: int = 0
    compiles: int = 0
    errors: int = 0
    md5_failures: int = 0
    unknown: dict[str, int] = field(default_factory=dict)


@dataclass
class SplitFile:
    """A file whose chunks are parsed by several workers and merged in order."""

    path: str
    points: list[int]             # chunk start offsets
    staging: str                  # staging databases are named <staging>.<chunk>.db
    replace_file: int | None = None
    main_db: str | None = None
    ready: dict[int, TaskResult] = field(default_factory=dict)
    merged: int = 0               # chunks merged so far
    file_id: int | None = None
    counts: Counts = field(default_factory=Counts)
    digest: str = ""              # sha256 of the file up to the last chunk merged
    hashes: PrefixHashes = field(init=False)  # of the file up to each chunk's end, hashed ahead by a thread
    state: CompileState = field(default_factory=CompileState)
    scanned: int = 0              # chunks whose compile state is in `state`

    def __post_init__(self) -> None:
        self.hashes = PrefixHashes(self.path, self.points[1:])

    def tasks(self) -> list[Task]:
        """One task per chunk; give each its compile state (state_before) when it is submitted."""
        ends = self.points[1:] + [None]
        return [Task(self.path, f"{self.staging}.{index}.db", main_db=self.main_db, start=start, end=end)
                for index, (start, end) in enumerate(zip(self.points, ends))]

    def state_before(self, index: int) -> CompileState | None:
        """The compile state at the start of chunk `index` (scanning the chunks before, once)."""
        if index == 0:
            return None
        while self.scanned < index:
            scan_compile_state(self.path, self.points[self.scanned], self.points[self.scanned + 1], self.state)
            self.scanned += 1
        return self.state.copy()

    @property
    def done(self) -> bool:
        return self.merged == len(self.points)

    def add(self, conn: sqlite3.Connection, index: int, result: TaskResult, attach=None) -> None:
        """Take a chunk's result; merge every chunk whose turn has come (`attach`: merge's hook, giving new
        sources their run)."""
        self.ready[index] = result
        while self.merged in self.ready:
            self._merge(conn, self.merged, self.ready.pop(self.merged), attach)
            self.merged += 1

    def _merge(self, conn: sqlite3.Connection, index: int, result: TaskResult, attach=None) -> None:
        sha256 = self.digest = self.hashes.upto(result.offset)
        last = index == len(self.points) - 1
        complete = report_file_ranks if last else None
        set_sha256 = lambda c: c.execute("UPDATE staging.files SET sha256 = ?", (sha256,))  # noqa: E731
        if index == 0:
            self.file_id = merge(conn, result.staging, replace_file=self.replace_file, prepare=set_sha256,
                                 complete=complete, attach=attach)
        else:
            (lines_before,) = conn.execute("SELECT lines_ingested FROM files WHERE id = ?",
                                           (self.file_id,)).fetchone()
            merge(conn, result.staging, continued_file=self.file_id, complete=complete, attach=attach,
                  prepare=lambda c: fit_chunk(c, result.processes or {}, self.file_id, lines_before, sha256))
        os.unlink(result.staging)
        self.counts.envelopes += result.envelopes
        self.counts.errors += result.errors
        self.counts.md5_failures += result.md5_failures
        for name, records in result.unknown.items():
            self.counts.unknown[name] = self.counts.unknown.get(name, 0) + records
        if last:
            (self.counts.compiles,) = conn.execute(
                "SELECT count(*) FROM compile_times WHERE source_id IN (SELECT id FROM sources WHERE file_id = ?)",
                (self.file_id,)).fetchone()
