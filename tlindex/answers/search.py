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

MIN_CHARS = 3          # shorter terms match too much to be worth a search
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

# (index, content table, SQL of the matched rows {rowids}: run, compile, compile_id, text to show, page id, rowid;
# the page's page in tlindex.pages, or None for a Datasette row page)
ROW_SOURCES = [
    ("compiles_fts", "compiles",
     f"SELECT c.run_id, c.id, c.compile_id, {COMPILE_TEXT}, c.id, c.rowid FROM compiles c "
     "WHERE c.rowid IN ({rowids})", "compile"),
    ("failed_guards_fts", "failed_guards",
     "SELECT c.run_id, c.id, c.compile_id, r.reason, c.id, r.rowid FROM failed_guards r "
     "JOIN compiles c ON c.id = r.compile WHERE r.rowid IN ({rowids})", "compile"),
    ("graph_break_events_fts", "graph_break_events",
     f"SELECT c.run_id, c.id, c.compile_id, {BREAK_TEXT}, c.id, g.rowid "
     "FROM graph_break_events g JOIN compiles c ON c.id = g.compile WHERE g.rowid IN ({rowids})", "compile"),
    ("guards_fts", "guards",
     f"SELECT c.run_id, c.id, c.compile_id, {GUARD_TEXT}, c.id, g.rowid "
     "FROM guards g JOIN compiles c ON c.id = g.compile WHERE g.rowid IN ({rowids})", "compile"),
    ("artifacts_fts", "artifacts",
     "SELECT c.run_id, c.id, c.compile_id, a.name, a.id, a.rowid FROM artifacts a "
     "LEFT JOIN compiles c ON c.id = a.compile WHERE a.rowid IN ({rowids})", "artifact"),
    ("ingest_errors_fts", "ingest_errors",
     f"SELECT s.run_id, NULL, NULL, {ERROR_TEXT}, e.id, e.rowid "
     "FROM ingest_errors e LEFT JOIN sources s ON s.id = e.source_id WHERE e.rowid IN ({rowids})", None),
]


def search(conn: sqlite3.Connection, term: str, run: int | None = None, limit: int = 200,
           scan_seconds: float = 0, notes: list[str] | None = None, more: list[int] | None = None) -> list[Hit]:
    """The places `term` occurs, best first (up to `limit` per table: by relevance, or the newest when more than
    RANKED_UP_TO match; of a payload, its newest PER_PAYLOAD artifacts), grouped by run and compile, biggest groups
    first; `more`, when given, is told how many other places match (at least). Of one run, only its rows are read.

    Without the payload index, `scan_seconds` > 0 searches the payload text by reading it, for at most
    that long (a served page on a database nobody indexed yet); `notes` is told when time ran out."""
    register(conn)  # payload hits read the payloads view
    term = without_attempt(term.strip()) if ATTEMPT_RE.match(term.strip()) else term  # [0/1_2]: its compile
    match = phrase(term)
    hits: list[Hit] = []
    left = 0
    for index, table, sql, route in ROW_SOURCES:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (index,)).fetchone():
            continue
        try:  # of every run: the best `limit` (and a count of the rest); of one run: its own matches, newest first
            if run is None:
                matched = conn.execute(f"SELECT count(*) FROM {index} WHERE {index} MATCH ?", (match,)).fetchone()[0]
                order = "rank" if matched <= RANKED_UP_TO else "rowid DESC"  # ranking them all would cost more
                ranked_rowids = [r[0] for r in conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? "
                                                            f"ORDER BY {order} LIMIT ?", (match, limit + 1))]
            else:
                ranked_rowids = [r[5] for r in conn.execute(
                    sql.format(rowids=f"SELECT rowid FROM {index} WHERE {index} MATCH ?") + f" AND {RUN_OF[table]} = ?"
                    f" ORDER BY 6 DESC LIMIT ?", (match, run, limit + 1))]
                matched = len(ranked_rowids)
        except sqlite3.OperationalError as error:
            raise SearchError(f"cannot search for {term!r}: {error}") from None
        found, beyond = _rows(conn, sql, ranked_rowids, term, run, limit, table == "ingest_errors")
        beyond += matched - len(ranked_rowids)
        hits += [Hit(row[0], row[1], row[2], table, snippet, route, row[4], None, marked)
                 for row, snippet, marked in found]
        left += beyond
    if has_payload_index(conn):
        found, beyond = _payload_hits(conn, match, term, run, limit)
        hits += found
        left += beyond
    elif scan_seconds:
        found, complete = _payload_scan(conn, term, run, limit, scan_seconds)
        hits += found
        if not complete and notes is not None:
            notes.append(f"the payload text was read for {scan_seconds:g} s without finishing")
    if more is not None:
        more.append(left)
    return ranked(hits)


