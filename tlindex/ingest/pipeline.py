"""Ingest logs into a tlindex database: plan, parse in parallel, merge, group runs.

Workers (one per --jobs) each parse one file at a time into a private staging
database (tlindex.ingest.task); the main process merges each finished staging
database in one transaction (tlindex.ingest.merge) while the workers go on, then
groups the new sources into runs (tlindex.ingest.runs). Only the main process ever
writes traces.db.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Callable

from tlindex.ingest.chunks import TAIL_CHUNK, SplitFile, chunk_size, shrinking, split_points
from tlindex.ingest.continuation import restore_state
from tlindex.ingest.deferred_indexes import defer_indexes
from tlindex.ingest.discover import discover
from tlindex.ingest.merge import FileRemoved, delete_file_rows, merge
from tlindex.ingest.normalize.known import unknown_words
from tlindex.ingest.runs import Attacher, assign_runs, check_label, rank_decisions, regroup_stopped
from tlindex.ingest.task import Resume, Task, TaskResult, init_worker, run_in_worker, run_task
from tlindex.ingest.text_index import APPEND_ONLY, refresh_fts
from tlindex.owned import TemporaryFolder, in_use, named_like
from tlindex.stopping import can_fork
from tlindex.store.db import immediate, make_deferred_indexes

MERGE_CACHE_KB = 4 << 10  # the merges' index updates touch fewer pages on disk than with 2 MB; 8 MB gained little more


def wait(futures, timeout: float, return_when: str):
    """concurrent.futures.wait, imported only by an ingest that starts workers (a test takes turns with it)."""
    from concurrent.futures import wait as wait_for

    return wait_for(futures, timeout=timeout, return_when=return_when)


@dataclass
class IngestSummary:
    files: int = 0          # files ingested (new or continued)
    continued: int = 0      # of which continued from an earlier ingest
    skipped: int = 0        # already ingested, unchanged
    envelopes: int = 0
    compiles: int = 0
    errors: int = 0
    md5_failures: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # paths that could not be read
    copies: list[tuple[str, str]] = field(default_factory=list)  # (file, the earlier file it equals)
    moved: list[tuple[str, str]] = field(default_factory=list)   # (new path, old path no longer there)
    rewritten: list[str] = field(default_factory=list)  # files changed in place: their old rows replaced
    no_records: list[tuple[str, int]] = field(default_factory=list)  # (file, lines) without any trace record
    rank_decisions: list[tuple[str, str]] = field(default_factory=list)  # (run label, what was decided of its ranks)
    runs: list[int] = field(default_factory=list)  # the runs this ingest made or grew
    regrouped: list[tuple[int, str]] = field(default_factory=list)  # runs made of what a stopped ingest had merged
    unknown: dict[str, int] = field(default_factory=dict)  # records of kinds tlindex does not know yet, by kind

    def count(self, envelopes: int, compiles: int, errors: int, md5_failures: int,
              unknown: dict[str, int] | None = None) -> None:
        """One file ingested (whole, or all its chunks), with what its rows hold."""
        for name, records in (unknown or {}).items():
            self.unknown[name] = self.unknown.get(name, 0) + records
        self.files += 1
        self.envelopes += envelopes
        self.compiles += compiles
        self.errors += errors
        self.md5_failures += md5_failures

    def line(self) -> str:
        parts = [f"{self.files} file{'s' * (self.files != 1)} ingested"]
        if self.continued:
            parts.append(f"{self.continued} continued")
        if self.skipped:
            parts.append(f"{self.skipped} already ingested")
        return (f"{', '.join(parts)}: {self.envelopes:,} envelopes, {self.compiles:,} compiles, "
                f"{self.errors:,} ingest errors, {self.md5_failures:,} md5 failures "
                f"in {self.seconds:.1f} s")

    def notes(self) -> list[str]:
        """What the summary line does not say: copies kept as their own files, logs moved; each kind said once per
        file up to NOTES_EACH times, then in one line with a count (a bulk ingest of copies is not thousands of
        lines)."""
        return (_few([f"{path}: a byte-identical copy of {earlier} (ingested as its own file; files.copy_of)"
                      for path, earlier in self.copies], "byte-identical copies of files ingested before (each "
                                                         "ingested as its own file; files.copy_of names the first)") +
                _few([f"{path}: already ingested as {earlier}, which is gone (the file moved; path updated)"
                      for path, earlier in self.moved], "files already ingested under a path that is gone (paths "
                                                        "updated)") +
                _few([f"{path}: changed in place since it was ingested (not a continuation): re-ingested, "
                      f"replacing what was read before" for path in self.rewritten],
                     "files changed in place since they were ingested, re-ingested") +
                [f"run {label}: {decision}" for label, decision in self.rank_decisions] +
                [line for line in (unknown_words(self.unknown),) if line] +
                [f"run {run} {label}: what a stopped ingest had merged, grouped into a run of its own now (that "
                 f"ingest ended before it grouped its files)" for run, label in self.regrouped])


NOTES_EACH = 3  # notes of one kind said one by one; past that, the first ones and a line with the count of the rest


def _few(notes: list[str], what: str) -> list[str]:
    """Notes of one kind: all of them, or the first NOTES_EACH and one line counting the rest."""
    if len(notes) <= NOTES_EACH + 1:
        return notes
    return notes[:NOTES_EACH] + [f"and {len(notes) - NOTES_EACH:,} more {what}"]


@dataclass
class Planned:
    task: Task
    size: int
    replace_file: int | None = None
    split: SplitFile | None = None   # the file this task is a chunk of
    chunk: int = 0


def plan(conn, files: list[Path], staging_dir: Path, replace: bool, summary: IngestSummary,
         main_db: str | None = None) -> list[Planned]:
    """Decide, per file, to skip it, continue it or ingest it (afresh)."""
    planned = []
    for number, path in enumerate(files):
        try:
            stat = path.stat()
        except OSError as error:
            summary.problems.append(f"{path}: {error.strerror}")
            continue
        staging = str(staging_dir / f"{number}.db")
        known = conn.execute(
            "SELECT id, size, mtime, bytes_ingested, lines_ingested, sha256, compressed FROM files "
            "WHERE path = ? ORDER BY id DESC LIMIT 1", (str(path),)).fetchone()
        if known is None:
            planned.append(Planned(Task(str(path), staging, main_db=main_db), stat.st_size))
            continue
        file_id, size, mtime, consumed, lines, sha256, compressed = known
        unchanged = stat.st_size == size and mtime == datetime.fromtimestamp(stat.st_mtime).isoformat(
            timespec="seconds")
        if replace:
            planned.append(Planned(Task(str(path), staging), stat.st_size, replace_file=file_id))
        elif unchanged:
            summary.skipped += 1
        elif not compressed and stat.st_size > consumed:
            resume = Resume(-file_id, lines, consumed, sha256, restore_state(conn, file_id))
            planned.append(Planned(Task(str(path), staging, resume, main_db), stat.st_size - consumed))
        else:  # truncated or rewritten in place: what was read of it is gone, replace it
            summary.rewritten.append(str(path))
            planned.append(Planned(Task(str(path), staging), stat.st_size, replace_file=file_id))
    return planned


STAGING_PREFIX = ".{}.staging-"  # an ingest's staging folder beside the database (the database's file name in it)


def new_staging(db_path: Path) -> TemporaryFolder:
    """This ingest's staging folder beside the database, locked while the ingest lives (a folder seen marked and
    unlocked is a killed ingest's, which this removes)."""
    return TemporaryFolder(STAGING_PREFIX.format(db_path.name), db_path.resolve().parent, "staging")


