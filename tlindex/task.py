"""One ingest task: read one log file into a staging database (runs in a worker)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Callable

from .normalize import FileNormalizer, Process
from .reader import Clock, LogReader
from .staging import StagingWriter

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


def open_content(path: str) -> tuple[BinaryIO, BinaryIO]:
    """Open a log (gunzipping .gz); return (content stream, file on disk)."""
    disk = open(path, "rb")
    return (gzip.GzipFile(fileobj=disk) if path.endswith(".gz") else disk), disk


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


def run_task(task: Task, report: Callable[[int], None] = lambda n: None) -> TaskResult:
    """Parse one log into task.staging; `report(n)` is told of n more bytes read on disk."""
    path = task.path
    resume = task.resume
    if resume is not None and prefix_sha256(path, resume.offset) != resume.sha256:
        resume = None  # rewritten, not grown: ingest it afresh
    stat = os.stat(path)
    staging = StagingWriter(task.staging, task.main_db)
    content, disk = open_content(path)
    hashing = HashingReader(content)
    stream = io.BufferedReader(hashing, READ_BUFFER)
    file_id = resume.file_id if resume else 1
    normalizer = FileNormalizer(staging, file_id, Path(path).name,
                                processes=resume.processes if resume else None)
    reader = LogReader(stream, Clock(stat.st_mtime), resume.lines if resume else 0,
                       resume.offset if resume else 0,
                       skip_rest_of_line=bool(resume) and _ends_mid_line(path, resume.offset))
    reported = 0
    with disk, content:
        if resume:
            _skip(stream, resume.offset)
        for count, item in enumerate(reader):
            normalizer.feed(item)
            if count % PROGRESS_EVERY == 0:
                position = disk.tell()
                report(position - reported)
                reported = position
        normalizer.finish()
        report(stat.st_size - reported)
    if resume is None and reader.consumed_offset == hashing.count:
        sha256 = hashing.sha256.hexdigest()
    else:
        sha256 = prefix_sha256(path, reader.consumed_offset)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    mtime = datetime.fromtimestamp(stat.st_mtime).isoformat(timespec="seconds")
    staging.add("files", (file_id, path, Path(path).name, str(Path(path).parent), stat.st_size, mtime,
                          sha256, int(path.endswith(".gz")), reader.consumed_offset,
                          reader.consumed_lines, now))
    staging.close()
    return TaskResult(path, task.staging, sha256, resume is not None, normalizer.envelopes,
                      normalizer.new_compiles, normalizer.errors, normalizer.md5_failures,
                      stat.st_size)


# Worker processes import only this module's dependencies (not sqlite-utils or click).
_progress = None  # a multiprocessing.Value shared with the main process


def init_worker(counter) -> None:
    global _progress
    _progress = counter


def _report(n: int) -> None:
    with _progress.get_lock():
        _progress.value += n


def run_in_worker(task: Task) -> TaskResult:
    """run_task in a worker process, reporting progress through the shared counter."""
    return run_task(task, _report)


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
