"""A report's pages: each URL of the served pages rendered to its file, its links made relative.

A page's data comes from its data function (tlindex.pages), its HTML from tlindex.render (the same renderer
the server uses); then each link to a page of the report is
made relative to the file that holds it and queued, and every other link (Datasette's table pages,
search, diff: they need a server) loses its href, and forms are left out. A page that cannot be rendered
degrades alone: its file says what failed.
"""

from __future__ import annotations

import html
import posixpath
import re
import sqlite3
from collections.abc import Callable
from urllib.parse import urlsplit

from tlindex import pages
from tlindex.answers.queries import canned_rows, load_queries
from tlindex.errors import NotFound, UsageError
from tlindex.pages.rows import Args
from tlindex.report.files import Found, ReportFiles, relative
from tlindex.report.output import Output

# A link or source to relink; a link within its page (`#L-12`: a payload page has one per line) stays. The space
# before it is part of the pattern: re searches for a pattern that begins with a literal ~5x faster than for one
# that begins with a set of letters (relinking was 13 % of a report's time). The templates write every attribute
# after a space; a link written otherwise would stay absolute, which tests/test_report.py's broken_links finds.
ATTRIBUTE_RE = re.compile(r' (href|src|action|data-src)="(?!#)([^"]*)"')
FORM_RE = re.compile(r"<form\b.*?</form>", re.S)  # search and diff forms: they need a server
QUERY_ROWS = 1000  # rows of a canned query's table in the report (Datasette's max_returned_rows)
EVERYTHING = str(10**9)  # the trie rendered whole: a static page cannot load the rest on demand
RELINKED_MEMO = 20_000  # links remembered as relinked, per process: a bound (a worker once grew with every page)


class PageWriter:
    """Renders URLs of the served pages into report files, in one process, on one connection."""

    def __init__(self, conn: sqlite3.Connection, renderer, files: ReportFiles, output: Output,
                 enqueue: Callable[[str], None], claim: Callable[[str], bool] = lambda path: True):
        self.conn, self.renderer, self.files, self.output = conn, renderer, files, output
        self.enqueue = enqueue  # told of every link to a report file met on a page
        self.claim = claim  # whether a file is still to be written (then it is this writer's): a payload's text
        self.relinked: dict[tuple[str, str], str] = {}
        self.text: bytes | None = None  # the text of the payload whose page is being written

    def write(self, url: str, path: str, owned: bool = False) -> None:
        """The file of one URL: rendered, relinked, saved (a trace streamed); a payload's page with its text (unless
        it is written already or is another's, as `claim` says; `owned`: the text is this writer's)."""
        found = self.files.parse(url)  # None: an asset
        if found is not None and found.page.kind == "json":
            self.write_chromium(found.values["run"], found.args, path)
            return
        self.text = None
        body = self.render(url, path, found)
        if body is None:
            return
        raw = found is not None and bool(found.values.get("ext"))  # a payload's text
        if found is not None and not raw and isinstance(body, str):  # a page (not the notice of one that failed: bytes,
            body = self.relink(body, path).encode("utf-8")  # whose one link, to the index, is relative already)
        self.output.save(path, body, page=found is not None and not raw, payload=raw)
        if self.text is not None:  # read once for both files
            text_path = self.files.text_file(found.values["hash"])
            if owned or self.claim(text_path):
                self.output.save(text_path, self.text, payload=True)

    def render(self, url: str, path: str, found: Found | None) -> str | bytes | None:
        """The body of one report file: an asset, a canned query's table, or a page (HTML as str, to relink);
        None when it has none."""
        if found is None:
            return self.renderer.asset(urlsplit(url).path)
        page, values, args = found
        try:
            if page is pages.QUERY:
                return self.query_page(values["query"], dict(args.pairs))
            if page.name == "trie":
                args = Args(args.pairs + [("max_nodes", EVERYTHING)])
            return self.page(page, values, args)
        except (NotFound, UsageError) as error:
            self.output.summary.warnings.append(f"{url}: {error}")
            return None
        except Exception as error:  # one page that cannot be rendered degrades alone
            return self.output.degraded(path, f"{url}: {type(error).__name__}: {error}")

    def page(self, page: pages.Page, values: dict, args: Args) -> str | bytes:
        data = page.read(self.conn, args, **values)
        if page.name == "payload":
            text = (data["payload"]["text"] or "").encode("utf-8")
            if data["raw"]:  # a payload's text
                return text
            self.text = text  # written beside its page
        return self.renderer.page(page, data, args)

    def query_page(self, name: str, params: dict[str, str]) -> str:
        """A canned query's result as a table (the first QUERY_ROWS rows), its cells linked as in Datasette."""
        query = load_queries()[name]
        columns, rows = canned_rows(self.conn, name, params, QUERY_ROWS + 1)
        return self.renderer.query(query, params, columns, rows[:QUERY_ROWS], len(rows) > QUERY_ROWS, QUERY_ROWS)

    def write_chromium(self, run: int, args: Args, path: str) -> None:
        """A Perfetto trace of the run (the whole run, a rank's, its overview, as `args` say), streamed batch by
        batch to its file (a run's can be hundreds of MB)."""
        from tlindex.formats.chromium import trace_chunks

        data = pages.BY_NAME["chromium"].read(self.conn, args, run=run)
        self.output.stream(path, trace_chunks(self.conn, run, data["ranks"], data["overview"]))

    def relink(self, page: str, path: str) -> str:
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
            target = self.files.target(url) if url.startswith("/") else None
            if target is None or attribute == "data-src":
                return " "  # needs a server: no link
            self.enqueue(url)
            link = relative(target, here)
            return f' {attribute}="{html.escape(link + ("#" + fragment if fragment else ""))}"'

        def outside(part: str) -> str:
            return ATTRIBUTE_RE.sub(replace, FORM_RE.sub("", part) if "<form" in part else part)

        parts, at = [], 0
        while (block := self.unlinked(page, at)) is not None:
            start, end = block
            parts += [outside(page[at:start]), page[start:end]]  # a payload's text, a config: no link, no form
            at = end
        return "".join(parts + [outside(page[at:])])

    def unlinked(self, page: str, at: int) -> tuple[int, int] | None:
        """The next block from `at` that holds no link (the renderer's `unlinked` marks: escaped text between
        them, so the first end mark after a start ends it), or None."""
        found = None
        for start_mark, end_mark in self.renderer.unlinked:
            start = page.find(start_mark, at)
            if start >= 0 and (found is None or start < found[0]) and (end := page.find(end_mark, start)) >= 0:
                found = (start, end)
        return found


def seeds(urls, runs: list[int], single: bool) -> list[str]:
    """Where the crawl starts: the run pages (and the runs page), the failures lists."""
    found = [urls.run(run) for run in runs]
    if not single:
        found.insert(0, urls.runs(runs))
    return found + [urls.query("failures", run=run) for run in runs]