# The run of a matched row of each table, in its ROW_SOURCES statement.
RUN_OF = {"compiles": "c.run_id", "failed_guards": "c.run_id", "graph_break_events": "c.run_id", "guards": "c.run_id",
          "artifacts": "c.run_id", "ingest_errors": "s.run_id"}
BATCH = 500  # matched rows read in one statement
RANKED_UP_TO = 10_000  # matches of one index ranked by relevance; past that, the newest first
PER_PAYLOAD = 20  # artifacts listed per payload that matches (the newest): one graph shared by 3,000 runs is one hit


def _rows(conn: sqlite3.Connection, sql: str, rowids: list[int], term: str, run: int | None, limit: int,
          own_words: bool) -> tuple[list[tuple], int]:
    """The first `limit` matched rows (of `run`), best first, with their snippets; how many more match."""
    kept: list[tuple] = []
    for start in range(0, len(rowids), BATCH):
        part = rowids[start:start + BATCH]
        rows = {row[5]: row for row in conn.execute(sql.format(rowids=",".join("?" * len(part))), part)}
        for position, rowid in enumerate(part):
            row = rows.get(rowid)
            if row is None or (run is not None and row[0] != run):
                continue
            snippet, _, marked = _snippet(row[3] or "", term)
            if own_words and marked is None:
                continue  # the term is in tlindex's own words about the line, not in the line
            if len(kept) == limit:
                later = sum(1 for r in part[position:] if r in rows and (run is None or rows[r][0] == run))
                return kept, later + (len(rowids) - start - len(part) if run is None else 0)
            kept.append((row, snippet, marked))
    return kept, 0


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
    """Payloads containing the term (case-insensitive, as the index matches), found by reading
    them (no index) for at most `seconds`: (hits, whether the whole text was read). LIKE is as case-blind as
    the index (ASCII) and allocates nothing; inflating the text is the cost (about 200 MB of text a second)."""
    deadline = time.monotonic() + seconds
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 20_000)  # (a stop still interrupts it: limits.connect)
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
        conn.set_progress_handler(None, 0)  # (the stop's handler again)
    return [hit for hash_, text in found for hit in _artifact_hits(conn, hash_, text, term, run)], not stopped


def _artifact_hits(conn: sqlite3.Connection, hash_: str, text: str, term: str, run: int | None,
                   limit: int = -1) -> list[Hit]:
    """A payload containing the term, as hits: one per artifact carrying it (the newest `limit` of them), at the
    line it first occurs."""
    snippet, line, marked = _snippet(text, term)
    return [Hit(run_id, compile_row, compile_id, "payloads", snippet,
                "artifact", artifact, line, marked, f"L-{line}" if line else "")
            for artifact, compile_row, compile_id, run_id in conn.execute(
                "SELECT a.id, c.id, c.compile_id, s.run_id FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id "
                "JOIN sources s ON s.id = e.source_id LEFT JOIN compiles c ON c.id = a.compile "
                "WHERE a.payload = ? AND (? IS NULL OR s.run_id = ?) ORDER BY a.id DESC LIMIT ?",
                (hash_, run, run, limit))][::-1]


def _payload_hits(conn: sqlite3.Connection, match: str, term: str, run: int | None,
                  limit: int) -> tuple[list[Hit], int]:
    """Artifacts whose payload text contains the term, each at the line it first occurs (at most `limit` payloads,
    best first, and `limit` artifacts of each), and how many other places match (at least)."""
    hits: list[Hit] = []
    left = 0
    each = max(1, min(limit, PER_PAYLOAD))
    of_run = ("" if run is None else " AND p.hash IN (SELECT a.payload FROM sources s JOIN envelopes e ON "
              "e.source_id = s.id JOIN artifacts a ON a.envelope_id = e.id WHERE s.run_id = ?)")
    cursor = conn.execute(f"SELECT p.hash, p.text FROM {PAYLOAD_INDEX} f JOIN payloads p ON p.id = f.rowid "
                          f"WHERE {PAYLOAD_INDEX} MATCH ?{of_run} ORDER BY f.rank", (match, *([run] if of_run else [])))
    for hash_, text in cursor:
        if term.lower() not in text.lower():
            continue  # its words follow each other, but not as typed (`fused add` for `fused_add`)
        if len(hits) >= limit:
            left += 1
            break
        found = _artifact_hits(conn, hash_, text, term, run, each + 1)
        left += max(0, len(found) - each)
        hits += found[-each:]
    return hits, left


def marked_html(hit: Hit):
    """A hit's snippet as HTML: escaped, the match in <mark>."""
    from markupsafe import Markup, escape

    if hit.match is None:
        return escape(hit.snippet)
    start, end = hit.match
    text = hit.snippet
    return escape(text[:start]) + Markup("<mark>") + escape(text[start:end]) + Markup("</mark>") + escape(text[end:])
