"""Chromium events: B and E events of one process paired into spans (the one stateful pairing).

A process's open spans (begun, not yet ended) are its state across records. The
three places that state lives are here, together: the handler that pairs events
as they stream by, the restore for a grown log (spans still open when it was last
read), and the fitting of a chunk of a split file (its end events close spans
begun in the chunks before it).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import orjson

from tlindex.ingest.normalize.protocols import Normalizer
from tlindex.ingest.staging import insert_rows, next_staging_id

if TYPE_CHECKING:
    from tlindex.ingest.normalize.state import Process


FRAME_SPAN = "entire_frame_compile"  # the span of Dynamo's whole compile of a frame (convert_frame's compile_inner)
WARM_SPAN = "precompile_load_guards"  # a warm start loading a compile's guards from torch's caches (caching precompile)
# The spans torch opens as it begins a frame's compile, before its dynamo_start: "dynamo", then FRAME_SPAN.
OPENING_SPANS = frozenset({"dynamo", FRAME_SPAN})


def opens_a_compile(payload: bytes) -> bool:
    """Whether a chromium_event payload begins one of the OPENING_SPANS (read only for the records of a compile
    already finished: after torch._dynamo.reset(), the next compile of the id begins so, before its dynamo_start)."""
    if b'"B"' not in payload:
        return False
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return isinstance(event, dict) and event.get("ph") == "B" and event.get("name") in OPENING_SPANS


def on_chromium_event(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if text is None:
        return
    try:
        event = orjson.loads(text)
    except orjson.JSONDecodeError:
        return  # the envelope and its payload are stored; nothing to pair
    if not isinstance(event, dict):
        return
    name = str(event.get("name"))
    phase = event.get("ph")
    ts = event.get("ts")
    compile_id = compile.id if compile else None
    if phase == "B":
        # A span begun outside any compile id takes its end's compile, if that has one. So does one
        # begun under an id whose compile already finished: torch._dynamo.reset() made the id name
        # a new compile, which its dynamo_start (still to come) opens and the end event belongs to.
        opened_in = compile_id if compile is not None and not compile.anonymous and not compile.finished else None
        proc.open_spans.setdefault(name, []).append((envelope_id, opened_in, ts, event.get("cat")))
        return
    if phase == "E":
        if name == FRAME_SPAN and compile is not None:
            compile.returned = True  # Dynamo returned from compiling the frame (tlindex.ingest.normalize.state)
        elif name == WARM_SPAN and compile is not None:
            compile.loaded = True
        span = close_span(proc, name, ts, compile_id)
        if span is not None:
            begin_id, span_compile, cat, begin_ts, duration = span
            n.sink.add("chromium_events", (n.next_id("chromium_events"), proc.source_id, span_compile, name, cat,
                                           "X", begin_ts, duration, begin_id, envelope_id))
            return
    n.sink.add("chromium_events", (n.next_id("chromium_events"), proc.source_id, compile_id, name,
                                   event.get("cat"), str(phase), ts, None,
                                   envelope_id if phase != "E" else None, envelope_id if phase == "E" else None))


def close_span(proc: "Process", name: str, ts, end_compile: int | None) -> tuple | None:
    """Pair an end event with the latest open span of its name: (begin envelope, compile, cat, ts, duration)."""
    opened = proc.open_spans.get(name)
    if not opened:
        return None
    begin_id, begin_compile, begin_ts, cat = opened.pop()
    numeric = isinstance(ts, (int, float)) and isinstance(begin_ts, (int, float))
    return (begin_id, begin_compile if begin_compile is not None else end_compile, cat, begin_ts,
            ts - begin_ts if numeric else None)


def restore_open_spans(conn: sqlite3.Connection, proc: "Process", source_id: int) -> None:
    """Spans still open when a grown log was last read: their end events are in the continuation."""
    for name, begin, compile_id, ts, cat in conn.execute(
            "SELECT name, begin_envelope, compile, ts_us, cat FROM chromium_events "
            "WHERE source_id = ? AND ph = 'B' ORDER BY id", (source_id,)).fetchall():
        proc.open_spans.setdefault(name, []).append((-begin, -compile_id if compile_id else None, ts, cat))


def close_spans_of_chunk(conn: sqlite3.Connection, proc: Process) -> None:
    """End events of the chunk close spans begun before it; spans still open are written again."""
    ends = conn.execute("SELECT id, name, ts_us, compile FROM staging.chromium_events WHERE source_id = ? "
                        "AND ph = 'E' AND begin_envelope IS NULL ORDER BY id", (proc.source_id,)).fetchall()
    for event_id, name, ts, compile_id in ends:
        span = close_span(proc, name, ts, compile_id)
        if span is None:
            continue
        begin_id, span_compile, cat, begin_ts, duration = span
        conn.execute("UPDATE staging.chromium_events SET ph = 'X', compile = ?, cat = ?, ts_us = ?, "
                     "duration_us = ?, begin_envelope = ? WHERE id = ?",
                     (span_compile, cat, begin_ts, duration, begin_id, event_id))
    # The merge drops the file's open spans from the main database (as for a grown
    # log): write the earlier ones still open, then the chunk's, in that order.
    still_open = conn.execute("SELECT name, begin_envelope, compile, ts_us, cat FROM staging.chromium_events "
                              "WHERE source_id = ? AND ph = 'B' ORDER BY id", (proc.source_id,)).fetchall()
    conn.execute("DELETE FROM staging.chromium_events WHERE source_id = ? AND ph = 'B'", (proc.source_id,))
    spans = [(name, *span) for name, opened in proc.open_spans.items() for span in opened]
    spans += still_open
    next_id = next_staging_id(conn, "chromium_events")
    insert_rows(conn, "chromium_events", [(next_id + i, proc.source_id, compile_id, name, cat, "B", ts, None, begin, None)
                                      for i, (name, begin, compile_id, ts, cat) in enumerate(spans)])
