"""A static copy of the tlindex pages (`tlindex report`): the plugin's own pages, rendered once, linked relatively.

There is one renderer: every page is produced by the plugin's page handler (pages/), called
in process as Datasette would call it, on a `ReportSite` (report_site.py: the few things a handler
asks Datasette for, without a server's machinery); then each link to a page of the report is made relative
to the file that holds it, and every other link (Datasette's table pages, search, diff: they
need a server) loses its href, and forms are left out. The bulk (every compile page with the pages
of its compile, the page and text of every payload, provenance pages, each run's Perfetto trace,
each log's tlparse files) is split into tasks that worker processes do (forked where that is safe,
see start_workers); meanwhile the run pages, tries and query pages are rendered here, and every link
met on any page is followed, so nothing a user can reach is missing. Layout (one run, DIR is that
run's folder; several runs, DIR/index.html lists them and each has DIR/run-<id>/):

    index.html            the run page (findings first)
    trie.html, trie-rank-<R>.html
    compiles/<id>.html, provenance/<artifact>.html, queries/<name>[--<param>-<value>].html
    failures_and_restarts.html (the failures query, named as tlparse names it)
    compile_directory.json, raw.jsonl   tlparse's formats (per log file: rank_<R>/ in multi-log runs, see log_folders)
    chromium.json         the run's Perfetto trace
    ../payloads/<md5>.html, .txt   each distinct payload once (artifact links lead here)
    ../assets/            Datasette's and the plugin's CSS and JS
"""

from __future__ import annotations

import html
import json
import os
import posixpath
import re
import sqlite3
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from datasette.utils.asgi import Request

from tlindex.answers.queries import guard_functions, load_queries, read_only, run_sql
from tlindex.formats.tlparse_files import Links, compile_directory, raw_jsonl
from tlindex.routes import match as route_match
from tlindex.stopping import WorkerPool
from tlindex.store.db import connect_read_only

from .cells import cell_link
from .database import Urls
from .highlight import CODE_END, CODE_START
from .pages import DEGRADED_HEADER, ROUTES
from .report_site import ReportSite, asset

# A link or source to relink; a link within its page (`#L-12`: a payload page has one per line) stays.
# No \b before the name: without it the pattern starts with a set of letters, which re searches 3x
# faster (the pages' attributes have no other name ending in these).
ATTRIBUTE_RE = re.compile(r'(href|src|action|data-src)="(?!#)([^"]*)"')
FORM_RE = re.compile(r"<form\b.*?</form>", re.S)  # search and diff forms: they need a server
QUERY_ROWS = 1000  # rows of a canned query's table in the report (Datasette's max_returned_rows)
EVERYTHING = str(10**9)  # the trie rendered whole: a static page cannot load the rest on demand
PARALLEL_FROM = 100  # pages of the tasks (compile and payload pages, ~2 ms each): below, one process renders
# them as fast as forked workers (a fork starts in milliseconds)
SPAWNED_FROM = 600  # the same where a fork is unsafe: a spawned worker imports the renderer (~0.4 s)
TASK_PAGES = 50  # pages per task given to a worker (small: the workers end together)
# A page of one compile besides its own (passes, bytecode, a piece's passes): a worker that renders the
# compile page renders these too, and the parent leaves them to it (else they are a serial tail)
SUBPAGE_RE = re.compile(r"(?:.*/)?compiles/(\d+)-[^/]*\.html")
RELINKED_MEMO = 20_000  # links remembered as relinked, per process (unbounded, a worker grew with every page)


@dataclass
class ReportSummary:
    pages: int = 0
    payloads: int = 0
    bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    degraded: list[tuple[str, str]] = field(default_factory=list)  # (report file, what failed): written as a notice


