"""Writing a report: what to write, split into tasks that worker processes do, and the crawl that finds the rest.

The bulk (every compile page with the pages of its compile, the page and text of every payload,
provenance pages, each run's Perfetto trace, each log's tlparse files) is split into tasks that worker
processes do (forked where that is safe: workers.py); meanwhile the run pages, tries and query pages are
rendered here, and every link met on any page is followed, so nothing a user can reach is missing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from tlindex.answers.queries import load_queries
from tlindex.pages.runs import withhold_run_facts
from tlindex.report.files import ReportFiles, log_folders
from tlindex.report.output import Output, ReportSummary, note_degraded
from tlindex.report.pages import PageWriter, seeds, text_file
from tlindex.report.tlparse import write_tlparse_files
from tlindex.report.workers import can_fork, start_workers
from tlindex.store.db import connect_read_only

if TYPE_CHECKING:  # a report of a few pages starts no worker, and imports no concurrent.futures
    from concurrent.futures import Executor, Future

PARALLEL_FROM = 100  # pages of the tasks (compile and payload pages, ~2 ms each): below, one process renders
# them as fast as forked workers (a fork starts in milliseconds)
SPAWNED_FROM = 600  # the same where a fork is unsafe: a spawned worker imports the renderer (~0.4 s)
TASK_PAGES = 50  # pages per task given to a worker (small: the workers end together)
# A page of one compile besides its own (passes, bytecode, a piece's passes): a worker that renders the
# compile page renders these too, and the parent leaves them to it (else they are a serial tail)
SUBPAGE_RE = re.compile(r"(?:.*/)?compiles/(\d+)-[^/]*\.html")
SUMMARY = "tlindex-report.json"  # what the report holds (runs, pages, degraded files)

TaskResult = tuple[set[str], dict[str, str], ReportSummary]


class Report:
    """Writes the static report of some runs of a tlindex database into an empty folder."""

    def __init__(self, db_path: Path, out: Path, runs: list[int], renderer_class,
                 progress: Callable[[int], None] | None = None, run_facts: bool = False):
        self.db_path, self.out, self.runs = Path(db_path), Path(out), sorted(runs)
        self.run_facts = run_facts  # --with-run-facts
        self.renderer_class = renderer_class
        self.progress = progress or (lambda pages: None)
        self.total = ReportSummary()
        self.found: dict[str, str] = {}  # links met by the tasks (file: url), for the crawl
        self.deferred: dict[str, str] | None = None  # while workers render: compile subpages met here (file: url)
        self.workers: Executor | None = None
        self.lost_worker = False
        self.done: set[str] = set()  # report files written (or found to have nothing to write)

    def key(self) -> tuple:
        return (str(self.db_path), str(self.out), tuple(self.runs), self.run_facts)

    def write(self, jobs: int = 1) -> ReportSummary:
        """Write the report; with jobs > 1 the compile and payload pages are rendered by that many processes."""
        # the workers are shut down on the way out: killed when it is an error or a stop (tlindex.stopping)
        with ExitStack() as self.pools:
            try:
                self.load()
                tasks = self.tasks()
                if jobs > 1 and can_fork() and self.parallel(tasks, forked=True):
                    _WORKER.clear()  # forked now: they share the maps, and hold no connection of this process
                    _WORKER[self.key()] = self
                    self.start_workers(jobs)
                self.open()
                return self._write(jobs, tasks)
            finally:
                _WORKER.pop(self.key(), None)
                if getattr(self, "conn", None) is not None:
                    self.conn.close()

    def load(self) -> None:
        """What the report holds (its files' maps), read once: forked workers share it."""
        self.renderer = self.renderer_class(self.db_path)
        conn = connect_read_only(self.db_path)
        try:
            self.files = ReportFiles(conn, self.runs, self.renderer.urls.base, set(load_queries()))
        finally:
            conn.close()

    def open(self) -> None:
        """This process's connection and writer (a worker opens its own)."""
        self.conn = connect_read_only(self.db_path)
        if not self.run_facts:
            withhold_run_facts(self.conn)  # every page and query of the report reads `runs` without them
        self.output = Output(self.out)
        self.writer = PageWriter(self.conn, self.renderer, self.files, self.output, lambda url: None, self.claim)
        self.pid = os.getpid()

    def start_workers(self, jobs: int) -> Executor:
        """The worker processes, started once, shut down (or killed) when write() ends."""
        if self.workers is None:
            self.workers = self.pools.enter_context(start_workers(jobs))
        return self.workers

    @staticmethod
    def parallel(tasks: list[tuple], forked: bool) -> bool:
        """Whether the tasks have pages enough for worker processes (forked ones start at once, spawned ones not)."""
        return sum(len(task[1]) for task in tasks if task[0] == "pages") >= (PARALLEL_FROM if forked else SPAWNED_FROM)

    def _write(self, jobs: int, tasks: list[tuple]) -> ReportSummary:
        self.output.summary = self.total  # what this process writes counts in the total (a task counts its own)
        if jobs > 1 and self.parallel(tasks, forked=self.workers is not None):
            self.start_workers(jobs)
            futures = [self.workers.submit(_worker_task, (self.db_path, self.out, self.runs, self.renderer_class,
                                                            self.run_facts, task))
                       for task in tasks]
            self.done |= self.task_files(tasks)  # theirs: the crawl below leaves them to the workers
            self.deferred = {}  # and the pages of their compiles (SUBPAGE_RE)
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

    def tasks(self) -> list[tuple]:
        """The bulk of the work, in independent pieces: compile pages, payload pages and texts, each run's
        Perfetto trace, each log's tlparse files."""
        urls = self.renderer.urls
        pages = [urls.compile(c) for c in sorted(self.files.compile_runs)]
        pages += [urls.payload(digest) for digest in sorted(self.files.payload_pages)]  # each writes its text too
        pages += [urls.provenance(artifact) for artifact in self.files.provenance]
        # the traces and tlparse's files first: each is one long task, which last would be a serial tail
        tasks: list[tuple] = [("chromium", run) for run in self.runs]
        conn = connect_read_only(self.db_path)
        try:
            for run in self.runs:
                folders = log_folders(conn, run)
                tasks += [("tlparse", run, file_id, folder, len(folders)) for file_id, folder in folders.items()]
        finally:
            conn.close()
        return tasks + [("pages", pages[i:i + TASK_PAGES]) for i in range(0, len(pages), TASK_PAGES)]

    def run_task(self, task: tuple) -> TaskResult:
        """Do one task; (files written, links met (file: url), counts of this task)."""
        self.output.summary, found = ReportSummary(), {}
        self.writer.enqueue = lambda url: found.setdefault(self.files.target(url), url)  # once per file, not per link
        kind = task[0]
        if kind == "pages":
            urls, compiles = task[1], set()
            while urls:  # the task's pages, then the pages of its compiles that they link to
                for url in urls:
                    path = self.files.target(url)
                    if path is not None:
                        self.done.add(path)
                        compiles.add(path)
                        self.writer.write(url, path, owned=True)  # a payload's text is its task's too (task_files)
                        self.done.add(text_file(path))
                urls = [url for path, url in found.items()
                        if path is not None and path not in self.done and _subpage_of(path) in compiles]
        elif kind == "chromium":
            path = f"{self.files.run_dir(task[1])}chromium.json"
            self.done.add(path)
            self.output.isolated(path, lambda: self.writer.write_chromium(task[1], path))
        else:
            write_tlparse_files(self.conn, self.output, self.files, *task[1:], self.payload_text)
        return self.done, found, self.output.summary

    def payload_text(self, digest: str) -> str:
        """A payload's text file, written here when no page writes it (a payload with a page has its text
        written by the pages' task, maybe in another process); its path."""
        target = f"payloads/{digest}.txt"
        if digest not in self.files.payload_pages and target not in self.done and not (self.out / target).exists():
            self.done.add(target)
            row = self.conn.execute("SELECT text FROM payloads WHERE hash = ?", (digest,)).fetchone()
            self.output.save(target, (row[0] if row else "").encode("utf-8"))
        return target

    def claim(self, path: str) -> bool:
        """Whether `path` is still to be written; it is then the caller's (a payload's text, beside its page)."""
        if path in self.done:
            return False
        self.done.add(path)
        return True

    def task_files(self, tasks: list[tuple]) -> set[str]:
        """The pages and traces the tasks write (which links may lead to)."""
        files = set()
        for task in tasks:
            if task[0] == "pages":
                for path in map(self.files.target, task[1]):
                    if path is not None:
                        files.add(path)
                        if path.startswith("payloads/") and path.endswith(".html"):
                            files.add(text_file(path))  # a payload's text, written with its page
            elif task[0] == "chromium":
                files.add(f"{self.files.run_dir(task[1])}chromium.json")
        return files

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
        if path is not None and self.deferred is not None and _subpage_of(path):
            self.deferred.setdefault(path, url)  # the worker rendering its compile renders it
        elif path is not None and path not in self.done:
            self.done.add(path)
            queue.append((url, path))


def _subpage_of(path: str) -> str | None:
    """The compile page (report file) whose compile a subpage (SUBPAGE_RE) belongs to; None for other files."""
    match = SUBPAGE_RE.fullmatch(path)
    return None if match is None else f"{path[:match.start(1)]}{match.group(1)}.html"


_WORKER: dict[tuple, Report] = {}  # in a worker process: its Report, set up once (a forked one inherits it)


def _worker_task(arguments: tuple) -> TaskResult:
    """In a worker process: one task of Report.tasks; only this task's files are reported back."""
    db_path, out, runs, renderer_class, run_facts, task = arguments
    key = (str(db_path), str(out), tuple(runs), run_facts)  # Report.key
    if key not in _WORKER:  # spawned: set up here
        _WORKER.clear()
        _WORKER[key] = Report(db_path, out, runs, renderer_class, run_facts=run_facts)
        _WORKER[key].load()
    report = _WORKER[key]
    if getattr(report, "pid", None) != os.getpid():  # forked with the maps, or spawned: its own connection
        report.open()
    report.done = set()
    return report.run_task(task)
