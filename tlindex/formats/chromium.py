"""A run's chromium events as Chrome traces (Perfetto, chrome://tracing): one process per rank.

torch writes its `dynamo_timed` spans as chromium events with pid 0 on every
rank; tlparse concatenates them per rank with the rank as pid. Here the spans
come from `chromium_events` (begin and end already paired), their args are
the begin and end events' args merged, and events stream out in batches so a
run of any size is written in flat memory. A trace holds the whole run, some of
its ranks, or its overview: each process's outermost spans (its compiles, its
backward compiles, its collections) with their short args, which a trace viewer
opens for a run of hundreds of ranks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Iterator

import orjson

BATCH = 1000  # events per query and per piece written: a 1 GB log's events average 2.5 KB (5,000 held 150 MB)
EVENT_COLUMNS = """
    SELECT c.id, c.source_id, c.name, c.cat, c.ph, c.ts_us, c.duration_us, k.compile_id,
           b.text AS begin_text, x.text AS end_text
    FROM chromium_events c
    LEFT JOIN compiles k ON k.id = c.compile
    LEFT JOIN envelopes be ON be.id = c.begin_envelope LEFT JOIN payloads b ON b.hash = be.payload
    LEFT JOIN envelopes ee ON ee.id = c.end_envelope LEFT JOIN payloads x ON x.hash = ee.payload"""
EVENTS_SQL = EVENT_COLUMNS + " WHERE c.source_id = ? AND c.id > ? ORDER BY c.id LIMIT ?"
# A batch walks one process's events in id order from `after`, through the per-source index (whose entries are in
# id order within a source: no sort), so a trace costs what its processes' events cost, whatever else the database
# holds (the run's events walked by id across every run's cost 0.08 s at 10 runs, 0.39 s at 3,000).
SPANS_SQL = """SELECT id, ph, ts_us, duration_us FROM chromium_events WHERE source_id = ? AND ph IN ('X', 'B')
               ORDER BY ts_us, duration_us DESC"""


def _event(text: str | None) -> dict:
    try:
        event = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return event if isinstance(event, dict) else {}


def process_ids(conn: sqlite3.Connection, run_id: int) -> dict[int, tuple[int, str]]:
    """{source id: (trace pid, process name)}: the rank when every process has its own, else the OS pid."""
    sources = conn.execute("SELECT id, rank, pid FROM sources WHERE run_id = ? ORDER BY rank, pid",
                           (run_id,)).fetchall()
    ranks = [rank for _, rank, _ in sources]
    by_rank = None not in ranks and len(set(ranks)) == len(ranks)
    return {source: (rank if by_rank else pid,
                     f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}")
            for source, rank, pid in sources}


def trace_sources(conn: sqlite3.Connection, run_id: int, ranks: Iterable[int] | None = None) -> list[int]:
    """The run's processes in a trace (of `ranks` only, when given), in rank order."""
    rows = conn.execute("SELECT id, rank FROM sources WHERE run_id = ? ORDER BY rank, pid, id", (run_id,)).fetchall()
    wanted = None if ranks is None else set(ranks)
    return [source for source, rank in rows if wanted is None or rank in wanted]


def metadata_events(pids: dict[int, tuple[int, str]]) -> list[dict]:
    """A process_name and a sort index per process, ranks in order."""
    events = []
    for sort_index, (pid, name) in enumerate(sorted(set(pids.values()))):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"sort_index": sort_index}})
    return events


def outermost(conn: sqlite3.Connection, source: int) -> list[int]:
    """The ids of a process's spans that no other of its spans holds (by time), and of its open ones."""
    found, end = [], float("-inf")
    for row_id, ph, ts_us, duration_us in conn.execute(SPANS_SQL, (source,)):
        if ts_us is None or ts_us < end:
            continue  # within the span before it
        found.append(row_id)
        if ph == "X" and duration_us is not None:
            end = ts_us + duration_us
    return found


def _brief(args: dict) -> dict:
    """An overview's args: the short values (the compile id, the function, counts), not the configs and reasons a
    compile's span ends with (5 KB a compile)."""
    return {key: value for key, value in args.items()
            if value is None or isinstance(value, (int, float, bool)) or isinstance(value, str) and len(value) <= 160}


