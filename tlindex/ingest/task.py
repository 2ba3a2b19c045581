"""One ingest task: read one log file into a staging database (runs in a worker)."""

from __future__ import annotations

import hashlib
import io
import os
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Callable

from tlindex.ingest.normalize import CompileState, FileNormalizer, Process
from tlindex.ingest.reader import Clock, LogReader
from tlindex.ingest.staging import StagingWriter
from tlindex.ingest.typecheck import enforce_types

READ_BUFFER = 1 << 20
PROGRESS_EVERY = 2048  # records between progress reports


@dataclass
class Resume:
    """Where an earlier ingest of a growing log stopped, and the state it had."""

    file_id: int                     # negative: the file's id in the main database
    lines: int
    offset: int
    sha256: str                      # of the first `offset` bytes
    processes: dict[int, Process] = field(default_factory=dict)


@dataclass
class Task:
    path: str
    staging: str
    resume: Resume | None = None
    main_db: str | None = None      # payloads already there are not staged again
    # A chunk of a file split across workers (tlindex.ingest.chunks): its byte range and
    # the compile ids started before it; the caller fits it to the file and hashes it.
    start: int = 0
    end: int | None = None           # None: to the end of the file
    compile_state: CompileState | None = None

    @property
    def is_chunk(self) -> bool:
        return self.start > 0 or self.end is not None


@dataclass
class TaskResult:
    path: str
    staging: str
    sha256: str
    resumed: bool
    envelopes: int = 0
    compiles: int = 0
    errors: int = 0
    md5_failures: int = 0
    bytes_read: int = 0
    lines: int = 0                  # lines consumed (counted from the chunk's start for a chunk)
    offset: int = 0                 # byte offset consumed up to
    processes: dict[int, Process] | None = None  # a chunk's final state, to fit it to the file
    unknown: dict[str, int] = field(default_factory=dict)  # records of kinds tlindex does not know yet, by kind


class HashingReader(io.RawIOBase):
    """A raw stream that hashes (and counts) every byte read through it."""

    def __init__(self, inner: BinaryIO):
        self.inner = inner
        self.sha256 = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.inner.readinto(buffer)
        if n:
            self.sha256.update(memoryview(buffer)[:n])
            self.count += n
        return n


class TolerantGzip(io.RawIOBase):
    """The decompressed content of a .gz, ending at the first damage instead of raising.

    `damage` says what was wrong (a truncated or corrupt stream); every byte zlib can
    decompress before it has been read (the step that meets the damage is replayed a
    byte at a time). Members follow one another as in gzip; trailing zeros are padding.
    """

    STEP = 1 << 16  # compressed bytes read from disk at a time
    OUT_STEP = 1 << 20  # the most a step inflates: a gzip bomb is read as a stream, never held whole

    def __init__(self, disk: BinaryIO):
        self.disk = disk
        self.decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.input = b""
        self.output = b""
        self.position = 0  # of the next byte of output to hand out
        self.in_member = False
        self.done = False
        self.damage: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self.position >= len(self.output) and not self.done:
            self._step()
        size = min(len(buffer), len(self.output) - self.position)
        buffer[:size] = memoryview(self.output)[self.position:self.position + size]
        self.position += size
        return size

    def _step(self) -> None:
        self.output, self.position = b"", 0
        if not self.input:
            self.input = self.disk.read(self.STEP)
            if not self.input or (not self.in_member and not self.input.strip(b"\0")):
                if self.in_member:
                    self.damage = "EOFError: the file ends inside a compressed stream"
                self.done = True
                return
        saved = self.decompressor.copy()
        try:
            self._feed(self.input)
        except zlib.error:
            self.decompressor, self.output = saved, b""
            for at in range(len(self.input)):  # replay up to the damage, a byte at a time
                try:
                    self._feed(self.input[at:at + 1], replay=True)
                except zlib.error as error:
                    self.damage = f"zlib.error: {error}"
                    break
            self.done = True

    def _feed(self, data: bytes, replay: bool = False) -> None:
        self.output += self.decompressor.decompress(data, self.OUT_STEP)
        self.in_member = True
        if self.decompressor.eof:  # a member ended: what follows starts the next one
            rest = self.decompressor.unused_data
            self.decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.in_member = False
            if rest.strip(b"\0"):
                self._feed(rest, replay)
                return
        if not replay:
            self.input = self.decompressor.unconsumed_tail  # what the step's bound left to inflate


