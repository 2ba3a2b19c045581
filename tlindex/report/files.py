"""Where each file of a report goes: the report's side of tlindex.pages' `Files` (a page's `file` rule: every name is
the page declaration's), and the file of any URL the pages link to (or None when the report has none: Datasette's
table pages, search, diff).

Layout (one run: DIR is that run's folder; several: DIR/index.html lists them, each has DIR/run-<id>/):

    index.html            the run page (findings first)
    trie.html, trie-rank-<R>.html
    compiles/<id>.html, compiles/<id>-bytecode.html, compiles/<id>-passes.html, compiles/<id>-piece-<P>-passes.html
                          (a run of many processes: a compile of a rank group on its first rank's page, which lists
                          every rank's: report_files.alike_compiles)
    provenance/<artifact>.html, artifact/<artifact>.html (an artifact without payload), vllm.html
    queries/<name>[--<param>-<value>].html, failures_and_restarts.html (the failures query, as tlparse names it)
    compile_directory.json, raw.jsonl   tlparse's formats (one folder per log in multi-log runs: log_folders)
    chromium_events.json  the run's Perfetto trace (tlparse's name), when it has a few processes; else
    chromium_overview.json  each process's outermost spans, and rank_<R>/chromium_events.json, each rank's trace
    ../payloads/<md5>.html, .txt   each distinct payload once (artifact links lead here)
    ../assets/            Datasette's and the pages' own CSS and JS
"""

from __future__ import annotations

import functools
import posixpath
import re
import sqlite3
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

from tlindex import pages
from tlindex.answers import report_files
from tlindex.pages.rows import Args
from tlindex.render.urls import STATIC_URL

STATIC_PREFIXES = ("/-/static/", STATIC_URL)  # Datasette's assets, the pages' own
TARGETS_KEPT = 50_000  # URLs whose file is remembered (a bound: a 1 GB log's report links ~100,000)


class Found(NamedTuple):
    """A URL of the served pages: its page (tlindex.pages, or its QUERY), the path's values and its arguments."""

    page: pages.Page
    values: dict
    args: Args