def claim_paths(db_path: Path, files: list[Path]) -> list:
    """Hold a lock per path for this ingest (lock files beside the database, one per 256th of the paths'
    hashes, so an ingest of many files holds at most 256; taken in sorted order, so two ingests never
    wait for each other in a circle). Two ingests of the same path at once: the second waits for the
    first, then finds the file ingested. A killed ingest's locks die with it."""
    try:
        import fcntl
    except ImportError:
        return []
    folder = claims_folder(db_path)
    names = sorted({hashlib.sha1(os.fsencode(str(path))).hexdigest()[:2] for path in files})
    handles = []
    try:
        for name in names:
            handles.append(_claim(folder / f"{name}.lock", fcntl))
    except BaseException:
        for handle in handles:
            handle.close()
        raise
    return handles


def claims_folder(db_path: Path) -> Path:
    """Where an ingest's claims are, while it holds any: beside the database."""
    return db_path.resolve().parent / f".{db_path.name}.claims"


def _claim(path: Path, fcntl):
    """The lock file `path`, held: a file a releasing ingest removed (while holding it) is not held, so the
    lock is taken again on the file now at that path (made anew, or another ingest's)."""
    while True:
        try:
            os.mkdir(path.parent)
        except FileExistsError:  # (Path.mkdir's exist_ok raises when the folder is removed between its two steps)
            pass
        try:
            handle = open(path, "a")
        except FileNotFoundError:  # the folder, removed by an ingest that let go of its last claim: made again
            continue
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()