def open_content(path: str) -> tuple[BinaryIO, BinaryIO]:
    """Open a log (gunzipping .gz, tolerant of damage); return (content stream, file on disk)."""
    disk = open(path, "rb")
    return (TolerantGzip(disk) if path.endswith(".gz") else disk), disk


def prefix_sha256(path: str, size: int) -> str:
    """sha256 of the first `size` content bytes of a log."""
    content, disk = open_content(path)
    with disk, content:
        digest = hashlib.sha256()
        remaining = size
        while remaining > 0:
            block = content.read(min(READ_BUFFER, remaining))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
        return digest.hexdigest()


STAGED_KEPT = 50_000  # the most payload hashes a worker remembers from the chunks it parsed before (~5 MB)


@dataclass
class StagedBefore:
    """The payloads a worker staged for the chunks of one split file it parsed (at most STAGED_KEPT): the file's
    chunks are merged in order, so by the time a later chunk is merged they are in the main database."""

    key: tuple = ()
    start: int = -1                  # where the last of those chunks started
    digests: set[str] = field(default_factory=set)

    def before(self, task: Task) -> set[str]:
        """What earlier chunks of this task's file staged (nothing for a whole file, or another file)."""
        same = self.key == (task.path, task.main_db) and task.start > self.start
        return self.digests if same and task.is_chunk and task.main_db else set()

    def keep(self, task: Task, staged: list[str]) -> None:
        if not task.is_chunk or not task.main_db:
            return
        if self.key != (task.path, task.main_db) or task.start <= self.start:
            self.key, self.digests = (task.path, task.main_db), set()
        self.start = task.start
        self.digests.update(staged[:max(0, STAGED_KEPT - len(self.digests))])


def run_task(task: Task, report: Callable[[int], None] = lambda n: None,
             staged: StagedBefore | None = None) -> TaskResult:
    """Parse one log (or a chunk of one) into task.staging; `report(n)` is told of n more bytes read; `staged`: what
    this worker staged for earlier chunks of the same file, not staged again (and this chunk's added to it)."""
    path = task.path
    resume = task.resume
    main_db = task.main_db
    if resume is not None and prefix_sha256(path, resume.offset) != resume.sha256:
        # Rewritten, not grown: ingested afresh, replacing the old rows (and with them payloads
        # only they used, so every payload is staged).
        resume, main_db = None, None
    stat = os.stat(path)
    start = resume.offset if resume else task.start
    staging = StagingWriter(task.staging, main_db, staged.before(task) if staged and main_db else ())
    try:
        result = _parse(task, resume, stat, start, staging, report)
        if staged is not None:
            staged.keep(task, staging.staged)
        return result
    finally:
        staging.discard()  # closes its connections if parsing raised (a no-op after close())


