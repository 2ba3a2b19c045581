"""A graph's way through the passes: the graph snapshots a compile (or one vLLM piece compile) logged, in order.

A compile logs its graph after Dynamo (`dynamo_output_graph`), before and after pre-grad passes, the
joint graph before and after its passes, AOT's forward/backward/inference graphs, the graph before and
after post-grad passes, vLLM's graph after each of its custom passes (`graph_dump
vllm_post_grad.<i>.<Pass>`), and ends with Inductor's output code. Each snapshot is shown against the
one before it, so a user sees what each pass changed.

Snapshots are grouped into ways: one per Inductor compile (an output code ends a way; a training
step's backward starts the next) and never across a Dynamo restart (attempt). A vLLM piece compile
is its own segment: the records between its `vllm_piecewise_compile_start` and the next one
(`piece_compile_spans`); the compile's page shows what was logged outside every piece.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from tlindex.store.kinds import NOT_SNAPSHOT_PREFIX, OUTPUT_CODE, SNAPSHOT_ARTIFACTS, SNAPSHOT_KINDS

MAX_COMPARED_BYTES = 2_000_000  # a snapshot larger than this is linked, not compared on the page


@dataclass
class Step:
    """One snapshot of a way, and the snapshot before it (None for the first)."""

    artifact: int
    kind: str
    name: str
    payload: str | None
    size: int
    attempt: int | None
    before: int | None = None        # the artifact before it in the way
    before_name: str | None = None
    before_payload: str | None = None
    compared: bool = False            # whether the page shows it against the one before (both small enough)

    @property
    def is_output_code(self) -> bool:
        return self.kind == OUTPUT_CODE

    def follow(self, previous: Step) -> Step:
        self.before, self.before_name, self.before_payload = previous.artifact, previous.name, previous.payload
        self.compared = (not self.is_output_code and self.payload is not None and previous.payload is not None
                         and max(self.size, previous.size) <= MAX_COMPARED_BYTES)
        return self


@dataclass
class Segment:
    """A compile's records outside every piece compile, or one piece compile's."""

    compile: dict
    piece: dict | None
    pieces: list[dict] = field(default_factory=list)  # the compile's piece compiles (to link to)
    ways: list[list[Step]] = field(default_factory=list)


def _is_snapshot(kind: str, name: str) -> bool:
    if kind == "artifact":
        return name in SNAPSHOT_ARTIFACTS
    return kind in SNAPSHOT_KINDS and not (kind == "graph_dump" and name.startswith(NOT_SNAPSHOT_PREFIX))


def _pieces(conn: sqlite3.Connection, compile_row: int) -> list[dict]:
    columns = ("id", "envelope_id", "end_envelope", "source_id", "piecewise_index", "submod_name",
               "compile_range_start", "compile_range_end", "is_single_size", "is_cudagraph_capture_size",
               "compile_call", "attempt", "abandoned")
    rows = conn.execute(f"SELECT {', '.join(columns)} FROM piece_compile_spans WHERE compile = ? ORDER BY envelope_id",
                        (compile_row,)).fetchall()
    return [dict(zip(columns, row)) for row in rows]


def segment(conn: sqlite3.Connection, compile_row: int | None = None, piece: int | None = None) -> Segment | None:
    """The way(s) through the passes of a compile (outside its pieces) or of one piece compile; None if unknown."""
    if piece is not None:
        found = conn.execute("SELECT compile FROM piece_compiles WHERE id = ?", (piece,)).fetchone()
        if found is None or found[0] is None:
            return None
        compile_row = found[0]
    row = conn.execute("SELECT id, compile_id, co_name, run_id, rank, status FROM compiles WHERE id = ?",
                       (compile_row,)).fetchone()
    if row is None:
        return None
    compile = dict(zip(("id", "compile_id", "co_name", "run_id", "rank", "status"), row))
    pieces = _pieces(conn, compile_row)
    chosen = next((p for p in pieces if p["id"] == piece), None)
    if piece is not None and chosen is None:
        return None

    def piece_of(envelope: int, source: int) -> int | None:
        for p in pieces:  # pieces are few per compile (dozens): a scan is enough
            if p["source_id"] == source and p["envelope_id"] < envelope < p["end_envelope"]:
                return p["id"]
        return None

    result = Segment(compile, chosen, pieces)
    way: list[Step] = []
    last_attempt: object = object()
    for artifact, kind, name, payload, size, attempt, envelope, source in conn.execute("""
            SELECT a.id, a.kind, a.name, a.payload, a.size, e.attempt, e.id, e.source_id
            FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id WHERE a.compile = ? ORDER BY a.id""",
                                                                                      (compile_row,)):
        if kind != OUTPUT_CODE and not _is_snapshot(kind, name):
            continue
        if piece_of(envelope, source) != piece:
            continue
        if way and (attempt != last_attempt or way[-1].is_output_code):
            result.ways.append(way)
            way = []
        last_attempt = attempt
        step = Step(artifact, kind, name, payload, size, attempt)
        way.append(step.follow(way[-1]) if way else step)
    if way:
        result.ways.append(way)
    return result


def snapshot_counts(conn: sqlite3.Connection, compile_row: int) -> int:
    """How many graph snapshots a compile logged (pieces included): whether its page links to the passes."""
    names = ",".join(f"'{name}'" for name in SNAPSHOT_ARTIFACTS)
    kinds = ",".join(f"'{kind}'" for kind in SNAPSHOT_KINDS if kind != "artifact")
    return conn.execute(f"""SELECT count(*) FROM artifacts WHERE compile = ? AND
            ((kind = 'artifact' AND name IN ({names})) OR (kind IN ({kinds})
             AND NOT (kind = 'graph_dump' AND substr(name, 1, {len(NOT_SNAPSHOT_PREFIX)}) = '{NOT_SNAPSHOT_PREFIX}')))""",
                        (compile_row,)).fetchone()[0]