def release_claims(db_path: Path, claims: list) -> None:
    """Let go of an ingest's claims, leaving nothing behind: each lock file removed while it is held (an ingest
    waiting on it then takes a new one: _claim), then the folder when no other ingest has a claim in it."""
    for claim in claims:
        try:
            os.unlink(claim.name)
        except OSError:
            pass
        claim.close()
    if claims:
        try:
            claims_folder(db_path).rmdir()
        except OSError:  # another ingest's claims are in it (or it is gone)
            pass


def live_ingests(db_path: Path) -> set[str]:
    """The staging folders (by name) of the ingests of this database still running: each holds its folder locked."""
    return {os.path.basename(found) for found in named_like(db_path.resolve().parent, STAGING_PREFIX.format(db_path.name))
            if in_use(Path(found))}


def earlier_copy(conn, path: str, sha256: str, other_than: int | None) -> tuple[int, str] | None:
    """(id, path) of the file ingested first with this content, if any (not the file being replaced)."""
    return conn.execute("SELECT id, path FROM files WHERE sha256 = ? AND id IS NOT ? "
                        "ORDER BY path != ?, id LIMIT 1", (sha256, other_than, path)).fetchone()


def record_move(conn, summary: IngestSummary, path: str, earlier: tuple[int, str]) -> None:
    """The log ingested as earlier[1] now lives at path (the old path is gone): follow it."""
    new = Path(path)
    with immediate(conn):
        conn.execute("UPDATE files SET path = ?, name = ?, directory = ? WHERE id = ?",
                     (path, new.name, str(new.parent), earlier[0]))
    summary.skipped += 1
    summary.moved.append((path, earlier[1]))


def splits(planned: list[Planned]) -> list[SplitFile]:
    """The split files among the planned tasks, each once."""
    return list({id(item.split): item.split for item in planned if item.split is not None}.values())


def split_big_files(planned: list[Planned], chunk_bytes: int,
                    lengths: Callable[[int], Callable[[int], int]] | None = None, last: int = 0) -> list[Planned]:
    """Replace each fresh plain file bigger than chunk_bytes by tasks for its chunks (of `lengths(file size)(bytes
    left)` each, or chunk_bytes); with `lengths`, also the `last` files parsed (the workers' last tasks) bigger than
    two shrinking chunks: what is left to merge once every worker is done is then one small chunk, not whole files."""
    result = []
    for number, item in enumerate(planned):
        task = item.task
        tail = lengths is not None and number >= len(planned) - last and item.size >= 2 * TAIL_CHUNK
        if task.resume is None and not task.path.endswith(".gz") and (item.size > chunk_bytes or tail):
            points = split_points(task.path, item.size, lengths(item.size) if lengths else chunk_bytes)
            if len(points) > 1:
                split = SplitFile(task.path, points, task.staging.removesuffix(".db"), item.replace_file,
                                  task.main_db)
                for index, chunk in enumerate(split.tasks()):
                    result.append(Planned(chunk, (chunk.end or item.size) - chunk.start, split=split, chunk=index))
                continue
        result.append(item)
    return result