DEGRADED_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>tlindex: not rendered</title></head>
<body><h1>This page could not be rendered</h1><p>{what}</p><p>The rest of the report was written;
the report's <a href="{index}">index</a> lists every page that was not. Please report this with the log
that produced it.</p></body></html>
"""


class Report:
    """Writes the static report of some runs of a tlindex database into an empty folder."""

    def __init__(self, db_path: Path, out: Path, runs: list[int], progress: Callable[[int], None] | None = None):
        self.db_path, self.out, self.runs = Path(db_path), Path(out), sorted(runs)
        self.single = len(self.runs) == 1
        self.progress = progress or (lambda pages: None)
        self.summary = ReportSummary()
        self.permissions: dict = {}
        self.found: dict[str, str] = {}  # links met by the tasks (file: url), for the crawl
        self.total = ReportSummary()
        self.relinked: dict[tuple[str, str], str] = {}
        self.deferred: dict[str, str] | None = None  # while workers render: compile subpages met here (file: url)
        self.workers: Executor | None = None
        self.lost_worker = False

    # --- where things go ---------------------------------------------------------------------

    def _key(self) -> tuple:
        return (str(self.db_path), str(self.out), tuple(self.runs))

    def run_dir(self, run: int) -> str:
        return "" if self.single else f"run-{run}/"

    def target(self, url: str) -> str | None:
        """The report file (relative to DIR) of a URL of the served pages, or None if the report has none."""
        parts = urlsplit(url)
        path, args = parts.path, parse_qsl(parts.query)
        if path.startswith(("/-/static/", "/-/static-plugins/tlindex/")):
            return "assets/" + posixpath.basename(path)
        if not path.startswith(self.base + "/"):
            return None
        rest = path[len(self.base):]
        found = route_match(rest)
        if found is not None:
            route, values = found
            if route.server_only or values.get("format"):  # JSON twins are the server's
                return None
            return FILES[route.name](self, values, dict(args))
        route = rest.split("/")
        if len(route) == 2 and route[1] in self.queries:
            params = dict(args)
            run = params.pop("run", None)
            if run is None or not run.isdigit() or int(run) not in self.runs:
                return None
            if route[1] == "failures" and not params:
                return f"{self.run_dir(int(run))}failures_and_restarts.html"
            extra = "".join(f"--{key}-{re.sub(r'[^A-Za-z0-9_.]', '_', value)}" for key, value in sorted(params.items()))
            return f"{self.run_dir(int(run))}queries/{route[1]}{extra}.html"
        return None

    def _run_file(self, run: int, name: str) -> str | None:
        return f"{self.run_dir(run)}{name}" if run in self.runs else None

    def _compile_file(self, compile_row: int, suffix: str) -> str | None:
        run = self.compile_runs.get(compile_row)
        return None if run not in self.runs else f"{self.run_dir(run)}compiles/{compile_row}{suffix}.html"

    def _piece_file(self, piece: int) -> str | None:
        compile_row = self.piece_compiles.get(piece)
        return None if compile_row is None else self._compile_file(compile_row, f"-piece-{piece}-passes")

    def _artifact_file(self, artifact: int, kind: str) -> str | None:
        run = self.artifact_runs.get(artifact)
        if run not in self.runs:
            return None
        payload = self.artifact_payloads.get(artifact)
        if kind == "artifact" and payload:
            return f"payloads/{payload}.html"
        return f"{self.run_dir(run)}{kind}/{artifact}.html"

    # --- building ------------------------------------------------------------------------------

    def write(self, jobs: int = 1) -> ReportSummary:
        """Write the report; with jobs > 1 the compile and payload pages are rendered by that many processes."""
        # the workers are shut down on the way out: killed when it is an error or a stop (tlindex.stopping)
        with ExitStack() as self.pools:
            try:
                self._load_maps()
                if jobs > 1 and can_fork():  # forked now: they share the maps, and hold no connection of this process
                    _WORKER.clear()
                    _WORKER[self._key()] = self
                    self._start_workers(jobs)
                self._open_site()
                return self._write(jobs)
            finally:
                _WORKER.pop(self._key(), None)
                if hasattr(self, "site"):
                    self.site.close()

    def _start_workers(self, jobs: int) -> Executor:
        """The worker processes, started once, shut down (or killed) when write() ends."""
        if self.workers is None:
            self.workers = self.pools.enter_context(start_workers(jobs))
        return self.workers

    def _write(self, jobs: int) -> ReportSummary:
        import asyncio

        tasks = self._tasks()
        self.summary = self.total  # what this process writes counts in the total (a task counts its own, merged)
        pages = sum(len(task[1]) for task in tasks if task[0] == "pages")
        if jobs > 1 and pages >= (PARALLEL_FROM if self.workers is not None else SPAWNED_FROM):
            self._start_workers(jobs)
            futures = [self.workers.submit(_worker_task, (self.db_path, self.out, self.runs, task)) for task in tasks]
            self.done |= self._task_files(tasks)  # theirs: the crawl below leaves them to the workers
            self.deferred = {}  # and the pages of their compiles (SUBPAGE_RE)
            asyncio.run(self._crawl(self._seeds()))  # meanwhile, the run pages, tries and queries here
            for task, future in zip(tasks, futures):
                self._merge(*self._result(task, future))
            self.deferred, found = None, {**self.deferred, **self.found}
        else:
            for task in tasks:
                self._merge(*asyncio.run(self._run_task(task)))
            self.summary = self.total
            asyncio.run(self._crawl(self._seeds()))
            found = self.found
        asyncio.run(self._crawl([url for path, url in found.items() if path not in self.done]))
        self._note_degraded()
        (self.out / "tlindex-report.json").write_text(json.dumps(
            {"runs": self.runs, "pages": self.total.pages, "database": self.db_path.name,
             "degraded": [{"file": path, "error": what} for path, what in self.total.degraded]}) + "\n")
        return self.total

    def _result(self, task: tuple, future: Future) -> tuple[set[str], dict[str, str], ReportSummary]:
        """A worker's task's result; the task done here when the worker died (killed, out of memory): the
        pool is then broken, and every task left is done here."""
        import asyncio

        try:
            return future.result()
        except BrokenProcessPool as error:
            if not self.lost_worker:
                self.lost_worker = True
                self.total.warnings.append(f"a worker process ended abruptly ({error}); the pages it had "
                                           "left were rendered by the main process")
            result = asyncio.run(self._run_task(task))
            self.summary = self.total
            return result

    def _note_degraded(self) -> None:
        """Name every file that could not be produced at the top of index.html."""
        index = self.out / "index.html"
        if not self.total.degraded or not index.exists():
            return
        items = "".join(f'<li>{_link(path) if (self.out / path).is_file() else html.escape(path)}: {html.escape(what)}</li>'
                        for path, what in sorted(self.total.degraded))  # a trace or JSON file that failed is not there
        notice = (f'<div class="tlindex-degraded" role="alert"><strong>{len(self.total.degraded)} '
                  f'file{"s" * (len(self.total.degraded) != 1)} of this report could not be rendered</strong> '
                  f'(a page says so where it would be; the rest is complete):<ul>{items}</ul></div>')
        page = index.read_text(encoding="utf-8")
        at = page.find("</h1>")
        at = at + len("</h1>") if at >= 0 else 0
        index.write_text(page[:at] + notice + page[at:], encoding="utf-8")

    def _open_site(self) -> None:
        """The site pages are rendered on (one connection: a process opens its own)."""
        self.site = ReportSite(self.db_path)
        self.db = self.site.get_database(self.db_path.stem)
        self.urls = Urls(self.site, self.db.name)
        self.base = self.urls.base
        self.queries = load_queries()
        self.done: set[str] = set()  # report files written (or found to have nothing to write)
        self.site_pid = os.getpid()

    def _load_maps(self) -> None:
        """Which run each compile and artifact is of, and which payloads have pages (read once: forked
        workers share them)."""
        conn = connect_read_only(self.db_path)
        try:
            marks = ",".join("?" * len(self.runs))
            self.compile_runs = dict(conn.execute(f"SELECT id, run_id FROM compiles WHERE run_id IN ({marks})",
                                                  self.runs).fetchall())
            self.piece_compiles = dict(conn.execute(f"""SELECT p.id, p.compile FROM piece_compiles p
                    JOIN compiles c ON c.id = p.compile WHERE c.run_id IN ({marks})""", self.runs).fetchall())
            self.artifact_runs, self.artifact_payloads = {}, {}
            self.provenance = []  # artifacts with a provenance page
            for artifact, run, payload, mapping in conn.execute(f"""
                    SELECT a.id, s.run_id, a.payload, a.name = 'inductor_provenance_tracking_node_mappings'
                    FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id
                    JOIN sources s ON s.id = e.source_id WHERE s.run_id IN ({marks})""", self.runs):
                self.artifact_runs[artifact], self.artifact_payloads[artifact] = run, payload
                if mapping and payload:
                    self.provenance.append(artifact)
            # the compile pages also link the configs of their metrics (payloads, not artifacts)
            self.configs = {digest for row in conn.execute(f"""
                    SELECT m.dynamo_config, m.inductor_config, m.functorch_config, m.compiler_config
                    FROM metrics m JOIN compiles c ON c.id = m.compile WHERE c.run_id IN ({marks})""", self.runs)
                            for digest in row if digest}
            self.payload_pages = {digest for digest in self.artifact_payloads.values() if digest} | self.configs
        finally:
            conn.close()

    def _tasks(self) -> list[tuple]:
        """The bulk of the work, in independent pieces: compile pages, payload pages and texts, each run's
        Perfetto trace, each log's tlparse files."""
        urls = [self.urls.compile(c) for c in sorted(self.compile_runs)]
        for digest in sorted(self.payload_pages):
            urls += [self.urls.payload(digest), self.urls.payload(digest, raw=True)]
        urls += [self.urls.provenance(artifact) for artifact in self.provenance]
        # the traces and tlparse's files first: each is one long task, which last would be a serial tail
        tasks: list[tuple] = [("chromium", run) for run in self.runs]
        conn = connect_read_only(self.db_path)
        try:
            for run in self.runs:
                folders = log_folders(conn, run)
                tasks += [("tlparse", run, file_id, folder, len(folders)) for file_id, folder in folders.items()]
        finally:
            conn.close()
        return tasks + [("pages", urls[i:i + TASK_PAGES]) for i in range(0, len(urls), TASK_PAGES)]

    async def _run_task(self, task: tuple) -> tuple[set[str], dict[str, str], ReportSummary]:
        """Do one task; (files written, links met (file: url), counts of this task)."""
        self.summary, found = ReportSummary(), {}
        self._enqueue = lambda url: found.setdefault(self.target(url), url)  # once per file, not per link
        kind = task[0]
        if kind == "pages":
            urls, compiles = task[1], set()
            while urls:  # the task's pages, then the pages of its compiles that they link to
                for url in urls:
                    path = self.target(url)
                    if path is not None:
                        self.done.add(path)
                        compiles.add(path)
                        await self._render_file(url, path)
                urls = [url for path, url in found.items()
                        if path is not None and path not in self.done and _subpage_of(path) in compiles]
        elif kind == "chromium":
            path = f"{self.run_dir(task[1])}chromium.json"
            self.done.add(path)
            self._isolated(path, lambda: self._write_chromium(task[1], path))
        else:
            conn = connect_read_only(self.db_path)
            try:
                self._tlparse_file(conn, *task[1:])  # each of its files isolated
            finally:
                conn.close()
        return self.done, found, self.summary

    def _task_files(self, tasks: list[tuple]) -> set[str]:
        """The pages and traces the tasks write (which links may lead to)."""
        files = set()
        for task in tasks:
            if task[0] == "pages":
                files |= {path for path in map(self.target, task[1]) if path is not None}
            elif task[0] == "chromium":
                files.add(f"{self.run_dir(task[1])}chromium.json")
        return files

    def _merge(self, done: set[str], found: dict[str, str], summary: ReportSummary) -> None:
        self.done |= done
        self.found.update(found)
        for counter in ("pages", "payloads", "bytes"):
            setattr(self.total, counter, getattr(self.total, counter) + getattr(summary, counter))
        self.total.warnings += summary.warnings
        self.total.degraded += summary.degraded
        self.progress(self.total.pages)

    def _seeds(self) -> list[str]:
        """Where the crawl starts: the run pages (and the runs page), the failures lists."""
        seeds = [self.urls.run(run) for run in self.runs]
        if not self.single:
            seeds.insert(0, self.urls.runs() + "?" + urlencode([("run", run) for run in self.runs]))
        return seeds + [self.urls.query("failures", run=run) for run in self.runs]

    async def _crawl(self, seeds: list[str]) -> None:
        """Render every page reachable from `seeds` that is not written yet."""
        queue: list[tuple[str, str]] = []
        self._enqueue = lambda url: self._add(queue, url)
        for url in seeds:
            self._enqueue(url)
        while queue:
            url, path = queue.pop()
            await self._render_file(url, path)
            self.progress(self.summary.pages)

    def _add(self, queue: list[tuple[str, str]], url: str) -> None:
        path = self.target(url)
        if path is not None and self.deferred is not None and _subpage_of(path):
            self.deferred.setdefault(path, url)  # the worker rendering its compile renders it
        elif path is not None and path not in self.done:
            self.done.add(path)
            queue.append((url, path))

    async def _render_file(self, url: str, path: str) -> None:
        if path.endswith("chromium.json"):
            self._write_chromium(int(urlsplit(url).path.split("/")[-2]), path)
            return
        body = await self._render(url, path)
        if body is None:
            return
        if path.endswith(".html"):
            body = self._relink(body.decode("utf-8"), path).encode("utf-8")
        self._save(path, body)

    def _save(self, path: str, body: bytes) -> None:
        file = self.out / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(body)
        self.summary.pages += path.endswith(".html")
        self.summary.payloads += path.startswith("payloads/") and path.endswith(".txt")
        self.summary.bytes += len(body)

    def _relink(self, page: str, path: str) -> str:
        """Links to report files made relative to `path`; links to anything else, and forms, dropped."""
        here = posixpath.dirname(path)

        def replace(match: re.Match) -> str:
            # the same link from the same folder is relinked (and its page queued) once per process
            key = (match.group(0), here)
            if key not in self.relinked:
                if len(self.relinked) >= RELINKED_MEMO:  # most links are met on one page only: a bound, not a leak
                    self.relinked.clear()
                self.relinked[key] = relinked(match)
            return self.relinked[key]

        def relinked(match: re.Match) -> str:
            attribute, value = match.group(1), html.unescape(match.group(2))
            if value.startswith(("#", "http://", "https://", "mailto:", "data:")):
                return match.group(0)
            url, _, fragment = value.partition("#")
            target = self.target(url) if url.startswith("/") else None
            if target is None or attribute == "data-src":
                return ""  # needs a server: no link
            self._enqueue(url)
            relative = posixpath.relpath(target, here or ".")
            return f'{attribute}="{html.escape(relative + ("#" + fragment if fragment else ""))}"'

        page, parts, at = FORM_RE.sub("", page), [], 0
        while (start := page.find(CODE_START, at)) >= 0 and (end := page.find(CODE_END, start)) >= 0:
            parts += [ATTRIBUTE_RE.sub(replace, page[at:start]), page[start:end]]  # a payload's text: no link
            at = end
        return "".join(parts + [ATTRIBUTE_RE.sub(replace, page[at:])])

    async def _render(self, url: str, path: str) -> bytes | None:
        """The body of one report file, from the plugin (or Datasette's package, for its assets)."""
        parts = urlsplit(url)
        if path.startswith("assets/"):
            return asset(parts.path)
        if not parts.path.startswith(self.base + "/-/tlindex"):
            try:
                return await self._query_page(parts.path.rsplit("/", 1)[1], dict(parse_qsl(parts.query)))
            except Exception as error:
                return self._degraded(path, f"{url}: {type(error).__name__}: {error}")
        query = parts.query
        if "/-/tlindex/trie/" in parts.path:
            query = urlencode(parse_qsl(query) + [("max_nodes", EVERYTHING)])
        for pattern, handler in ROUTES:
            match = re.match(pattern, parts.path)
            if match:
                try:
                    response = await handler(self.site, _request(parts.path + (f"?{query}" if query else ""),
                                                                       match.groupdict(), self.permissions))
                except Exception as error:  # one page that cannot be rendered degrades alone
                    return self._degraded(path, f"{url}: {type(error).__name__}: {error}")
                body = response.body
                body = body.encode("utf-8") if isinstance(body, str) else body
                degraded = response.headers.get(DEGRADED_HEADER)
                if degraded:  # the page says what failed; the report names it too
                    self.summary.degraded.append((path, f"{url}: {degraded}"))
                    return body
                if response.status != 200:
                    self.summary.warnings.append(f"{url}: HTTP {response.status}")
                    return None
                return body
        return None

    def _degraded(self, path: str, what: str) -> bytes:
        """The notice written in place of a page that failed (links to it still lead somewhere)."""
        self.summary.degraded.append((path, what))
        index = posixpath.relpath("index.html", posixpath.dirname(path) or ".")
        return DEGRADED_PAGE.format(what=html.escape(what), index=html.escape(index)).encode("utf-8")

    def _isolated(self, path: str, work: Callable[[], None]) -> None:
        """Run one piece of non-page work (a trace, tlparse's files of a log); a failure is recorded, not raised."""
        try:
            work()
        except Exception as error:
            self.summary.degraded.append((path, f"{type(error).__name__}: {error}"))

    async def _query_page(self, name: str, params: dict[str, str]) -> bytes:
        """A canned query's result as a table (the first QUERY_ROWS rows), its cells linked as in Datasette."""
        query = self.queries[name]

        def data(conn):
            try:
                cursor = run_sql(read_only(conn), query.sql, params)
                return [d[0] for d in cursor.description], cursor.fetchmany(QUERY_ROWS + 1)
            finally:
                guard_functions(conn)  # the site's connection: back to what the plugin gives every one

        columns, rows = await self.db.execute_fn(data)
        shown = []
        for row in rows[:QUERY_ROWS]:
            record = dict(zip(columns, row))
            shown.append([cell_link(self.urls, record, column, value) or ("" if value is None else value)
                          for column, value in record.items()])
        page = await self.site.render_template("tlindex/report_query.html", {
            "database": self.db.name, "u": self.urls, "q": query, "params": params, "columns": columns,
            "rows": shown, "more": len(rows) > QUERY_ROWS, "limit": QUERY_ROWS},
            request=_request(self.base, {}, self.permissions))
        return page.encode("utf-8")

    def _write_chromium(self, run: int, path: str) -> None:
        """The run's Perfetto trace, streamed batch by batch to its file (it can be hundreds of MB)."""
        from tlindex.formats.chromium import trace_chunks

        conn = connect_read_only(self.db_path)
        try:
            self._stream(path, trace_chunks(conn, run))
        finally:
            conn.close()

    def _stream(self, path: str, pieces: Iterable[bytes]) -> None:
        """Write a file piece by piece, whole or not at all: a failure midway leaves no half file behind."""
        file = self.out / path
        file.parent.mkdir(parents=True, exist_ok=True)
        partial = file.with_name(f"{file.name}.partial")
        try:
            with open(partial, "wb") as out:
                for piece in pieces:
                    self.summary.bytes += out.write(piece)
            os.replace(partial, file)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def _tlparse_file(self, conn: sqlite3.Connection, run: int, file_id: int, name: str, files: int) -> None:
        """compile_directory.json and raw.jsonl of one log of the run, in tlparse's formats."""
        folder = self.run_dir(run) + ("" if files == 1 else f"{name}/")

        def rel(target: str) -> str:
            return posixpath.relpath(target, folder or ".")

        def text(digest: str) -> str:
            target = f"payloads/{digest}.txt"
            # a payload with a page has its text written by the pages' task (maybe in another process)
            if digest not in self.payload_pages and target not in self.done and not (self.out / target).exists():
                self.done.add(target)
                self._save(target, self._payload_text(conn, digest))
            return rel(target)

        links = Links(text, lambda digest: rel(f"payloads/{digest}.html"),
                      lambda compile: rel(f"{self.run_dir(run)}compiles/{compile}.html"))
        self._isolated(f"{folder}compile_directory.json", lambda: self._stream(
            f"{folder}compile_directory.json", (piece.encode() for piece in compile_directory(conn, file_id, links))))

        def raw() -> None:
            try:
                self._stream(f"{folder}raw.jsonl", (f"{line}\n".encode() for line in raw_jsonl(conn, file_id, text)))
            except OSError as error:
                self.summary.warnings.append(f"raw.jsonl of {folder or 'the run'}: the log is not readable ({error})")

        self._isolated(f"{folder}raw.jsonl", raw)

    @staticmethod
    def _payload_text(conn: sqlite3.Connection, digest: str) -> bytes:
        row = conn.execute("SELECT text FROM payloads WHERE hash = ?", (digest,)).fetchone()
        return (row[0] if row else "").encode("utf-8")


