"""A record's context, read before its handler runs: the rank its process claims and the compilation it
belongs to (tlparse's compile directory), with that compilation's totals counted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from tlindex.ingest.normalize.spans import opens_a_compile
from tlindex.ingest.normalize.state import RANK_CONFLICT, Compile, Process, context_ids, integer

if TYPE_CHECKING:
    from tlindex.ingest.normalize.protocols import Normalizer
    from tlindex.ingest.reader import Record


def note_rank(n: Normalizer, proc: Process, rec: Record, data: dict) -> None:
    """A process's rank is the first one it logs; another one later is an ingest error, said once."""
    rank = data.get("rank")
    if rank == proc.rank and type(rank) is int:  # (the common case: the rank it logged before)
        return
    rank = integer(rank)
    if rank is None:
        return
    if proc.rank is None:
        proc.rank = rank
    elif rank != proc.rank and not proc.rank_conflict_reported:
        proc.rank_conflict_reported = True
        n.error(rec.line, rec.offset, "rank_mismatch",
                RANK_CONFLICT.format(pid=rec.pid, rank=rank, first=proc.rank), pid=rec.pid)


def compile_of(n: Normalizer, proc: Process, rec: Record, kind: str, data: dict) -> Compile | None:
    """The compilation a record belongs to (created on its first record), its totals counted; None for
    string-table records, records whose context ids are not integers (an ingest error says so), and the spans
    the next compile of a finished compile's id opens before its dynamo_start."""
    ca, frame, frame_compile, attempt, odd = context_ids(data)
    rank = data.get("rank")
    bad_rank = rank is not None and integer(rank) is None
    if odd or bad_rank:
        fields = ", ".join(f"{name}={data[name]!r}"[:80] for name in odd + ["rank"] * bad_rank)
        n.error(rec.line, rec.offset, "handler_error",
                f"{kind} record not understood: context fields that are not integers ({fields}); "
                f"the record belongs to no compile", pid=rec.pid)
    if kind == "str" or odd:  # string-table records belong to the process, not to a compile
        return None
    # Records without any compile id (export, AOTInductor, spans outside a compile)
    # belong to the process's compile-id-less compile, tlparse's [-/-], unless their payload names one.
    key = (ca, frame, frame_compile)
    if key == (None, None, None) and kind == "artifact":
        key = payload_compile(proc, rec, data) or key
    compile = proc.compiles.get(key)
    if kind == "dynamo_start" and compile is not None and compile.starts_again(attempt or 0):
        proc.reset_compile_ids()
        compile = None
    elif (kind == "chromium_event" and compile is not None and compile.finished and rec.payload is not None
          and not compile.anonymous and opens_a_compile(rec.payload)):
        # torch._dynamo.reset() made the id new: the next compile of it begins its spans before its dynamo_start.
        # They are no record of the compile that finished (its span ends with its own last record); the spans
        # take their end's compile (tlindex.ingest.normalize.spans), the records none.
        return None
    if compile is None:
        compile = proc.compiles[key] = Compile(n.next_id("compiles"), proc.source_id,
                                               proc.rank, proc.generation, key)
        proc.all_compiles.append(compile)
    if attempt and attempt > compile.max_attempt:
        compile.max_attempt = attempt
    compile.envelope_count += 1
    compile.envelope_bytes += rec.envelope_bytes
    compile.payload_bytes += rec.payload_bytes
    if compile.start_time is None:
        compile.start_time = rec.time
    compile.end_time = rec.time
    return compile


# Artifacts logged without context (suppress_context) whose JSON payload names their compile: `compile_id` "0/1"
# (torch/_inductor/compile_worker/subproc_pool.py: a compile worker's job still running, reported by its watchdog).
COMPILE_ID_IN_PAYLOAD = frozenset({"compile_worker_status"})


def payload_compile(proc: Process, rec: Record, data: dict) -> tuple | None:
    """The key of the process's compile an artifact of COMPILE_ID_IN_PAYLOAD names in its payload, if the process has
    that compile; None otherwise (the record stays in [-/-])."""
    meta = data.get("artifact")
    if not isinstance(meta, dict) or meta.get("name") not in COMPILE_ID_IN_PAYLOAD or rec.payload is None:
        return None
    try:
        named = orjson.loads(rec.payload).get("compile_id")
    except (orjson.JSONDecodeError, AttributeError):  # not JSON, or not an object
        return None
    return next((key for key, compile in proc.compiles.items() if compile.compile_id == named), None) \
        if isinstance(named, str) else None