def ingest(conn: sqlite3.Connection, db_path: Path, paths: list[str], *, run_label: str | None = None,
           unique_label: bool = False, label_source: str = "given",
           replace: bool = False, jobs: int | None = None, progress: Callable[[int, int], None] | None = None,
           chunk_bytes: int | None = None, search_index: bool = True,
           derive: Callable[[sqlite3.Connection, list[int]], object] | None = None) -> IngestSummary:
    """Ingest the logs named by `paths` into the database at `db_path`, on its (writing) connection `conn`.

    `progress(done_bytes, total_bytes)` is called as work advances. With more than one job, files bigger
    than `chunk_bytes` are parsed in chunks of that size (by default: files bigger than a quarter of the
    input per worker pair, at least 8 MB, and each worker's last, in chunks shrinking to the end). Without
    `search_index` the full-text indexes are not brought up to date (a database used once: a report's).
    `unique_label`: the files go into a new run labelled `run_label`, made unique; `label_source`: runs.label_source.
    `derive(conn, runs)` derives what readers read of the runs made or grown, in the transaction that names their
    processes (tlindex.answers.derived.derive_runs).
    """
    started = time.perf_counter()
    if run_label is not None:
        run_label = check_label(run_label)  # normalized; UsageError before any work
    summary = IngestSummary()
    files, summary.problems = discover(paths)
    if not files:
        return summary  # nothing to ingest: no database is created either
    conn.execute(f"PRAGMA cache_size = -{MERGE_CACHE_KB}")
    staging = new_staging(db_path)
    staging_dir = staging.path
    claims, deferred, planned = [], False, []
    try:  # (from here a stop, however early, lets go of the staging folder and the claims: `tlindex watch` stops often)
        # what stopped ingests merged into provisional runs (never into this ingest's run), grouped as they would have
        summary.regrouped = [(run, conn.execute("SELECT label FROM runs WHERE id = ?", (run,)).fetchone()[0])
                             for run in regroup_stopped(conn, lambda: live_ingests(db_path), derive, staging_dir.name)]
        claims = claim_paths(db_path, files)  # before planning: another ingest of a path waits here
        # --replace deletes payloads no longer referenced: then every payload is staged.
        planned = plan(conn, files, staging_dir, replace, summary, None if replace else str(db_path.resolve()))
        workers = max(1, jobs or os.cpu_count() or 1)
        if workers > 1:
            planned = split_big_files(planned, chunk_bytes or chunk_size(sum(p.size for p in planned), workers),
                                      *((None, 0) if chunk_bytes else (partial(shrinking, workers), workers)))
        total = sum(p.size for p in planned)
        deferred = defer_indexes(conn, total)
        attach = Attacher(run_label, staging_dir.name, unique_label, label_source)
        merger = Merger(conn, summary, planned, attach, search_index)
        runner = run_serially if max(1, min(workers, len(planned))) == 1 else run_in_parallel
        runner(planned, min(workers, len(planned)), merger, summary,
               (lambda done: progress(done, total)) if progress else None)
        if deferred:
            make_deferred_indexes(conn)
        if summary.files and search_index:  # the search text, before the runs it belongs to are whole
            refresh_fts(conn)
        summary.runs = assign_runs(conn, run_label, tuple(merger.continued_files), tuple(merger.attach.touched),
                                   regroup=(staging_dir.name,) if run_label is None else (),
                                   replaced=tuple(merger.replaced_runs), derive=derive, ingest=staging_dir.name)
        summary.rank_decisions = decisions_said(conn, summary.runs)
        if progress:
            progress(total, total)
    finally:
        for split in splits(planned):
            split.hashes.stop()  # a failed or stopped ingest: no hashing ahead of merges that will not come
        _leave(conn, deferred, staging, db_path, claims)
    summary.seconds = time.perf_counter() - started
    return summary


def decisions_said(conn: sqlite3.Connection, runs: list[int]) -> list[tuple[str, str]]:
    """(run label, what was decided of its ranks) of each run that had a decision to make."""
    said = []
    for run_id in runs:
        label = conn.execute("SELECT label FROM runs WHERE id = ?", (run_id,)).fetchone()
        said += [(label[0], decision) for decision in rank_decisions(conn, run_id)] if label else []
    return said


