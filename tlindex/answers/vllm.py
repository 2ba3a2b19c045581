"""A vLLM run's piecewise compilation: its compile calls, their configs, and their pieces by range.

vLLM's backend logs its compilation config (one per compile call: a process may compile several
models), the split graph, and before each piece compile a `vllm_piecewise_compile_start` record
(normalized into `piece_compiles`). When Dynamo restarts its analysis after the backend has started,
the call made in the dropped attempt is abandoned: its pieces were cut short and never used, so they
are shown as started, and counted in no total. The rows come from the canned query `vllm_pieces`, so SQL and the
page say the same. Pieces are grouped by range as tlparse's vLLM summary does: the dynamic range
first, then each size.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

import orjson

from tlindex.answers.queries import load_queries, run_sql
from tlindex.store.kinds import VLLM_CONFIG, VLLM_SPLIT_GRAPH

MAX_CONFIG_BYTES = 1_000_000  # a config larger than this is linked, not parsed


@dataclass
class Range:
    start: int | None
    end: int | None
    single: bool
    cudagraph: bool
    pieces: list[dict] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.single:
            return f"size {self.start}" + (" (CUDA graph)" if self.cudagraph else "")
        return f"range {self.start}–{self.end}"

    @property
    def compiled(self) -> list[dict]:
        """Its pieces but those an abandoned attempt cut short (they were never used)."""
        return [p for p in self.pieces if not p["abandoned"]]

    @property
    def seconds(self) -> float:
        return round(sum(p["compile_time_s"] or 0 for p in self.compiled), 3)

    @property
    def misses(self) -> int:
        return sum(1 for p in self.compiled if "miss" in (p["cache"] or ""))


@dataclass
class CompileCall:
    number: int                       # 1 for the process's first config
    source_id: int | None
    rank: int | None
    config_artifact: int | None
    config: dict | None               # None when the payload is not a JSON object (or too large)
    split_graph: int | None           # artifact id of vllm_piecewise_split_graph
    compiles: list[tuple[int, str]] = field(default_factory=list)  # (compile row, compile id)
    ranges: list[Range] = field(default_factory=list)
    own: dict = field(default_factory=dict)  # the settings where it differs from the other calls
    attempt: int | None = None        # Dynamo's attempt of its compile the call was made in (0 first)
    attempts: int | None = None       # how many attempts that compile made
    abandoned: str | None = None      # why Dynamo restarted its analysis and dropped this call ("" unknown)

    @property
    def pieces(self) -> int:
        """Piece compiles it completed (an abandoned call's were cut short: none count)."""
        return sum(len(r.compiled) for r in self.ranges)

    @property
    def started(self) -> int:
        return sum(len(r.pieces) for r in self.ranges)


def has_vllm(conn: sqlite3.Connection, run_id: int) -> bool:
    """Whether a run logged vLLM records (its config, piece compiles, or only its passes' graph dumps)."""
    return conn.execute("""
        SELECT 1 FROM sources s CROSS JOIN envelopes e  -- its processes' configs (envelopes_source_kind), not every run's
        WHERE s.run_id = ? AND e.source_id = s.id AND e.kind = 'artifact' AND e.name = ? LIMIT 1""",
                        (run_id, VLLM_CONFIG)).fetchone() is not None \
        or conn.execute("""SELECT 1 FROM piece_compiles p JOIN compiles c ON c.id = p.compile
                           WHERE c.run_id = ? LIMIT 1""", (run_id,)).fetchone() is not None \
        or bool(pass_compiles(conn, run_id))


def pass_compiles(conn: sqlite3.Connection, run_id: int) -> list[tuple[int, str, int]]:
    """The compiles in which vLLM's own passes dumped graphs (`vllm_post_grad.<i>.<Pass>`): (compile row,
    compile id, graph dumps), for a run that logged passes and no piece compile."""
    return conn.execute("""
        SELECT c.id, c.compile_id, count(*) FROM sources s CROSS JOIN envelopes e JOIN compiles c ON c.id = e.compile
        WHERE s.run_id = ? AND e.source_id = s.id AND e.kind = 'graph_dump' AND e.name >= 'vllm_post_grad.'
        AND e.name < 'vllm_post_grad/' GROUP BY c.id ORDER BY c.id""", (run_id,)).fetchall()


def _config(text: str | None, size: int) -> dict | None:
    if text is None or size > MAX_CONFIG_BYTES:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _restart_reason(restart_reasons: str | None, attempt: int) -> str:
    """Why Dynamo restarted after `attempt` (its compile's restart_reasons, one per restart), or ""."""
    try:
        reasons = orjson.loads(restart_reasons or "[]")
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(reasons, list) or not reasons:
        return ""
    reason = reasons[min(attempt, len(reasons) - 1)]
    text = str(reason)
    return text.removeprefix("<class '").removesuffix("'>").rsplit(".", 1)[-1] if text.startswith("<class") else text


def compile_calls(conn: sqlite3.Connection, run_id: int) -> tuple[list[CompileCall], dict]:
    """The run's compile calls in log order (per process), and the settings all their configs share."""
    calls: dict[tuple[int, int], CompileCall] = {}
    for source, rank, artifact, text, size, compile_row, compile_id, attempt, attempts, restarts in conn.execute("""
            SELECT e.source_id, s.rank, a.id, p.text, a.size, c.id, c.compile_id, e.attempt, c.attempts,
                   c.restart_reasons FROM artifacts a
            JOIN envelopes e ON e.id = a.envelope_id JOIN sources s ON s.id = e.source_id
            LEFT JOIN payloads p ON p.hash = a.payload LEFT JOIN compiles c ON c.id = e.compile
            WHERE s.run_id = ? AND a.kind = 'artifact' AND a.name = ? ORDER BY a.id""", (run_id, VLLM_CONFIG)):
        index = sum(1 for key in calls if key[0] == source) + 1
        call = calls[(source, index)] = CompileCall(index, source, rank, artifact, _config(text, size), None)
        if compile_row is not None:
            call.compiles.append((compile_row, compile_id))
            call.attempt, call.attempts = attempt or 0, attempts
            if attempts is not None and call.attempt < attempts - 1:
                call.abandoned = _restart_reason(restarts, call.attempt)
    for source, artifact, envelope in conn.execute("""
            SELECT e.source_id, a.id, e.id FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id
            JOIN sources s ON s.id = e.source_id WHERE s.run_id = ? AND a.kind = 'graph_dump' AND a.name = ?
            ORDER BY a.id""", (run_id, VLLM_SPLIT_GRAPH)):
        index = conn.execute("""SELECT count(*) FROM envelopes WHERE source_id = ? AND kind = 'artifact'
                                AND name = ? AND id < ?""", (source, VLLM_CONFIG, envelope)).fetchone()[0]
        call = calls.setdefault((source, index), CompileCall(index, source, None, None, None, None))
        call.split_graph = call.split_graph or artifact
    query = load_queries()["vllm_pieces"]
    cursor = run_sql(conn, query.sql, {"run": str(run_id)})
    columns = [d[0] for d in cursor.description]
    sources = dict(conn.execute("SELECT p.id, e.source_id FROM piece_compiles p JOIN envelopes e "
                                "ON e.id = p.envelope_id JOIN compiles c ON c.id = p.compile WHERE c.run_id = ?",
                                (run_id,)).fetchall())
    for row in cursor:
        piece = dict(zip(columns, row))
        source = sources.get(piece["piece_compile"])
        call = calls.setdefault((source, piece["compile_call"]),
                                CompileCall(piece["compile_call"], source, None, None, None, None))
        if piece["compile"] is not None and (piece["compile"], piece["compile_id"]) not in call.compiles:
            call.compiles.append((piece["compile"], piece["compile_id"]))
        key = (piece["compile_range_start"], piece["compile_range_end"], bool(piece["is_single_size"]),
               bool(piece["is_cudagraph_capture_size"]))
        found = next((r for r in call.ranges if (r.start, r.end, r.single, r.cudagraph) == key), None)
        if found is None:
            found = Range(*key)
            call.ranges.append(found)
        found.pieces.append(piece)
    ordered = sorted(calls.values(), key=lambda c: (c.source_id or 0, c.number))
    for call in ordered:  # the dynamic ranges first, then the sizes (tlparse's order)
        call.ranges.sort(key=lambda r: (r.single, r.start or 0, r.end or 0))
    configs = [c.config for c in ordered if c.config is not None]
    shared = {key: value for key, value in configs[0].items()
              if all(key in other and other[key] == value for other in configs[1:])} if configs else {}
    for call in ordered:
        call.own = {key: value for key, value in (call.config or {}).items() if key not in shared}
    return ordered, shared


def slowest_range(calls: list[CompileCall]) -> tuple[CompileCall, Range] | None:
    """The range whose pieces took longest to compile (None when no piece logged a compile time; an abandoned
    call's pieces do not count)."""
    timed = [(r.seconds, call, r) for call in calls for r in call.ranges if r.seconds > 0 and not call.abandoned]
    if not timed:
        return None
    _, call, found = max(timed, key=lambda t: t[0])
    return call, found


def _hit(piece: dict) -> bool:
    return "hit" in (piece["cache"] or "") and "miss" not in (piece["cache"] or "")


def lone_misses(calls: list[CompileCall]) -> list[dict]:
    """Pieces whose cache missed where every other piece of their range hit: on a warm start, the pieces
    whose graph changed (a cold start, where most pieces miss, names none)."""
    out = []
    for call in calls:
        for r in call.ranges:
            for piece in r.compiled:
                others = [p for p in r.compiled if p is not piece]
                if "miss" in (piece["cache"] or "") and others and all(_hit(p) for p in others):
                    out.append(piece)
    return out