def _as_events(rows: list[tuple], pids: dict[int, tuple[int, str]], brief: bool = False) -> list[dict]:
    events = []
    for _, source, name, cat, ph, ts_us, duration_us, compile_id, begin_text, end_text in rows:
        begin, end = _event(begin_text), _event(end_text)
        args = {**(begin.get("args") or {}), **(end.get("args") or {})}
        if brief:
            args = _brief(args)
        if compile_id is not None:
            args.setdefault("compile_id", compile_id)
        tid = begin.get("tid", 0)
        event = {"name": name, "cat": cat, "ph": ph, "ts": ts_us, "pid": pids[source][0],
                 "tid": tid if isinstance(tid, int) else 0, "args": args}
        if ph == "X":
            event["dur"] = duration_us
        elif ph == "i":
            event["s"] = begin.get("s", "p")
        events.append(event)
    return events


class TraceReader:
    """The events of a trace, a batch per call (`batch(conn)`, None when there are no more): the processes'
    events in turn, or (`overview`) only their outermost spans. It holds no cursor between calls, so the server
    reads each batch in a call of its own on a connection it shares."""

    def __init__(self, sources: list[int], pids: dict[int, tuple[int, str]], overview: bool = False):
        self.sources, self.pids, self.overview = list(sources), pids, overview
        self.at, self.after = 0, 0  # the process being read, and the last event id read of it
        self.ids: list[int] | None = None  # the overview's ids of the process being read

    def batch(self, conn: sqlite3.Connection) -> list[dict] | None:
        while self.at < len(self.sources):
            source = self.sources[self.at]
            if self.overview:
                rows = self._overview_rows(conn, source)
            else:
                rows = conn.execute(EVENTS_SQL, (source, self.after, BATCH)).fetchall()
                self.after = rows[-1][0] if len(rows) == BATCH else None
            if self.after is None:
                self.at, self.after = self.at + 1, 0
            if rows:
                return _as_events(rows, self.pids, brief=self.overview)
        return None

    def _overview_rows(self, conn: sqlite3.Connection, source: int) -> list[tuple]:
        if self.ids is None:
            self.ids = outermost(conn, source)
        ids, self.ids = self.ids[:BATCH], self.ids[BATCH:]
        self.after = 0 if self.ids else None
        if not self.ids:
            self.ids = None
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return conn.execute(f"{EVENT_COLUMNS} WHERE c.id IN ({marks}) ORDER BY c.id", ids).fetchall()


# What every trace tlindex writes begins with: Perfetto and chrome://tracing keep `otherData` as the trace's
# metadata, and `tlindex export chromium` knows a file of its own by it (tlindex.owned.check_file).
HEAD = b'{"otherData": {"writer": "tlindex"}, "traceEvents": [\n'
TAIL = b'\n], "displayTimeUnit": "ms"}\n'


def encode(events: list[dict], first: bool) -> bytes:
    """Events as the comma-separated inside of the traceEvents array (first: no leading comma)."""
    if not events:
        return b""
    return (b"" if first else b",\n") + b",\n".join(orjson.dumps(e, default=str) for e in events)


class TraceEncoder:
    """The pieces of one trace's JSON ({"traceEvents": [...]}) as its batches of events come: for
    the CLI, the report (one connection) and the served page (a batch per database call) alike."""

    def __init__(self, pids: dict):
        self.pids = pids
        self.written = bool(pids)  # the metadata events come first when there are processes

    def head(self) -> bytes:
        return HEAD + encode(metadata_events(self.pids), first=True)

    def batch(self, events: list[dict]) -> bytes:
        piece = encode(events, first=not self.written)
        self.written = self.written or bool(events)
        return piece

    tail = TAIL


def trace_parts(conn: sqlite3.Connection, run_id: int, ranks: Iterable[int] | None = None,
                overview: bool = False) -> tuple[TraceEncoder, TraceReader]:
    """A trace of the run (of `ranks` only, or its overview): its encoder and its reader."""
    pids = process_ids(conn, run_id)
    sources = trace_sources(conn, run_id, ranks)
    return TraceEncoder({source: pids[source] for source in sources}), TraceReader(sources, pids, overview)


def trace_chunks(conn: sqlite3.Connection, run_id: int, ranks: Iterable[int] | None = None,
                 overview: bool = False) -> Iterator[bytes]:
    """A whole trace of the run (of `ranks` only, or its overview) as JSON ({"traceEvents": [...]}), in pieces of
    about BATCH events."""
    encoder, reader = trace_parts(conn, run_id, ranks, overview)
    yield encoder.head()
    while (events := reader.batch(conn)) is not None:
        yield encoder.batch(events)
    yield encoder.tail