def _leave(conn, deferred: bool, staging: TemporaryFolder, db_path: Path, claims: list) -> None:
    """What an ingest holds let go, whether it ended, failed or was stopped; the indexes it deferred made again
    (when that fails too, the next open of the database makes them)."""
    try:
        if deferred:
            make_deferred_indexes(conn)
    except sqlite3.Error:
        pass
    finally:
        staging.remove()
        release_claims(db_path, claims)


class Merger:
    """Each task's staging database merged into the main one (in merge_order), and counted in the summary."""

    def __init__(self, conn, summary: IngestSummary, planned: list[Planned], attach: Attacher,
                 index_early: bool = False):
        self.conn, self.summary, self.attach = conn, summary, attach
        self.by_staging = {p.task.staging: p for p in planned}
        self.continued_files: list[int] = []   # grown logs continued: their runs change
        self.replaced_runs: set[int] = set()   # runs that held a file replaced (rewritten, --replace): derived again
        self.index_early = index_early

    def _replacing(self, file_id: int | None) -> None:
        """A file about to be replaced: its runs (which lose its processes) noted, to be derived again."""
        if file_id is not None:
            self.replaced_runs |= {run for (run,) in self.conn.execute(
                "SELECT DISTINCT run_id FROM sources WHERE file_id = ? AND run_id IS NOT NULL", (file_id,))}

    def between(self) -> None:
        """While workers still parse: the full-text indexes of the tables no later merge rewrites brought up
        to date (guards and artifacts are most of their rows), instead of all of it after the last merge,
        on one core."""
        if self.index_early:
            refresh_fts(self.conn, tables=APPEND_ONLY)

    def __call__(self, result: TaskResult) -> None:
        item = self.by_staging[result.staging]
        if item.split is not None:
            if item.chunk == 0:
                self._replacing(item.split.replace_file)
            item.split.add(self.conn, item.chunk, result, self.attach)
            if item.split.done:
                self._split_done(item.split)
            return
        self._file_done(item, result)
        os.unlink(result.staging)

    def _split_done(self, split: SplitFile) -> None:
        """A file parsed in chunks, all merged: a copy of an earlier file is said, a moved one recorded."""
        conn, summary = self.conn, self.summary
        earlier = earlier_copy(conn, split.path, split.digest, split.file_id)
        if earlier is not None and not Path(earlier[1]).exists():
            with immediate(conn):
                delete_file_rows(conn, split.file_id)
            record_move(conn, summary, split.path, earlier)
            return
        if earlier is not None:
            with immediate(conn):
                conn.execute("UPDATE files SET copy_of = ? WHERE id = ?", (earlier[0], split.file_id))
            summary.copies.append((split.path, earlier[1]))
        counts = split.counts
        summary.count(counts.envelopes, counts.compiles, counts.errors, counts.md5_failures, counts.unknown)

    def _file_done(self, item: Planned, result: TaskResult) -> None:
        """A whole file (or a grown log's new part) merged, unless it is one ingested already."""
        conn, summary = self.conn, self.summary
        replace_file = item.replace_file
        if item.task.resume is not None and not result.resumed:  # grown? no: rewritten in place
            replace_file = -item.task.resume.file_id
            summary.rewritten.append(result.path)
        # (nothing read, nothing to be a copy of: an empty file, or one whose only line is cut off)
        earlier = None if result.resumed or not result.offset else \
            earlier_copy(conn, result.path, result.sha256, replace_file)
        if earlier is not None and earlier[1] == result.path:
            summary.skipped += 1  # a concurrent ingest took this very file first
            return
        if earlier is not None and not Path(earlier[1]).exists():
            record_move(conn, summary, result.path, earlier)
            return
        copy_of = (lambda c, file_id: c.execute("UPDATE main.files SET copy_of = ? WHERE id = ?",
                                                (earlier[0], file_id))) if earlier else None
        self._replacing(replace_file)
        try:
            merge(conn, result.staging, replace_file=replace_file,
                  resumed_file=-item.task.resume.file_id if result.resumed else None, complete=copy_of,
                  attach=self.attach)
        except FileRemoved:  # the losing side of a `tlindex rm` says what it lost
            summary.problems.append(f"{result.path}: not continued: its run was removed from the database (tlindex "
                                    f"rm) after this ingest read where the log stood; ingest it again to read it whole")
            return
        if earlier is not None:
            summary.copies.append((result.path, earlier[1]))
        if result.resumed:
            self.continued_files.append(-item.task.resume.file_id)
        if result.envelopes == 0 and not result.resumed:  # empty, or nothing but a cut-off line
            summary.no_records.append((result.path, result.lines))
        summary.continued += int(result.resumed)
        summary.count(result.envelopes, result.compiles, result.errors, result.md5_failures, result.unknown)