def _link(path: str) -> str:
    return f'<a href="{html.escape(path)}">{html.escape(path)}</a>'


def _subpage_of(path: str) -> str | None:
    """The compile page (report file) whose compile a subpage (SUBPAGE_RE) belongs to; None for other files."""
    match = SUBPAGE_RE.fullmatch(path)
    return None if match is None else f"{path[:match.start(1)]}{match.group(1)}.html"


def _trie_file(report: Report, values: dict, args: dict) -> str | None:
    rank = args.get("rank")
    suffix = f"-rank-{int(rank)}" if rank and rank.isdigit() else ""
    return report._run_file(int(values["run"]), f"trie{suffix}.html")


# Where the report writes each page of tlindex.routes that it writes (route name: file of the URL's values).
FILES: dict[str, Callable[[Report, dict, dict], str | None]] = {
    "runs": lambda report, values, args: "index.html",
    "run": lambda report, values, args: report._run_file(int(values["run"]), "index.html"),
    "chromium": lambda report, values, args: report._run_file(int(values["run"]), "chromium.json"),
    "trie": _trie_file,
    "compile": lambda report, values, args: report._compile_file(int(values["compile"]), ""),
    "bytecode": lambda report, values, args: report._compile_file(int(values["compile"]), "-bytecode"),
    "passes": lambda report, values, args: report._compile_file(int(values["compile"]), "-passes"),
    "piece_passes": lambda report, values, args: report._piece_file(int(values["piece"])),
    "vllm": lambda report, values, args: report._run_file(int(values["run"]), "vllm.html"),
    "provenance": lambda report, values, args: report._artifact_file(int(values["artifact"]), "provenance"),
    "artifact": lambda report, values, args: report._artifact_file(int(values["artifact"]), "artifact"),
    "payload": lambda report, values, args: f"payloads/{values['hash']}{values['ext'] or '.html'}",
}


