"""Split one big log into chunks at record boundaries, so that several workers parse it.

A chunk starts at an envelope line (a payload line starts with a TAB, so no
record is ever cut in two). Each chunk is parsed without the state before it
and fitted to the file's rows when it is merged, in order (tlindex.resume).
Every chunk is merged (and committed) as soon as the chunks before it are: an
interrupted ingest leaves the file's first chunks, which read like a log that
has since grown, and the next ingest continues it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass, field
from typing import BinaryIO

from .merge import delete_file_rows, merge
from .reader import ENVELOPE_RE, LAUNCHER_PREFIX_RE
from .resume import Reparse, fit_chunk, report_file_ranks, restore_state
from .task import Resume, Task, TaskResult, run_task

MIN_CHUNK = 64 << 20     # smaller chunks cost more in fitting than parallel parsing saves
WINDOW = 1 << 20         # bytes read at a time while looking for a record start
MARGIN = 4096            # an envelope line's prefix is decided within this many bytes


def chunk_size(total_bytes: int, jobs: int) -> int:
    """How big a chunk to aim for: about two per worker over the whole ingest."""
    return max(MIN_CHUNK, -(-total_bytes // (2 * jobs)))


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


def split_points(path: str, size: int, chunk_bytes: int) -> list[int]:
    """Start offsets of the chunks of a file (the first is 0), about `chunk_bytes` apart."""
    points = [0]
    with open(path, "rb") as file:
        target = chunk_bytes
        while target < size:
            start = next_record_start(file, target - 1, size)  # the line that starts at `target` counts
            if start is None:
                break
            points.append(start)
            target = start + chunk_bytes
    return points


@dataclass
class Counts:
    envelopes: int = 0
    compiles: int = 0
    errors: int = 0
    md5_failures: int = 0
    reparsed: int = 0      # chunks parsed again as continuations


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
    sha256: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    hashed: int = 0               # bytes of the file hashed so far

    def tasks(self) -> list[Task]:
        ends = self.points[1:] + [None]
        return [Task(self.path, f"{self.staging}.{i}.db", main_db=self.main_db, start=start, end=end)
                for i, (start, end) in enumerate(zip(self.points, ends))]

    @property
    def done(self) -> bool:
        return self.merged == len(self.points)

    def add(self, conn: sqlite3.Connection, index: int, result: TaskResult) -> None:
        """Take a chunk's result; merge every chunk whose turn has come."""
        self.ready[index] = result
        while self.merged in self.ready:
            self._merge(conn, self.merged, self.ready.pop(self.merged))
            self.merged += 1

    def _hash_to(self, offset: int) -> str:
        with open(self.path, "rb") as file:
            file.seek(self.hashed)
            while self.hashed < offset:
                block = file.read(min(1 << 20, offset - self.hashed))
                if not block:
                    break
                self.sha256.update(block)
                self.hashed += len(block)
        return self.sha256.hexdigest()

    def _merge(self, conn: sqlite3.Connection, index: int, result: TaskResult) -> None:
        sha256 = self._hash_to(result.offset)
        last = index == len(self.points) - 1
        complete = report_file_ranks if last else None
        set_sha256 = lambda c: c.execute("UPDATE staging.files SET sha256 = ?", (sha256,))  # noqa: E731
        continued = 0
        if index == 0:
            self.file_id = merge(conn, result.staging, replace_file=self.replace_file, prepare=set_sha256,
                                 complete=complete)
        else:
            (lines_before,) = conn.execute("SELECT lines_ingested FROM files WHERE id = ?",
                                           (self.file_id,)).fetchone()
            fitted: list[int] = []
            try:
                merge(conn, result.staging, resumed_file=self.file_id, complete=complete,
                      prepare=lambda c: fitted.append(fit_chunk(c, result.processes or {}, self.file_id,
                                                                lines_before, sha256)))
                continued = fitted[0]
            except Reparse:
                os.unlink(result.staging)
                result = self._reparse(conn, index, lines_before)
                merge(conn, result.staging, resumed_file=self.file_id, prepare=set_sha256, complete=complete)
        os.unlink(result.staging)
        self.counts.envelopes += result.envelopes
        self.counts.compiles += result.compiles - continued
        self.counts.errors += result.errors
        self.counts.md5_failures += result.md5_failures

    def _reparse(self, conn: sqlite3.Connection, index: int, lines_before: int) -> TaskResult:
        """Parse a chunk again, in this process, with the state the file's rows end with."""
        self.counts.reparsed += 1
        start = self.points[index]
        end = self.points[index + 1] if index + 1 < len(self.points) else None
        resume = Resume(-self.file_id, lines_before, start, None, restore_state(conn, self.file_id))
        return run_task(Task(self.path, f"{self.staging}.{index}.again.db", resume, self.main_db,
                             start=start, end=end))

    def drop_if_duplicate(self, conn: sqlite3.Connection) -> bool:
        """After the last chunk: whether the same content was ingested under another path (then drop it)."""
        duplicate = conn.execute("SELECT 1 FROM files WHERE sha256 = ? AND id != ?",
                                 (self.sha256.hexdigest(), self.file_id)).fetchone()
        if duplicate:
            conn.execute("BEGIN IMMEDIATE")
            delete_file_rows(conn, self.file_id)
            conn.execute("COMMIT")
        return duplicate is not None
