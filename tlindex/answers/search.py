"""Search across everything ingested: compile names and files, failure, recompile and graph-break
reasons, guards, artifact names, ingest errors, and the payload text (graphs, generated code).

A term is searched as a phrase (quotes, `_`, `.`, `::` and `(` are literal), through the FTS5
indexes of tlindex.ingest.text_index. Hits carry their run and compile, a snippet with the match marked, and
the page that shows it (an artifact at the matching line: tlindex.pages.search.hit_path). They are grouped by run
and compile, the groups with the most hits first.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass

from tlindex.answers.names import ATTEMPT_RE, without_attempt
from tlindex.errors import SearchError  # noqa: F401 (raised here, imported from here by callers)
from tlindex.ingest.text_index import PAYLOAD_INDEX, has_payload_index
from tlindex.store.compression import register

MIN_CHARS = 3          # the trigram index cannot look for less
SNIPPET_CHARS = 160


@dataclass
class Hit:
    run: int | None
    compile: int | None
    compile_id: str | None
    table: str
    snippet: str
    page: str | None     # the tlindex page that shows it (named after the id it takes), None: Datasette's row page
    page_id: int         # that id (a compile, an artifact; the row's id for a row page)
    line: int | None = None
    match: tuple[int, int] | None = None  # where the term stands in the snippet
    anchor: str = ""     # where on the page: "L-40" (a payload's line)

    def as_dict(self) -> dict:
        return asdict(self)


def phrase(term: str) -> str:
    """An FTS5 phrase for the literal term."""
    term = term.strip()
    if len(term) < MIN_CHARS:
        raise SearchError(f"search for at least {MIN_CHARS} characters (got {term!r})")
    return '"' + term.replace('"', '""') + '"'


def _snippet(text: str, term: str) -> tuple[str, int | None, tuple[int, int] | None]:
    """The line of `text` where `term` first occurs (cut to a snippet), its line number, the match in it."""
    at = text.lower().find(term.lower())
    if at == -1:
        return " ".join(text.split())[:SNIPPET_CHARS], None, None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start:end if end != -1 else len(text)]
    col = at - start
    left = max(0, min(col - SNIPPET_CHARS // 3, len(line) - SNIPPET_CHARS))
    piece = line[left:left + SNIPPET_CHARS]
    col -= left
    return piece, text.count("\n", 0, at) + 1, (col, min(col + len(term), len(piece)))


def _text(*columns: str) -> str:
    """SQL joining columns that may be NULL with spaces (concat_ws needs SQLite 3.44)."""
    return "trim(" + " || ' ' || ".join(f"coalesce({c}, '')" for c in columns) + ")"


# (index, content table, SQL giving rowid-matched rows: run, compile, compile_id, text to show, path)
COMPILE_TEXT = _text("c.co_name", "c.co_filename", "c.fail_type", "c.fail_reason", "c.recompile_reason")
BREAK_TEXT = _text("g.reason", "g.user_file")
GUARD_TEXT = _text("g.text", "g.user_code", "g.source")
ERROR_TEXT = "coalesce(e.excerpt, '')"  # the line as logged (the index holds tlindex's message too)

# (index, content table, SQL of one matched row: run, compile, compile_id, text to show, page id; the page's
# page in tlindex.pages, or None for a Datasette row page)
ROW_SOURCES = [
    ("compiles_fts", "compiles",
     f"SELECT c.run_id, c.id, c.compile_id, {COMPILE_TEXT}, c.id FROM compiles c WHERE c.rowid = ?", "compile"),
    ("failed_guards_fts", "failed_guards",
     "SELECT c.run_id, c.id, c.compile_id, r.reason, c.id FROM failed_guards r "
     "JOIN compiles c ON c.id = r.compile WHERE r.rowid = ?", "compile"),
    ("graph_break_events_fts", "graph_break_events",
     f"SELECT c.run_id, c.id, c.compile_id, {BREAK_TEXT}, c.id "
     "FROM graph_break_events g JOIN compiles c ON c.id = g.compile WHERE g.rowid = ?", "compile"),
    ("guards_fts", "guards",
     f"SELECT c.run_id, c.id, c.compile_id, {GUARD_TEXT}, c.id "
     "FROM guards g JOIN compiles c ON c.id = g.compile WHERE g.rowid = ?", "compile"),
    ("artifacts_fts", "artifacts",
     "SELECT c.run_id, c.id, c.compile_id, a.name, a.id FROM artifacts a "
     "LEFT JOIN compiles c ON c.id = a.compile WHERE a.rowid = ?", "artifact"),
    ("ingest_errors_fts", "ingest_errors",
     f"SELECT s.run_id, NULL, NULL, {ERROR_TEXT}, e.id "
     "FROM ingest_errors e LEFT JOIN sources s ON s.id = e.source_id WHERE e.rowid = ?", None),
]


def search(conn: sqlite3.Connection, term: str, run: int | None = None, limit: int = 200,
           scan_seconds: float = 0, notes: list[str] | None = None) -> list[Hit]:
    """Every place `term` occurs (up to `limit` per table), grouped by run and compile, biggest groups first.

    Without the payload index, `scan_seconds` > 0 searches the payload text by reading it, for at most
    that long (a served page on a database nobody indexed yet); `notes` is told when time ran out."""
    register(conn)  # payload hits read the payloads view
    term = without_attempt(term.strip()) if ATTEMPT_RE.match(term.strip()) else term  # [0/1_2]: its compile
    match = phrase(term)
    hits: list[Hit] = []
    for index, table, sql, route in ROW_SOURCES:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (index,)).fetchone():
            continue
        try:
            rowids = [r[0] for r in conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? "
                                                 f"ORDER BY rank LIMIT ?", (match, limit))]
        except sqlite3.OperationalError as error:
            raise SearchError(f"cannot search for {term!r}: {error}") from None
        for rowid in rowids:
            row = conn.execute(sql, (rowid,)).fetchone()
            if row is None or (run is not None and row[0] != run):
                continue
            snippet, _, marked = _snippet(row[3] or "", term)
            if table == "ingest_errors" and marked is None:
                continue  # the term is in tlindex's own words about the line, not in the line
            hits.append(Hit(row[0], row[1], row[2], table, snippet, route, row[4], None, marked))
    if has_payload_index(conn):
        hits += _payload_hits(conn, match, term, run, limit)
    elif scan_seconds:
        found, complete = _payload_scan(conn, term, run, limit, scan_seconds)
        hits += found
        if not complete and notes is not None:
            notes.append(f"the payload text was read for {scan_seconds:g} s without finishing")
    return ranked(hits)


# What users look for first: a function's name, a failure or a recompile reason, then a graph break, a failed
# guard, an artifact's name, a guard, payload text. An ingest error is tlindex's note about a line: it is
# found by that line's own text (its excerpt) only, never by the words tlindex wrote about it.
TABLE_RANK = {"compiles": 0, "graph_break_events": 1, "failed_guards": 2, "artifacts": 3, "guards": 4,
              "payloads": 5, "ingest_errors": 6}


def ranked(hits: list[Hit]) -> list[Hit]:
    """Hits grouped by run and compile: groups whose best hit users look for first lead (a compile named by
    the term before one whose payload merely contains it), then the groups with most hits; within a group,
    the same order."""
    groups: dict[tuple, list[Hit]] = {}
    for hit in hits:
        groups.setdefault((hit.run, hit.compile), []).append(hit)
    for group in groups.values():
        group.sort(key=lambda hit: TABLE_RANK.get(hit.table, len(TABLE_RANK)))
    ordered = sorted(groups.values(), key=lambda group: (TABLE_RANK.get(group[0].table, len(TABLE_RANK)), -len(group),
                                                         group[0].run or 0, group[0].compile or 0))
    return [hit for group in ordered for hit in group]


def _payload_scan(conn: sqlite3.Connection, term: str, run: int | None, limit: int,
                  seconds: float) -> tuple[list[Hit], bool]:
    """Payloads containing the term (case-insensitive, as the trigram index matches), found by reading
    them (no index) for at most `seconds`: (hits, whether the whole text was read). LIKE is as case-blind as
    the index (ASCII) and allocates nothing; inflating the text is the cost (about 200 MB of text a second)."""
    deadline = time.monotonic() + seconds
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 20_000)
    found: list[tuple[str, str]] = []
    try:
        pattern = "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        cursor = conn.execute("SELECT hash, text FROM payloads WHERE text LIKE ? ESCAPE '\\' LIMIT ?", (pattern, limit))
        for row in cursor:
            found.append(row)
        stopped = False
    except sqlite3.OperationalError as error:
        if "interrupted" not in str(error):
            raise
        stopped = True
    finally:
        conn.set_progress_handler(None, 0)
    return [hit for hash_, text in found for hit in _artifact_hits(conn, hash_, text, term, run)], not stopped


def _artifact_hits(conn: sqlite3.Connection, hash_: str, text: str, term: str, run: int | None) -> list[Hit]:
    """A payload containing the term, as hits: one per artifact carrying it, at the line it first occurs."""
    snippet, line, marked = _snippet(text, term)
    return [Hit(run_id, compile_row, compile_id, "payloads", snippet,
                "artifact", artifact, line, marked, f"L-{line}" if line else "")
            for artifact, compile_row, compile_id, run_id in conn.execute(
                "SELECT a.id, c.id, c.compile_id, s.run_id FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id "
                "JOIN sources s ON s.id = e.source_id LEFT JOIN compiles c ON c.id = a.compile "
                "WHERE a.payload = ? AND (? IS NULL OR s.run_id = ?) ORDER BY a.id", (hash_, run, run))]


def _payload_hits(conn: sqlite3.Connection, match: str, term: str, run: int | None, limit: int) -> list[Hit]:
    """Artifacts whose payload text contains the term, each at the line it first occurs."""
    return [hit for hash_, text in conn.execute(
                f"SELECT p.hash, p.text FROM {PAYLOAD_INDEX} f JOIN payloads p ON p.id = f.rowid "
                f"WHERE {PAYLOAD_INDEX} MATCH ? ORDER BY f.rank LIMIT ?", (match, limit)).fetchall()
            for hit in _artifact_hits(conn, hash_, text, term, run)]


def marked_html(hit: Hit):
    """A hit's snippet as HTML: escaped, the match in <mark>."""
    from markupsafe import Markup, escape

    if hit.match is None:
        return escape(hit.snippet)
    start, end = hit.match
    text = hit.snippet
    return escape(text[:start]) + Markup("<mark>") + escape(text[start:end]) + Markup("</mark>") + escape(text[end:])