def log_folders(conn: sqlite3.Connection, run: int) -> dict[int, str]:
    """One folder name per log file of a run (tlparse's rank_<R>), never two files in one: a restarted
    rank's later process is rank_<R>_restart_<N>, processes sharing a rank add their pid, and a file
    whose name is still taken, or that has no rank, is named by its file id."""
    folders: dict[int, str] = {}
    for file_id, process in conn.execute("""
            SELECT file_id, min(process) FROM sources WHERE run_id = ? GROUP BY file_id
            ORDER BY min(rank), min(coalesce(restart, 0)), file_id""", (run,)):
        name = "rank_" + re.sub(r"[^0-9A-Za-z]+", "_", process).strip("_") if process is not None else f"file_{file_id}"
        folders[file_id] = name if name not in folders.values() else f"{name}_file_{file_id}"
    return folders


def _request(path: str, url_vars: dict, permissions: dict) -> Request:
    """A request as Datasette's router would pass it (no actor: the report is the database owner's).

    `permissions` is denied_to's memo, shared by all requests of one report (one actor, one database).
    """
    request = Request.fake(path, url_vars=url_vars)
    request.scope["csrftoken"] = lambda: ""
    request.scope["tlindex_denied"] = permissions
    return request


def start_workers(jobs: int) -> Executor:
    """`jobs` worker processes, started now. Forked where that is safe (Linux, and no other thread in this
    process that a fork would copy mid-flight): a fork starts in milliseconds with the renderer imported,
    where a fresh process (spawn, elsewhere) spends about 0.4 s importing it."""
    import multiprocessing

    pool = WorkerPool(jobs, multiprocessing.get_context("fork" if can_fork() else "spawn"))  # they die with this process
    for _ in range(jobs):
        pool.submit(_started)  # a forking pool starts every process at its first task; a spawning one, one per task
    return pool


def can_fork() -> bool:
    """Whether worker processes can be forked from this one safely: on Linux, with no other thread running."""
    import threading

    return sys.platform == "linux" and threading.active_count() == 1


def _started() -> None:
    """A worker's first task: nothing (its process exists, and has imported this module)."""


_WORKER: dict[tuple, Report] = {}  # in a worker process: its Report, set up once (a forked one inherits it)


def _worker_task(arguments: tuple) -> tuple[set[str], dict[str, str], ReportSummary]:
    """In a worker process: one task of Report._tasks; only this task's files are reported back."""
    import asyncio

    db_path, out, runs, task = arguments
    key = (str(db_path), str(out), tuple(runs))  # Report._key
    if key not in _WORKER:  # spawned: set up here
        _WORKER.clear()
        _WORKER[key] = Report(db_path, out, runs)
        _WORKER[key]._load_maps()
    report = _WORKER[key]
    if getattr(report, "site_pid", None) != os.getpid():  # forked with the maps, or spawned: its own connection
        report._open_site()
    report.done = set()
    return asyncio.run(report._run_task(task))
