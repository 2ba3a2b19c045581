"""A run's chromium events as one Chrome trace (Perfetto, chrome://tracing): one process per rank.

torch writes its `dynamo_timed` spans as chromium events with pid 0 on every
rank; tlparse concatenates them per rank with the rank as pid. Here the spans
come from `chromium_events` (begin and end already paired), their args are
the begin and end events' args merged, and events stream out in batches so a
run of any size is written in flat memory.
"""

from __future__ import annotations

import sqlite3
from typing import Iterator

import orjson

BATCH = 1000  # events per query and per piece written: a 1 GB log's events average 2.5 KB (5,000 held 150 MB)
EVENTS_SQL = """
    SELECT c.id, c.source_id, c.name, c.cat, c.ph, c.ts_us, c.duration_us, k.compile_id,
           b.text AS begin_text, x.text AS end_text
    FROM chromium_events c
    LEFT JOIN compiles k ON k.id = c.compile
    LEFT JOIN envelopes be ON be.id = c.begin_envelope LEFT JOIN payloads b ON b.hash = be.payload
    LEFT JOIN envelopes ee ON ee.id = c.end_envelope LEFT JOIN payloads x ON x.hash = ee.payload
    WHERE +c.source_id IN (SELECT id FROM sources WHERE run_id = ?) AND c.id > ? ORDER BY c.id LIMIT ?"""
# A batch walks the events in id order from `after`: `+` keeps SQLite off the per-source index, through which
# every batch joined and sorted all the run's later events again (a 1 GB log's 144k events: 15 s, now 5.6 s).


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


def metadata_events(pids: dict[int, tuple[int, str]]) -> list[dict]:
    """A process_name and a sort index per process, ranks in order."""
    events = []
    for sort_index, (pid, name) in enumerate(sorted(set(pids.values()))):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"sort_index": sort_index}})
    return events


def event_batch(conn: sqlite3.Connection, run_id: int, pids: dict[int, tuple[int, str]],
                after: int = 0) -> tuple[list[dict], int | None]:
    """Up to BATCH events of a run with chromium_events.id > after, and the last id (None: no more)."""
    rows = conn.execute(EVENTS_SQL, (run_id, after, BATCH)).fetchall()
    events = []
    for row_id, source, name, cat, ph, ts_us, duration_us, compile_id, begin_text, end_text in rows:
        begin, end = _event(begin_text), _event(end_text)
        args = {**(begin.get("args") or {}), **(end.get("args") or {})}
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
    return events, rows[-1][0] if rows else None


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
    """The pieces of one run's trace JSON ({"traceEvents": [...]}) as its batches of events come: for
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


def trace_chunks(conn: sqlite3.Connection, run_id: int) -> Iterator[bytes]:
    """The whole trace of a run as JSON ({"traceEvents": [...]}), in pieces of about BATCH events."""
    pids = process_ids(conn, run_id)
    encoder = TraceEncoder(pids)
    yield encoder.head()
    after = 0
    while after is not None:
        events, after = event_batch(conn, run_id, pids, after)
        yield encoder.batch(events)
    yield encoder.tail