class ReportFiles:
    """The file of each page and URL of a report of `runs` (its maps read once: forked workers share them)."""

    def __init__(self, conn: sqlite3.Connection, runs: list[int], base: str, queries: set[str]):
        self.runs = sorted(runs)
        self.single = len(self.runs) == 1
        self.base = base  # the database's URL: pages' URLs start with it
        self.queries = queries
        self.compile_runs = report_files.compile_runs(conn, self.runs)
        self.piece_compiles = report_files.piece_compiles(conn, self.runs)
        self.alike = report_files.alike_compiles(conn, self.runs)  # compile -> the one whose page is its page
        self.artifact_runs, self.artifact_payloads = {}, {}
        self.provenance = []  # artifacts with a provenance page
        for artifact, run, payload, mapping in report_files.run_artifacts(conn, self.runs):
            self.artifact_runs[artifact], self.artifact_payloads[artifact] = run, payload
            if mapping and payload:
                self.provenance.append(artifact)
        # the compile pages also link the configs of their metrics (payloads, not artifacts)
        configs = report_files.config_payloads(conn, self.runs)
        self.payload_pages = {digest for digest in self.artifact_payloads.values() if digest} | configs
        self.rank_folders = {run: rank_folders(conn, run) for run in self.runs}  # where each rank's trace goes
        # a URL's file, remembered (a link is met on many pages), and the compile page it is rendered with
        self.target: Callable[[str], str | None] = functools.lru_cache(maxsize=TARGETS_KEPT)(self._target)
        self.within: Callable[[str], str | None] = functools.lru_cache(maxsize=TARGETS_KEPT)(self._within)

    # --- tlindex.pages.Files: where a page of the report goes ------------------------------------

    def run_dir(self, run: int) -> str:
        return "" if self.single else f"run-{run}/"

    @staticmethod
    def top(name: str) -> str | None:
        return name

    def of_run(self, run: int, name: str) -> str | None:
        return f"{self.run_dir(run)}{name}" if run in self.runs else None

    def of_compile(self, compile: int, name: str) -> str | None:
        run = self.compile_runs.get(compile)
        return None if run not in self.runs else f"{self.run_dir(run)}{name}"

    def of_piece(self, piece: int, name: str) -> str | None:
        compile = self.piece_compiles.get(piece)
        return None if compile is None else self.of_compile(compile, name.format(compile=compile, piece=piece))

    def of_artifact(self, artifact: int, name: str) -> str | None:
        run = self.artifact_runs.get(artifact)
        return None if run not in self.runs else f"{self.run_dir(run)}{name}"

    def of_runs(self, args: Args, name: str) -> str | None:
        """A page over runs (?run=N…): in the folder of its one run, or at the top over the report's runs; a page
        over other runs, or over the database's every run, is not the report's."""
        if set(key for key, _ in args.pairs) - {"run"}:
            return None
        named = sorted({int(value) for value in args.getlist("run") if value.isdigit()})
        if len(named) == 1 and named[0] in self.runs:
            return self.of_run(named[0], name)
        return name if named == self.runs else None

    def of_rank(self, run: int, rank: int, name: str) -> str | None:
        """A file of one rank of a run of several logs, in its first log's folder (DIR/rank_<R>/, as tlparse); None
        for a rank the run lacks, and in a run of one log (its files are the run's)."""
        folder = self.rank_folders.get(run, {}).get(rank)
        return None if folder is None else f"{self.run_dir(run)}{folder}/{name}"

    def payload_page(self, artifact: int) -> str | None:
        """An artifact with a payload is shown on its payload's page (each payload once, whoever carries it)."""
        payload = self.artifact_payloads.get(artifact)
        return self.page_file("payload", hash=payload) if payload and artifact in self.artifact_runs else None

    def of_query(self, query: str, run: str | None, name: str) -> str | None:
        """A canned query's table of one of the report's runs (`?run=N`)."""
        if query not in self.queries or run is None or not run.isdigit() or int(run) not in self.runs:
            return None
        return self.of_run(int(run), name)

    # --- a page's file, by its declaration ---------------------------------------------------------

    def page_file(self, name: str, **values) -> str | None:
        """The file of the page `name` with the path's `values` (no arguments), as its declaration names it."""
        page = pages.BY_NAME[name]
        return page.file(self, values, Args())

    def text_file(self, digest: str) -> str | None:
        """A payload's raw text (its page's download)."""
        return self.page_file("payload", hash=digest, ext=pages.RAW_TEXT)

    def text_of(self, url: str) -> str | None:
        """The raw text written beside a payload's page, for its URL; None for any other URL."""
        found = self.parse(url)
        return self.text_file(found.values["hash"]) if found and found.page.name == "payload" else None

    # --- a URL of the served pages -----------------------------------------------------------------

    def parse(self, url: str) -> Found | None:
        """The page of a URL of the served pages of this database (a canned query's too), or None."""
        parts = urlsplit(url)
        if not parts.path.startswith(self.base + "/"):
            return None
        rest, args = parts.path[len(self.base):], Args(parse_qsl(parts.query))
        found = pages.match(rest)
        if found is not None:
            page, values = found
            return None if values.get("format") else Found(page, page.values(values), args)  # not a JSON twin
        query = QUERY_RE.fullmatch(rest)
        return None if query is None else Found(pages.QUERY, pages.QUERY.values(query.groupdict()), args)

    def _target(self, url: str) -> str | None:
        """The report file (relative to DIR) of a URL of the served pages, or None if the report has none
        (`target`, remembered)."""
        path = urlsplit(url).path
        if path.startswith(STATIC_PREFIXES):
            return "assets/" + posixpath.basename(path)
        try:
            found = self.parse(url)
            if found is None or found.page.file is None:  # the server's
                return None
            values = found.values
            if values.get("compile") in self.alike:  # a compile of a rank group: its group's page
                values = {**values, "compile": self.alike[values["compile"]]}
            return found.page.file(self, values, found.args)
        except Exception:  # an id past 64 bits, a value no file has: no file
            return None

    def _within(self, url: str) -> str | None:
        """The file of the compile page a page of one compile (its bytecode, its passes) is rendered with, or None."""
        try:
            found = self.parse(url)
        except Exception:
            return None
        if found is None or found.page.within != "compile":
            return None
        compile = found.values.get("compile", self.piece_compiles.get(found.values.get("piece")))
        return None if compile is None else self.page_file("compile", compile=self.alike.get(compile, compile))


QUERY_RE = re.compile(pages.QUERY.pattern)
INDEX = pages.BY_NAME["runs"].file(ReportFiles, {}, Args())  # the top of every report (the run page of one run's)


def log_folders(conn: sqlite3.Connection, run: int) -> dict[int, str]:
    """One folder name per log file of a run (tlparse's rank_<R>), never two files in one: a restarted
    rank's later process is rank_<R>_restart_<N>, processes sharing a rank add their pid, and a file
    whose name is still taken, or that has no rank, is named by its file id."""
    folders: dict[int, str] = {}
    for file_id, process, _ in report_files.log_processes(conn, run):
        name = "rank_" + re.sub(r"[^0-9A-Za-z]+", "_", process).strip("_") if process is not None else f"file_{file_id}"
        folders[file_id] = name if name not in folders.values() else f"{name}_file_{file_id}"
    return folders


def rank_folders(conn: sqlite3.Connection, run: int) -> dict[int, str]:
    """Each rank of a run with the folder of its first log (log_folders), where its trace goes; {} for a run of one
    log (its files are the run's)."""
    folders = log_folders(conn, run)
    if len(folders) < 2:
        return {}
    found: dict[int, str] = {}
    for file_id, _, rank in report_files.log_processes(conn, run):
        if rank is not None:
            found.setdefault(rank, folders[file_id])
    return found


def relative(target: str, folder: str) -> str:
    """A report file's path (`target`, relative to DIR) as seen from a folder of the report (`folder`, "" for DIR);
    both as this module makes them (no `.`, `..` or empty parts): posixpath.relpath's answer, 5x faster."""
    if not folder:
        return target
    to, here = target.split("/"), folder.split("/")
    common = 0
    while common < len(here) and common < len(to) - 1 and to[common] == here[common]:
        common += 1
    return "/".join([".."] * (len(here) - common) + to[common:])
