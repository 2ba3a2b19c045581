"""Writing a report: what to write, split into tasks that worker processes do, and the crawl that finds the rest.

The bulk (every compile page with the pages of its compile, the page and text of every payload,
provenance pages, each run's Perfetto trace, each log's tlparse files) is split into tasks that worker
processes do (forked where that is safe: workers.py); meanwhile the run pages, tries and query pages are
rendered here, and every link met on any page is followed, so nothing a user can reach is missing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tlindex.answers.artifacts import payload_row
from tlindex.answers.queries import load_queries
from tlindex.answers.runs import run_sources, withhold_run_facts
from tlindex.pages.run import timelines
from tlindex.report.files import ReportFiles, log_folders
from tlindex.report.output import Output, ReportSummary, note_degraded
from tlindex.report.pages import PageWriter, seeds
from tlindex.report.tlparse import write_tlparse_files
from tlindex.report.workers import can_fork, start_workers
from tlindex.store.db import connect_read_only

if TYPE_CHECKING:  # a report of a few pages starts no worker, and imports no concurrent.futures
    from concurrent.futures import Executor, Future

PARALLEL_FROM = 100  # files of the tasks (compile and payload pages, traces, a log's tlparse files: ~2 ms each):
# below, one process renders them as fast as forked workers (a fork starts in milliseconds)
SPAWNED_FROM = 600  # the same where a fork is unsafe: a spawned worker imports the renderer (~0.4 s)
TASK_PAGES = 50  # pages per task given to a worker (small: the workers end together)
TASK_TRACES = 32  # a run's traces per task (a 256-rank run's are 256 small ones and its overview)
TASK_COMPILES = 10  # compile pages per task at most: each renders its passes and bytecode pages too (a vLLM log's
# compile with its pieces' pages is the work of ~25 payload pages)
COMPILE_TASKS_PER_JOB = 4  # fewer compiles per task while each worker would get fewer tasks of them than this
SUMMARY = "tlindex-report.json"  # what the report holds (runs, pages, degraded files)

TaskResult = tuple[set[str], dict[str, str], ReportSummary]


@dataclass(frozen=True)
class PagesTask:
    """Pages to render (compile, payload, provenance pages), with the pages of their compiles that they link to (a
    page declared `within` a compile: its bytecode, its passes), which the parent leaves to the task."""

    urls: tuple[str, ...]

    def files(self, files: ReportFiles) -> set[str]:
        targets = {files.target(url) for url in self.urls} | {files.text_of(url) for url in self.urls}
        return targets - {None}  # a payload's text is written with its page


@dataclass(frozen=True)
class TraceTask:
    """Perfetto traces of a run that its page links (the whole run, its overview, each rank's: run.timelines), a
    few to a task; a long one first, else it is a serial tail."""

    urls: tuple[str, ...]

    def files(self, files: ReportFiles) -> set[str]:
        return {files.target(url) for url in self.urls} - {None}


@dataclass(frozen=True)
class TlparseTask:
    """One log's tlparse files (in its own folder when its run has several logs)."""

    run: int
    file_id: int
    folder: str
    logs: int

    def files(self, files: ReportFiles) -> set[str]:
        return set()  # no page links them


Task = PagesTask | TraceTask | TlparseTask


class Report:
    """Writes the static report of some runs of a tlindex database into an empty folder, on one connection."""

    def __init__(self, conn: sqlite3.Connection, db_path: Path, out: Path, runs: list[int], renderer_class,
                 progress: Callable[[int], None] | None = None, run_facts: bool = False, parent: Report | None = None):
        """`conn`: this process's (a worker's own); `parent`: the report a forked worker was forked from, whose maps
        and renderer it shares (and whose connection it keeps, unused and unclosed: the parent's)."""
        self.conn, self.db_path, self.out, self.runs = conn, Path(db_path), Path(out), sorted(runs)
        self.run_facts, self.renderer_class, self.parent = run_facts, renderer_class, parent  # --with-run-facts
        self.progress = progress or (lambda pages: None)
        self.renderer = parent.renderer if parent else renderer_class(self.db_path)
        # what the report holds (its files' maps), read once: forked workers share it
        self.files = parent.files if parent else ReportFiles(conn, self.runs, self.renderer.urls.base,
                                                             set(load_queries()))
        if not run_facts:
            withhold_run_facts(conn)  # every page and query of the report reads `runs` without them
        self.output = Output(self.out)
        self.writer = PageWriter(conn, self.renderer, self.files, self.output, lambda url: None, self.claim)
        self.pid = os.getpid()
        self.total = ReportSummary()
        self.found: dict[str, str] = {}  # links met by the tasks (file: url), for the crawl
        self.deferred: dict[str, str] | None = None  # while workers render: compile subpages met here (file: url)
        self.pools = ExitStack()
        self.workers: Executor | None = None
        self.lost_worker = False
        self.done: set[str] = set()  # report files written (or found to have nothing to write)

    def key(self) -> tuple:
        return (str(self.db_path), str(self.out), tuple(self.runs), self.run_facts)

    def write(self, jobs: int = 1) -> ReportSummary:
        """Write the report; with jobs > 1 the compile and payload pages are rendered by that many processes."""
        # the workers are shut down on the way out: killed when it is an error or a stop (tlindex.stopping)
        with self.pools:
            try:
                tasks = self.tasks(jobs)
                if jobs > 1 and can_fork() and self.parallel(tasks, forked=True):
                    _WORKER.clear()  # forked now: they share the maps, and open a connection each
                    _WORKER[self.key()] = self
                    self.start_workers(jobs)
                return self._write(jobs, tasks)
            finally:
                _WORKER.pop(self.key(), None)

    def start_workers(self, jobs: int) -> Executor:
        """The worker processes, started once, shut down (or killed) when write() ends."""
        if self.workers is None:
            self.workers = self.pools.enter_context(start_workers(jobs))
        return self.workers

    @staticmethod
    def parallel(tasks: list[Task], forked: bool) -> bool:
        """Whether the tasks have files enough for worker processes (forked ones start at once, spawned ones not): a
        page, a trace, a log's tlparse files count one each (each a few milliseconds)."""
        files = sum(1 if isinstance(task, TlparseTask) else len(task.urls) for task in tasks)
        return files >= (PARALLEL_FROM if forked else SPAWNED_FROM)

    def _write(self, jobs: int, tasks: list[Task]) -> ReportSummary:
        self.output.summary = self.total  # what this process writes counts in the total (a task counts its own)
        if jobs > 1 and self.parallel(tasks, forked=self.workers is not None):
            self.start_workers(jobs)
            futures = [self.workers.submit(_worker_task, (self.db_path, self.out, self.runs, self.renderer_class,
                                                            self.run_facts, task))
                       for task in tasks]
            for task in tasks:  # theirs: the crawl below leaves them to the workers
                self.done |= task.files(self.files)
            self.deferred = {}  # and the pages of their compiles (ReportFiles.within)
            self.crawl(seeds(self.renderer.urls, self.runs, self.files.single))  # meanwhile, the run pages here
            for task, future in zip(tasks, futures):
                self.merge(*self.result(task, future))
            self.deferred, found = None, {**self.deferred, **self.found}
        else:
            for task in tasks:
                self.merge(*self.run_task(task))
            self.output.summary = self.total
            self.crawl(seeds(self.renderer.urls, self.runs, self.files.single))
            found = self.found
        self.crawl([url for path, url in found.items() if path not in self.done])
        note_degraded(self.out, self.total.degraded)
        (self.out / SUMMARY).write_text(json.dumps(
            {"runs": self.runs, "pages": self.total.pages, "database": self.db_path.name,
             "degraded": [{"file": path, "error": what} for path, what in self.total.degraded]}) + "\n")
        return self.total

    def tasks(self, jobs: int = 1) -> list[Task]:
        """The bulk of the work, in independent pieces, the longest first (the workers then end together): each
        run's Perfetto trace, each log's tlparse files, compile pages (a few to a task, so that `jobs` workers share
        a log's few heavy compiles), then payload pages with their texts."""
        urls = self.renderer.urls
        compiles = [urls.compile(c) for c in sorted(self.files.compile_runs) if c not in self.files.alike]
        per = max(1, min(TASK_COMPILES, len(compiles) // (jobs * COMPILE_TASKS_PER_JOB)))
        pages = [urls.payload(digest) for digest in sorted(self.files.payload_pages)]  # each writes its text too
        pages += [urls.provenance(artifact) for artifact in self.files.provenance]
        tasks: list[Task] = []
        for run in self.runs:
            traces = trace_urls(urls, run, timelines(run_sources(self.conn, run)))
            tasks += [TraceTask(tuple(traces[i:i + TASK_TRACES])) for i in range(0, len(traces), TASK_TRACES)]
        for run in self.runs:
            folders = log_folders(self.conn, run)
            tasks += [TlparseTask(run, file_id, folder, len(folders)) for file_id, folder in folders.items()]
        tasks += [PagesTask(tuple(compiles[i:i + per])) for i in range(0, len(compiles), per)]
        return tasks + [PagesTask(tuple(pages[i:i + TASK_PAGES])) for i in range(0, len(pages), TASK_PAGES)]

    def run_task(self, task: Task) -> TaskResult:
        """Do one task; (files written, links met (file: url), counts of this task)."""
        self.output.summary, found = ReportSummary(), {}
        self.writer.enqueue = lambda url: found.setdefault(self.files.target(url), url)  # once per file, not per link
        if isinstance(task, PagesTask):
            self.write_pages(task, found)
        elif isinstance(task, TraceTask):
            for url in task.urls:
                trace, path = self.files.parse(url), self.files.target(url)
                if path is not None:
                    self.done.add(path)
                    self.output.isolated(path, lambda: self.writer.write_chromium(trace.values["run"], trace.args,
                                                                                  path))
        else:
            write_tlparse_files(self.conn, self.output, self.files, task.run, task.file_id, task.folder, task.logs,
                                self.payload_text)
        return self.done, found, self.output.summary

    def write_pages(self, task: PagesTask, found: dict[str, str]) -> None:
        """The task's pages, then the pages of their compiles that they link to."""
        urls, compiles = list(task.urls), set()
        while urls:
            for url in urls:
                path = self.files.target(url)
                if path is not None:
                    self.done.add(path)
                    compiles.add(path)
                    self.writer.write(url, path, owned=True)  # a payload's text is its task's too (PagesTask.files)
                    text = self.files.text_of(url)
                    if text is not None:
                        self.done.add(text)
            urls = [url for path, url in found.items()
                    if path is not None and path not in self.done and self.files.within(url) in compiles]

    def payload_text(self, digest: str) -> str:
        """A payload's text file, written here when no page writes it (a payload with a page has its text
        written by the pages' task, maybe in another process); its path."""
        target = self.files.text_file(digest)
        if digest not in self.files.payload_pages and target not in self.done and not (self.out / target).exists():
            self.done.add(target)
            row = payload_row(self.conn, digest)
            self.output.save(target, (row["text"] if row else "").encode("utf-8"), payload=True)
        return target

    def claim(self, path: str) -> bool:
        """Whether `path` is still to be written; it is then the caller's (a payload's text, beside its page)."""
        if path in self.done:
            return False
        self.done.add(path)
        return True

    def result(self, task: tuple, future: Future) -> TaskResult:
        """A worker's task's result; the task done here when the worker died (killed, out of memory): the
        pool is then broken, and every task left is done here."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return future.result()
        except BrokenProcessPool as error:
            if not self.lost_worker:
                self.lost_worker = True
                self.total.warnings.append(f"a worker process ended abruptly ({error}); the pages it had "
                                           "left were rendered by the main process")
            result = self.run_task(task)
            self.output.summary = self.total
            return result

    def merge(self, done: set[str], found: dict[str, str], summary: ReportSummary) -> None:
        self.done |= done
        self.found.update(found)
        if summary is not self.total:
            self.total.add(summary)
        self.progress(self.total.pages)

    def crawl(self, urls: list[str]) -> None:
        """Render every page reachable from `urls` that is not written yet."""
        queue: list[tuple[str, str]] = []
        self.writer.enqueue = lambda url: self.add(queue, url)
        for url in urls:
            self.add(queue, url)
        while queue:
            url, path = queue.pop()
            self.writer.write(url, path)
            self.progress(self.total.pages)

    def add(self, queue: list[tuple[str, str]], url: str) -> None:
        path = self.files.target(url)
        if path is not None and self.deferred is not None and self.files.within(url):
            self.deferred.setdefault(path, url)  # the worker rendering its compile renders it
        elif path is not None and path not in self.done:
            self.done.add(path)
            queue.append((url, path))


def trace_urls(urls, run: int, offered: dict) -> list[str]:
    """The URLs of the traces the run page offers (tlindex.pages.run.timelines), the longest first."""
    found = [urls.chromium(run)] if offered["whole"] else []
    found += [urls.chromium(run, overview=1)] if offered["overview"] else []
    return found + [urls.chromium(run, rank) for rank in offered["ranks"]]


_WORKER: dict[tuple, Report] = {}  # in a worker process: its Report, set up once (a forked one inherits it)


def _worker_task(arguments: tuple) -> TaskResult:
    """In a worker process: one task of Report.tasks; only this task's files are reported back."""
    db_path, out, runs, renderer_class, run_facts, task = arguments
    key = (str(db_path), str(out), tuple(runs), run_facts)  # Report.key
    report = _WORKER.get(key)
    if report is None or report.pid != os.getpid():  # forked with the maps, or spawned: a connection of its own
        report = Report(connect_read_only(db_path), db_path, out, runs, renderer_class, run_facts=run_facts,
                        parent=report)
        _WORKER.clear()
        _WORKER[key] = report
    report.done = set()
    return report.run_task(task)