def run_serially(planned: list[Planned], jobs: int, merge_result: Merger, summary: IngestSummary,
                 progress: Callable[[int], None] | None) -> None:
    """Every task in this process, one after the other (one job, or one task)."""
    done = 0
    for item in planned:
        def report(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done)
        try:
            result = run_task(item.task, report)
        except OSError as error:
            summary.problems.append(f"{item.task.path}: {error}")
            continue
        merge_result(result)


GZ_COST = 8  # a compressed log's bytes cost this many of a plain one's (they inflate to ~5-10 times as many)


def merge_order(planned: list[Planned], jobs: int) -> list[int]:
    """The planned tasks (their indexes) in the order `jobs` workers are expected to finish them: each taken, in the
    plan's order, by the worker expected to be free first, a task costing its bytes (a compressed file's, GZ_COST
    times). Fixed by the input and `jobs`, so two ingests merge in one order; close to the order tasks finish in, so
    a merge seldom waits for a slow task planned early (a big .gz file first, then many small logs)."""
    import heapq

    free = [(0, worker) for worker in range(jobs)]  # (when expected free, worker)
    expected = []
    for index, item in enumerate(planned):
        start, worker = heapq.heappop(free)
        done = start + item.size * (GZ_COST if item.task.path.endswith(".gz") else 1)
        expected.append((done, index))
        heapq.heappush(free, (done, worker))
    return [index for _, index in sorted(expected)]


def run_in_parallel(planned: list[Planned], jobs: int, merge_result: Merger, summary: IngestSummary,
                    progress: Callable[[int], None] | None) -> None:
    """The tasks in `jobs` worker processes, each merged here once it and every task expected to finish before it
    have finished (merge_order): not in the order they finish in, which changes from one ingest to the next, so that
    two ingests of the same logs give every row the same id (a compile's page, a report's file names)."""
    import multiprocessing
    from concurrent.futures import Future

    from tlindex.worker_pool import WorkerPool

    # forked where that is safe: a spawned worker spends ~0.2 s of CPU importing the ingest (4 rank files of 11 MB:
    # 0.56 s -> 0.45 s); the parent holds no transaction here, and a worker never uses its connections
    context = multiprocessing.get_context("fork" if can_fork() else "spawn")
    counter = context.Value("q", 0)
    with WorkerPool(jobs, context, init_worker, (counter,)) as pool:
        futures: dict[Future, Planned] = {}
        for item in planned:
            if item.split is not None:  # scanned as late as possible: workers start at once
                item.task.compile_state = item.split.state_before(item.chunk)
            futures[pool.submit(run_in_worker, item.task)] = item
        for split in splits(planned):
            split.hashes.start()  # the workers are forked: a thread now is safe
        in_plan = list(futures)
        in_order, merged, pending = [in_plan[i] for i in merge_order(planned, jobs)], 0, set(futures)
        while merged < len(in_order):
            _, pending = wait(pending, timeout=0.2, return_when="FIRST_COMPLETED")
            if progress:
                progress(counter.value)
            ready = merged
            while ready < len(in_order) and in_order[ready].done():
                ready += 1
            for future in in_order[merged:ready]:
                try:
                    result = future.result()
                except OSError as error:
                    summary.problems.append(f"{futures[future].task.path}: {error}")
                    continue
                merge_result(result)
            if merged < ready < len(in_order):
                merge_result.between()
            merged = ready
