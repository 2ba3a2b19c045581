"""A static copy of the tlindex pages (`tlindex report`): the plugin's own pages, rendered once, linked relatively.

There is one renderer: every page is produced by the plugin's page handler (pages/), called
in process as Datasette would call it; then each link to a page of the report is made relative
to the file that holds it, and every other link (Datasette's table pages, search, diff: they
need a server) loses its href. Pages are found by following links from the run pages, so the
report holds exactly what a user can reach. Layout (one run, DIR is that run's folder;
several runs, DIR/index.html lists them and each has DIR/run-<id>/):

    index.html            the run page (findings first)
    trie.html, trie-rank-<R>.html
    compiles/<id>.html, provenance/<artifact>.html, queries/<name>[--<param>-<value>].html
    failures_and_restarts.html (the failures query, named as tlparse names it)
    compile_directory.json, raw.jsonl   tlparse's formats (per log: rank_<R>/ in multi-log runs)
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from datasette.app import Datasette
from datasette.utils.asgi import Request

from tlindex.queries import load_queries, read_only, run_sql
from tlindex.tlparse_files import Links, compile_directory, raw_jsonl

from .cells import cell_link
from .database import Urls
from .pages import ROUTES

ATTRIBUTE_RE = re.compile(r'\b(href|src|action|data-src)="([^"]*)"')
FORM_RE = re.compile(r"<form\b.*?</form>", re.S)  # search and diff forms: they need a server
QUERY_ROWS = 1000  # rows of a canned query's table in the report (Datasette's max_returned_rows)
EVERYTHING = str(10**9)  # the trie rendered whole: a static page cannot load the rest on demand


@dataclass
class ReportSummary:
    pages: int = 0
    payloads: int = 0
    bytes: int = 0
    warnings: list[str] = field(default_factory=list)


class Report:
    """Writes the static report of some runs of a tlindex database into an empty folder."""

    def __init__(self, db_path: Path, out: Path, runs: list[int], progress: Callable[[int], None] | None = None):
        self.db_path, self.out, self.runs = Path(db_path), Path(out), sorted(runs)
        self.single = len(self.runs) == 1
        self.progress = progress or (lambda pages: None)
        self.summary = ReportSummary()

    # --- where things go ---------------------------------------------------------------------

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
        route = rest.split("/")
        if rest == "/-/tlindex":
            return "index.html"
        if rest.startswith("/-/tlindex/"):
            return self._page_target(route[3:], dict(args))
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

    def _page_target(self, route: list[str], args: dict) -> str | None:
        kind, ident = route[0], route[1] if len(route) > 1 else ""
        if not ident.lstrip("-").isdigit():
            if kind == "payload" and re.fullmatch(r"[0-9a-f]{32}(\.txt)?", ident):
                return f"payloads/{ident}" if ident.endswith(".txt") else f"payloads/{ident}.html"
            return None
        number = int(ident)
        if kind == "run" and number in self.runs:
            if route[2:] == ["chromium.json"]:
                return f"{self.run_dir(number)}chromium.json"
            return f"{self.run_dir(number)}index.html" if len(route) == 2 else None
        if kind == "trie" and number in self.runs and len(route) == 2:
            rank = args.get("rank")
            return f"{self.run_dir(number)}trie" + (f"-rank-{int(rank)}" if rank and rank.isdigit() else "") + ".html"
        if kind == "compile" and self.compile_runs.get(number) in self.runs:
            return f"{self.run_dir(self.compile_runs[number])}compiles/{number}.html"
        if kind in ("artifact", "provenance") and self.artifact_runs.get(number) in self.runs:
            payload = self.artifact_payloads.get(number)
            if kind == "artifact" and payload:
                return f"payloads/{payload}.html"
            return f"{self.run_dir(self.artifact_runs[number])}{kind}/{number}.html"
        return None

    # --- building ------------------------------------------------------------------------------

    def write(self) -> ReportSummary:
        import asyncio

        asyncio.run(self._build())
        return self.summary

    async def _build(self) -> None:
        self.datasette = Datasette([str(self.db_path)])
        await self.datasette.invoke_startup()
        self.db = self.datasette.get_database(next(iter(self.datasette.databases.keys() - {"_internal"})))
        self.urls = Urls(self.datasette, self.db.name)
        self.base = self.urls.base
        self.queries = load_queries()
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            marks = ",".join("?" * len(self.runs))
            self.compile_runs = dict(conn.execute(f"SELECT id, run_id FROM compiles WHERE run_id IN ({marks})",
                                                  self.runs).fetchall())
            self.artifact_runs, self.artifact_payloads = {}, {}
            for artifact, run, payload in conn.execute(f"""
                    SELECT a.id, s.run_id, a.payload FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id
                    JOIN sources s ON s.id = e.source_id WHERE s.run_id IN ({marks})""", self.runs):
                self.artifact_runs[artifact], self.artifact_payloads[artifact] = run, payload
            seeds = [self.urls.run(run) for run in self.runs]
            if not self.single:
                seeds.insert(0, self.urls.runs() + "?" + urlencode([("run", run) for run in self.runs]))
            seeds += [self.urls.compile(c) for c in sorted(self.compile_runs)]  # every compile, linked or not
            seeds += [self.urls.query("failures", run=run) for run in self.runs]
            await self._crawl(seeds)
            for run in self.runs:
                self._tlparse_files(conn, run)
        finally:
            conn.close()
        (self.out / "tlindex-report.json").write_text(json.dumps(
            {"runs": self.runs, "pages": self.summary.pages, "database": self.db_path.name}) + "\n")

    async def _crawl(self, seeds: list[str]) -> None:
        queue, seen = list(seeds), set()
        while queue:
            url = queue.pop()
            path = self.target(url)
            if path is None or path in seen:
                continue
            seen.add(path)
            body = await self._render(url, path)
            if body is None:
                continue
            if path.endswith(".html"):
                body = self._relink(body.decode("utf-8"), path, queue).encode("utf-8")
            self._save(path, body)
            self.progress(self.summary.pages)

    def _save(self, path: str, body: bytes) -> None:
        file = self.out / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(body)
        self.summary.pages += path.endswith(".html")
        self.summary.payloads += path.startswith("payloads/") and path.endswith(".txt")
        self.summary.bytes += len(body)

    def _relink(self, page: str, path: str, queue: list[str]) -> str:
        """Links to report files made relative to `path`; links to anything else, and forms, dropped."""
        here = posixpath.dirname(path)

        def replace(match: re.Match) -> str:
            attribute, value = match.group(1), html.unescape(match.group(2))
            if value.startswith(("#", "http://", "https://", "mailto:", "data:")):
                return match.group(0)
            url, _, fragment = value.partition("#")
            target = self.target(url) if url.startswith("/") else None
            if target is None or attribute == "data-src":
                return ""  # needs a server: no link
            queue.append(url)
            relative = posixpath.relpath(target, here or ".")
            return f'{attribute}="{html.escape(relative + ("#" + fragment if fragment else ""))}"'

        return ATTRIBUTE_RE.sub(replace, FORM_RE.sub("", page))

    async def _render(self, url: str, path: str) -> bytes | None:
        """The body of one report file, from the plugin (or Datasette, for its assets)."""
        parts = urlsplit(url)
        if path.startswith("assets/"):
            response = await self.datasette.client.get(parts.path)
            return response.content if response.status_code == 200 else None
        if path.endswith("chromium.json"):
            return self._chromium(int(parts.path.split("/")[-2]))
        if not parts.path.startswith(self.base + "/-/tlindex"):
            return await self._query_page(parts.path.rsplit("/", 1)[1], dict(parse_qsl(parts.query)))
        query = parts.query
        if "/-/tlindex/trie/" in parts.path:
            query = urlencode(parse_qsl(query) + [("max_nodes", EVERYTHING)])
        for pattern, handler in ROUTES:
            match = re.match(pattern, parts.path)
            if match:
                response = await handler(self.datasette, _request(parts.path + (f"?{query}" if query else ""),
                                                                   match.groupdict()))
                if response.status != 200:
                    self.summary.warnings.append(f"{url}: HTTP {response.status}")
                    return None
                body = response.body
                return body.encode("utf-8") if isinstance(body, str) else body
        return None

    async def _query_page(self, name: str, params: dict[str, str]) -> bytes:
        """A canned query's result as a table (the first QUERY_ROWS rows), its cells linked as in Datasette."""
        query = self.queries[name]

        def data(conn):
            cursor = run_sql(read_only(conn), query.sql, params)
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchmany(QUERY_ROWS + 1)
            return columns, rows

        columns, rows = await self.db.execute_fn(data)
        shown = []
        for row in rows[:QUERY_ROWS]:
            record = dict(zip(columns, row))
            shown.append([cell_link(self.urls, record, column, value) or ("" if value is None else value)
                          for column, value in record.items()])
        page = await self.datasette.render_template("tlindex/report_query.html", {
            "database": self.db.name, "u": self.urls, "q": query, "params": params, "columns": columns,
            "rows": shown, "more": len(rows) > QUERY_ROWS, "limit": QUERY_ROWS}, request=_request(self.base, {}))
        return page.encode("utf-8")

    def _chromium(self, run: int) -> bytes:
        from tlindex.chromium import HEAD, TAIL, encode, event_batch, metadata_events, process_ids

        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            pids = process_ids(conn, run)
            parts, written, after = [HEAD, encode(metadata_events(pids), first=True)], bool(pids), 0
            while after is not None:
                events, after = event_batch(conn, run, pids, after)
                parts.append(encode(events, first=not written))
                written = written or bool(events)
            parts.append(TAIL)
            return b"".join(parts)
        finally:
            conn.close()

    def _tlparse_files(self, conn: sqlite3.Connection, run: int) -> None:
        """compile_directory.json and raw.jsonl of each log of the run, in tlparse's formats."""
        files = conn.execute("""
            SELECT s.file_id, min(s.rank) FROM sources s WHERE s.run_id = ? GROUP BY s.file_id ORDER BY min(s.rank),
            s.file_id""", (run,)).fetchall()
        for file_id, rank in files:
            folder = self.run_dir(run) + ("" if len(files) == 1 else f"rank_{rank}/" if rank is not None
                                          else f"file_{file_id}/")

            def rel(target: str, folder: str = folder) -> str:
                return posixpath.relpath(target, folder or ".")

            def text(digest: str) -> str:
                target = f"payloads/{digest}.txt"
                if not (self.out / target).exists():
                    self._save(target, self._payload_text(conn, digest))
                return rel(target)

            links = Links(text, lambda digest: rel(f"payloads/{digest}.html"),
                          lambda compile: rel(f"{self.run_dir(run)}compiles/{compile}.html"))
            directory = compile_directory(conn, file_id, links)
            (self.out / folder).mkdir(parents=True, exist_ok=True)
            self._save(f"{folder}compile_directory.json", json.dumps(directory, indent=2, ensure_ascii=False).encode())
            try:
                with open(self.out / folder / "raw.jsonl", "w", encoding="utf-8") as out:
                    for line in raw_jsonl(conn, file_id, text):
                        out.write(line + "\n")
            except OSError as error:
                self.summary.warnings.append(f"raw.jsonl of {folder or 'the run'}: the log is not readable ({error})")
                os.remove(self.out / folder / "raw.jsonl")

    @staticmethod
    def _payload_text(conn: sqlite3.Connection, digest: str) -> bytes:
        row = conn.execute("SELECT text FROM payloads WHERE hash = ?", (digest,)).fetchone()
        return (row[0] if row else "").encode("utf-8")


def _request(path: str, url_vars: dict) -> Request:
    """A request as Datasette's router would pass it (no actor: the report is the database owner's)."""
    request = Request.fake(path, url_vars=url_vars)
    request.scope["csrftoken"] = lambda: ""
    return request