def _parse(task: Task, resume: Resume | None, stat: os.stat_result, start: int,
           staging: StagingWriter, report: Callable[[int], None]) -> TaskResult:
    path = task.path
    content, disk, hashing, stream = _open_from(task, start)
    file_id = resume.file_id if resume else 1
    normalizer = FileNormalizer(staging, file_id, Path(path).name,
                                processes=resume.processes if resume else None)
    if task.compile_state is not None:
        normalizer.seed(task.compile_state)
    reader = LogReader(stream, Clock(stat.st_mtime), resume.lines if resume else 0, start,
                       skip_rest_of_line=bool(resume) and _ends_mid_line(path, resume.offset),
                       complete=task.end is not None)
    reported = start if not path.endswith(".gz") else 0
    with disk, content:
        for count, item in enumerate(reader):
            normalizer.feed(item)
            if count % PROGRESS_EVERY == 0:
                position = disk.tell()
                report(position - reported)
                reported = position
        damage = getattr(content, "damage", None)
        if damage is not None:
            normalizer.error(reader.consumed_lines + 1, reader.consumed_offset, "damaged_gzip",
                             f"the compressed file is damaged after {reader.consumed_offset:,} bytes of content "
                             f"({damage}); what came before is indexed")
        normalizer.finish(check_file_rank=not task.is_chunk)
        report((task.end or stat.st_size) - reported)
    if task.is_chunk:
        sha256 = ""  # the caller hashes the chunks in order
    elif hashing is not None and reader.consumed_offset == hashing.count:
        sha256 = hashing.sha256.hexdigest()
    else:
        sha256 = prefix_sha256(path, reader.consumed_offset)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    mtime = datetime.fromtimestamp(stat.st_mtime).isoformat(timespec="seconds")
    size = stat.st_size if task.end is None else task.end  # a chunk short of the end reads as a prefix
    staging.add("files", (file_id, path, Path(path).name, str(Path(path).parent), size, mtime,
                          sha256, int(path.endswith(".gz")), reader.consumed_offset,
                          reader.consumed_lines, now))
    staging.flush()
    first_note = normalizer.ids.get("ingest_errors", 0) + 1
    notes = enforce_types(staging.conn, file_id, first_note)  # types at the door, before anything reads them
    normalizer.ids["ingest_errors"] = first_note - 1 + notes
    normalizer.errors += notes
    staging.close()
    if task.is_chunk:
        for proc in normalizer.processes.values():
            proc.strings = {}  # staged already; the main process reads them from the database
    return TaskResult(path, task.staging, sha256, resume is not None, normalizer.envelopes,
                      normalizer.new_compiles, normalizer.errors, normalizer.md5_failures,
                      stat.st_size, reader.consumed_lines, reader.consumed_offset,
                      normalizer.processes if task.is_chunk else None, normalizer.unknown)


def _open_from(task: Task, start: int) -> tuple[BinaryIO, BinaryIO, HashingReader | None, io.BufferedReader]:
    """(content, file on disk, its hasher, the stream to read): the content from `start` to the chunk's
    end, hashed on the way when it is a whole file read from its first byte."""
    content, disk = open_content(task.path)
    hashing = None if task.is_chunk or start else HashingReader(content)
    raw: BinaryIO = hashing or content
    if start and not task.path.endswith(".gz"):
        disk.seek(start)
    elif start:
        _skip(raw, start)
    if task.end is not None:
        raw = LimitedReader(raw, task.end - start)
    return content, disk, hashing, io.BufferedReader(raw, READ_BUFFER)


class LimitedReader(io.RawIOBase):
    """A raw stream that ends after `limit` bytes of another."""

    def __init__(self, inner: BinaryIO, limit: int):
        self.inner = inner
        self.remaining = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.remaining <= 0:
            return 0
        view = memoryview(buffer)[:min(len(buffer), self.remaining)]
        n = self.inner.readinto(view)
        self.remaining -= n or 0
        return n


# Worker processes import only this module's dependencies (not click).
_progress = None  # a multiprocessing.Value shared with the main process
_staged = StagedBefore()  # payloads this worker staged for the chunks of a split file


def init_worker(counter) -> None:
    """A worker's set-up (it runs in a worker_pool.WorkerPool: it dies with the ingest that started it)."""
    global _progress, _staged
    _progress = counter
    _staged = StagedBefore()


def _report(n: int) -> None:
    with _progress.get_lock():
        _progress.value += n


def run_in_worker(task: Task) -> TaskResult:
    """run_task in a worker process, reporting progress through the shared counter."""
    return run_task(task, _report, _staged)


def _ends_mid_line(path: str, offset: int) -> bool:
    """Whether the first `offset` bytes of a plain log end inside a line."""
    if offset == 0:
        return False
    with open(path, "rb") as file:
        file.seek(offset - 1)
        return file.read(1) != b"\n"


def _skip(stream: BinaryIO, size: int) -> None:
    remaining = size
    while remaining > 0:
        block = stream.read(min(READ_BUFFER, remaining))
        if not block:
            break
        remaining -= len(block)
