"""An ingest into a scratch database, done by a forked child process while this one goes on.

`tlindex report LOG` reads the log into a database it throws away, then renders. Its own imports (the
renderer, Jinja, the pages: ~0.1 s) and the renderer's set-up need no database: a child forked once the ingest
is imported ingests while the parent does them, and the report's wall time is the longer of the two, not
their sum. The database is the child's alone until it ends: nothing else reads or writes it meanwhile.

The child is a worker of the command (tlindex.stopping): it leaves Ctrl-C to the parent and dies with it;
the parent kills it on any way out (`Beside.end`, and the command's own end), and removes the scratch
folder, with whatever the child had written, as with an ingest of its own.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

from tlindex.errors import ReportError, TlindexError
from tlindex.ingest.discover import discover
from tlindex.ingest.pipeline import IngestSummary, ingest
from tlindex.owned import discard, remove_dead_scratch, scratch_dir
from tlindex.stopping import can_fork, end_forked, fork, prctl, worker_started
from tlindex.store.compression import keep_raw

DATABASE = "traces.db"  # the scratch database's name in its folder
PREFIX = "tlindex-report-"  # its folder's name in TMPDIR, before what makes it unique
KEEP_RAW_UP_TO = 64 << 20  # logs up to this many bytes in all: their payloads stored uncompressed (keep_raw)


class Beside:
    """An ingest going on in a child process (`pid`), into DATABASE of a scratch folder of this process."""

    def __init__(self, pid: int, pipe: int, folder: Path, size: int):
        self.pid, self.pipe, self.folder = pid, pipe, folder
        self.size = size  # bytes of the logs, as stored
        self.db = folder / DATABASE
        self.exit_code: int | None = None  # once reaped

    def wait(self) -> IngestSummary:
        """The ingest's summary once the child is done; what it raised is raised here."""
        received = bytearray()
        while chunk := os.read(self.pipe, 1 << 16):
            received += chunk
        self.exit_code = end_forked(self.pid, kill=False)
        if not received:
            raise ReportError(f"the logs' ingest ended without a result (its process's exit code: {self.exit_code})")
        ok, value = pickle.loads(received)
        if not ok:
            raise value
        return value

    def running(self) -> bool:
        """Whether the child is still ingesting (what else the parent prepares meanwhile costs no time)."""
        return self.exit_code is None and os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None

    def end(self) -> bool:
        """The child killed if still running, reaped; the pipe closed; the scratch folder removed. Whether it was
        killed mid-way (its progress bar, if it drew one, was not ended)."""
        killed = self.exit_code is None and self.running()
        end_forked(self.pid)
        os.close(self.pipe)
        discard(self.folder)
        return killed


def ingest_beside(paths: list[str], jobs: int | None, progress: Callable[[int, int], None] | None = None,
                  finished: Callable[[], None] | None = None) -> Beside | None:
    """Start ingesting `paths` into a scratch database in a forked child (None where a fork is unsafe, not Linux
    or a thread running, or fails: the caller then ingests); `finished` is called in the child when its ingest is
    done (the progress bar's end). Call `Beside.end` on every way out."""
    if not can_fork():
        return None
    try:
        prctl()  # found once, here: the child and the report's workers forked later have it
    except (OSError, AttributeError):
        pass
    parent = os.getpid()
    size = _size(paths)
    folder = scratch_dir(PREFIX, sweep=False)  # the dead ones are removed while the child ingests
    reading, writing = os.pipe()
    try:
        pid = fork()
    except BaseException as error:
        os.close(reading)
        os.close(writing)
        discard(folder)
        if isinstance(error, OSError):  # no process to be had (a limit of processes): the ingest runs here
            return None
        raise
    if pid == 0:
        os.close(reading)
        _child(parent, writing, folder / DATABASE, paths, size, jobs, progress, finished)  # never returns
    os.close(writing)
    remove_dead_scratch(PREFIX)
    return Beside(pid, reading, folder, size)


def _child(parent: int, pipe: int, db: Path, paths: list[str], size: int, jobs: int | None,
           progress: Callable[[int, int], None] | None, finished: Callable[[], None] | None) -> None:
    """In the child: the ingest, its summary (or what it raised) sent to the parent; the process then ends."""
    code = 1
    try:
        try:
            worker_started(parent)
            if size <= KEEP_RAW_UP_TO:
                keep_raw()  # the database is read once, by the parent: its payloads are not compressed
            result = (True, ingest(db, paths, jobs=jobs, progress=progress, search_index=False,
                                   scratch=True))  # read once, by the parent
        except BaseException as error:  # raised again in the parent; a bug's traceback goes with it, as a note
            if not isinstance(error, TlindexError):
                import traceback

                error.add_note("In the ingest's process:\n" + "".join(traceback.format_exception(error)))
            result = (False, error)
        if finished is not None:
            finished()
        with os.fdopen(pipe, "wb") as out:
            out.write(_pickled(result))
        code = 0
    finally:
        sys.stderr.flush()
        os._exit(code)  # nothing of the parent's runs here: no cleanup of its temporaries, no atexit


def _pickled(result: tuple[bool, object]) -> bytes:
    """The result as the parent will read it; an error that does not survive pickling (one that holds a lock, or
    whose class takes other arguments than its message) as one of ours with its words (and a bug's traceback)."""
    try:
        sent = pickle.dumps(result)
        pickle.loads(sent)
        return sent
    except Exception:
        error = result[1]
        words = f"{type(error).__name__}: {error}"
        if isinstance(error, TlindexError):
            stand_in: BaseException = ReportError(words)
        else:
            stand_in = RuntimeError(words)
            for note in getattr(error, "__notes__", ()):
                stand_in.add_note(note)
        return pickle.dumps((False, stand_in))


def _size(paths: list[str]) -> int:
    """Bytes of the logs PATHs name (as ingest finds them: files, folders, globs), as stored (a .gz compressed)."""
    total = 0
    for file in discover(paths)[0]:
        try:
            total += file.stat().st_size
        except OSError:
            pass
    return total
