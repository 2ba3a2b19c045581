"""Turn the records of one file into rows: the work common to every envelope.

Per envelope: find its process (a file may interleave several) and compilation,
write the envelope row, store its payload once, record its stack frames, then
hand it to the handler registered for its kind (tlindex.ingest.normalize.handlers).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3

import orjson

from tlindex.ingest.normalize.context import compile_of, note_rank
from tlindex.ingest.normalize.handlers import HANDLERS, METRICS_KINDS
from tlindex.ingest.normalize.known import count_unknown
from tlindex.ingest.normalize.protocols import Sink
from tlindex.ingest.normalize.state import Compile, CompileState, Process, compile_id_text, context_ids
from tlindex.ingest.reader import MAX_RECORD_BYTES, ReadError, Record

# Envelope context keys, stored as logged in the envelopes row (compile ids are read through context_ids).
CONTEXT_FIELDS = ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "rank")
FILE_RANK_RE = re.compile(r"dedicated_log_torch_trace_rank_(\d+)")


def to_json(value) -> str:
    """JSON text of a parsed envelope's metadata (the stdlib for nesting orjson will not write)."""
    try:
        return orjson.dumps(value, default=repr).decode()
    except orjson.JSONEncodeError:
        try:
            return json.dumps(value, default=repr)
        except (ValueError, RecursionError):
            return repr(value)[:10000]


def file_rank(name: str) -> int | None:
    """The rank torch put in the file name, if any (none past a 64-bit integer: no real rank is)."""
    match = FILE_RANK_RE.search(name)
    rank = int(match.group(1)) if match and len(match.group(1)) < 20 else None
    return rank if rank is not None and rank < 1 << 63 else None


# Lines that are no trace line at all: what ingest_errors keeps of their text is bounded per file (or chunk).
FOREIGN_KINDS = frozenset({"bad_prefix", "orphan_payload"})
# How many of them keep their start (200 bytes): before the file's first trace record, then once it has one (the
# output of a launcher or a script interleaved with a log: worth reading).
FOREIGN_EXCERPTS = (3, 1000)


def bounded(number: int, after_records: bool, excerpt: str, message: str) -> tuple[str | None, str]:
    """The excerpt and message of the `number`th line of a file that is not a trace line: past the bound, no
    excerpt, and a message that says so (the row's file, line and offset say where the line is)."""
    bound = FOREIGN_EXCERPTS[after_records]
    if number <= bound:
        return excerpt, message
    return None, (f"{message} (its text is not kept: a file keeps the start of its first {bound} lines that are not "
                  f"trace lines{'' if after_records else ' before a trace record'}; its file, line and offset say "
                  f"where it is)")

def count_volume(proc: Process, rec: Record, kind: str, name: str | None) -> None:
    """A record counted in its process's volume, by kind, name and the torch line that logged it."""
    volume_key = (kind, name, rec.emitter_file, rec.emitter_line)
    counted = proc.volume.get(volume_key)
    if counted is None:
        counted = proc.volume[volume_key] = [0, 0]
    counted[0] += 1
    counted[1] += rec.envelope_bytes + rec.payload_bytes


def compile_named(compile: Compile | None, kind: str, data: dict) -> str | None:
    """The compile id an envelope row names: its compile's; a span the next compile of a finished id opened
    (context.compile_of) is no compile's, but under its id, as tlparse files it."""
    if compile is not None:
        return compile.compile_id
    return compile_id_text(*context_ids(data)[:3]) if kind == "chromium_event" else None


class FileNormalizer:
    """Normalize one file's records into rows for `sink`.

    Ids are local to the sink (1, 2, ...); the merge offsets them into the main
    database. Restored entities from an earlier ingest of a growing log carry
    negative ids (minus their id in the main database), which the merge keeps.
    """

    def __init__(self, sink: Sink, file_id: int, file_name: str,
                 processes: dict[int, Process] | None = None,
                 next_ids: dict[str, int] | None = None):
        self.sink = sink
        self.file_id = file_id
        self.file_rank = file_rank(file_name)
        self.processes: dict[int, Process] = processes or {}
        self.ids: dict[str, int] = next_ids or {}
        self.payloads_seen: set[str] = set()
        self.envelopes = 0
        self.errors = 0
        self.foreign_excerpts = 0  # lines that are not trace lines met (what is kept of them is bounded)
        self.md5_failures = 0
        self.new_compiles = 0
        self.unknown: dict[str, int] = {}  # records of kinds tlindex does not know yet (known.py), by kind
        self.envelope_written = False  # whether the record being read has its envelope row yet

    def next_id(self, table: str) -> int:
        value = self.ids.get(table, 0) + 1
        self.ids[table] = value
        return value

    def process(self, pid: int) -> Process:
        proc = self.processes.get(pid)
        if proc is None:
            proc = self.processes[pid] = Process(self.next_id("sources"), pid, self.file_rank)
        return proc

    def seed(self, state: CompileState) -> None:
        """Start from the compile ids a chunk's processes had started or finished before it."""
        for pid, ids in state.processes.items():
            proc = self.process(pid)
            for key, (started, finished) in ids.items():
                compile = Compile(self.next_id("compiles"), proc.source_id, None, 0, key)
                compile.started_attempts, compile.finished = set(started), finished
                proc.compiles[key] = compile
                proc.all_compiles.append(compile)

    def feed(self, item: Record | ReadError) -> None:
        if isinstance(item, Record):
            self.envelope_written = False
            try:
                self.on_record(item)
            except (sqlite3.Error, OSError):  # the staging file's writes (a full disk): the ingest's, not the record's
                raise
            except Exception as error:  # a shape no code here expects: keep the rest of the file
                self.handler_error(item, error)
                if not self.envelope_written:
                    self.bare_envelope(item)
        else:
            self.error(item.line, item.offset, item.kind, item.message, item.excerpt,
                       lines=item.lines, size=item.bytes, pid=item.pid)

    def error(self, line: int, offset: int, kind: str, message: str, excerpt: str | None = None,
              *, lines: int = 1, size: int = 0, pid: int | None = None) -> None:
        """Record an ingest error (size = bytes of lines not indexed as envelopes). What is kept of lines that are not
        trace lines is bounded (FOREIGN_EXCERPTS): a file that is no log (a key named like one) keeps a few."""
        self.errors += 1
        if excerpt and kind in FOREIGN_KINDS:
            self.foreign_excerpts += 1
            excerpt, message = bounded(self.foreign_excerpts, self.envelopes > 0, excerpt, message)
        source = self.processes[pid].source_id if pid in self.processes else None
        self.sink.add("ingest_errors", (self.next_id("ingest_errors"), self.file_id, source, line,
                                        offset, lines, size, kind, message, excerpt))

    def handler_error(self, rec: Record, error: Exception) -> None:
        """Record that a record's contents could not be read; its envelope row is written first."""
        kind = next(iter(rec.data), "?")
        self.error(rec.line, rec.offset, "handler_error",
                   f"{kind} record not understood: {type(error).__name__}: {error}"[:1000], pid=rec.pid)

    def bare_envelope(self, rec: Record) -> None:
        """The envelope row of a record whose reading failed before it was written: no compile."""
        data = rec.data
        kind = next(iter(data), "?")
        proc = self.process(rec.pid)
        if rec.payload is not None and rec.payload_hash not in self.payloads_seen:
            self.payloads_seen.add(rec.payload_hash)
            self.sink.add_payload(rec.payload_hash, rec.payload.decode("utf-8", "replace"), len(rec.payload))
        self.add_envelope(self.next_id("envelopes"), proc, rec, kind, None, None,
                          to_json(data[kind]) if kind in data else None)

    def add_envelope(self, envelope_id: int, proc: Process, rec: Record, kind: str, name: str | None,
                     compile: Compile | None, metadata: str | None) -> None:
        """The envelope row of a record (context keys as logged; its compile, if it has one)."""
        data = rec.data
        ca, frame, frame_compile, attempt, rank = map(data.get, CONTEXT_FIELDS)  # other than integers: noted
        self.sink.add("envelopes", (
            envelope_id, proc.source_id, rec.line, rec.offset, rec.time, rec.pid, rec.emitter_file,
            rec.emitter_line, kind, name, compile.id if compile else None,
            compile_named(compile, kind, data), ca if type(ca) is int else None,
            frame if type(frame) is int else None, frame_compile if type(frame_compile) is int else None,
            attempt if type(attempt) is int else None, rank if type(rank) is int else None,
            data.get("subgraph_name"), metadata, rec.payload_hash, rec.envelope_bytes,
            rec.payload_bytes, rec.payload_lines, None if rec.md5_ok is None else int(rec.md5_ok)))
        self.envelope_written = True

    def store_payload(self, record: Record) -> str | None:
        """Store the record's payload once; return its text."""
        payload = record.payload
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = payload.decode("utf-8", "replace")
            # three bytes of UTF-8 for each byte replaced: the staging writer cuts a text widened past a record
            cut = len(text) * 3 > MAX_RECORD_BYTES and len(text.encode("utf-8")) > MAX_RECORD_BYTES
            self.error(record.line + 1, record.offset + record.envelope_bytes, "invalid_utf8",
                       f"payload is not valid UTF-8 (stored with U+FFFD replacements"
                       f"{f', cut to its first {MAX_RECORD_BYTES >> 20} MiB' if cut else ''}; md5 checked on the bytes)",
                       lines=record.payload_lines, pid=record.pid)
        digest = record.payload_hash
        if digest not in self.payloads_seen:
            self.payloads_seen.add(digest)
            self.sink.add_payload(digest, text, len(payload))
        return text

    def store_text(self, text: str) -> str:
        """Store a text that is not a record payload (e.g. a config dump) as a payload."""
        data = text.encode("utf-8", "surrogatepass")
        digest = hashlib.md5(data).hexdigest()
        if digest not in self.payloads_seen:
            self.payloads_seen.add(digest)
            self.sink.add_payload(digest, text, len(data))
        return digest

    def on_record(self, rec: Record) -> None:
        """One record: its process and compile, the envelope row, payload, frames, artifact, then its handler."""
        data = rec.data
        kind = next(iter(data))
        meta = data[kind]
        proc = self.processes.get(rec.pid)
        if proc is None:
            proc = self.process(rec.pid)
        self.envelopes += 1
        if rec.invalid_utf8:
            self.error(rec.line, rec.offset, "invalid_utf8",
                       "envelope line is not valid UTF-8 (indexed with U+FFFD replacements)", pid=rec.pid)
        if "rank" in data:
            note_rank(self, proc, rec, data)
        compile = compile_of(self, proc, rec, kind, data)
        if proc.first_time is None:
            proc.first_time = rec.time
        proc.last_time = rec.time
        proc.envelope_count += 1
        proc.bytes += rec.envelope_bytes + rec.payload_bytes
        text = self._payload_of(rec, data) if rec.payload is not None else None

        is_dict = isinstance(meta, dict)
        name = meta.get("name") if is_dict else None
        if not isinstance(name, str):
            name = None
        # metrics keep every key in the metrics table; an empty {} is no metadata
        metadata = None if kind in METRICS_KINDS or (is_dict and not meta) else to_json(meta)
        envelope_id = self.next_id("envelopes")
        count_volume(proc, rec, kind, name)
        self.add_envelope(envelope_id, proc, rec, kind, name, compile, metadata)
        self._stacks(proc, envelope_id, data, meta if is_dict else None)
        if kind in ("artifact", "link") or (text is not None and kind != "chromium_event"):
            encoding = meta.get("encoding") if is_dict else None
            self.sink.add("artifacts", (self.next_id("artifacts"), envelope_id,
                                        compile.id if compile else None, kind, name or kind, encoding,
                                        rec.payload_hash, len(rec.payload) if rec.payload is not None else 0))
        handler = HANDLERS.get(kind)
        if handler is not None:
            handler(self, proc, rec, envelope_id, compile, meta, text)  # raising: feed() reports it

    def _payload_of(self, rec: Record, data: dict) -> str | None:
        """The record's payload stored once (its text returned); a failed md5 is counted and said."""
        if rec.payload is None:
            return None
        text = self.store_payload(rec)
        if not rec.md5_ok:
            self.md5_failures += 1
            self.error(rec.line, rec.offset, "md5_mismatch",
                       f"payload md5 {rec.payload_hash} != has_payload {data.get('has_payload')} "
                       f"({rec.payload_lines} payload lines); stored as read", pid=rec.pid)
        return text

    def _stacks(self, proc: Process, envelope_id: int, data: dict, meta: dict | None) -> None:
        """The frames of the record's context stack and of its metadata's stack and user_stack."""
        stack = data.get("stack")
        if isinstance(stack, list):
            self.frames(proc, envelope_id, "context", stack)
        if meta:  # (an empty {} has neither)
            for key in ("stack", "user_stack"):
                frames = meta.get(key)
                if isinstance(frames, list):
                    self.frames(proc, envelope_id, key, frames)

    def frames(self, proc: Process, envelope_id: int, stack: str, frames: list) -> None:
        strings = proc.strings
        for depth, frame in enumerate(frames):
            if not isinstance(frame, dict):
                continue
            filename_id = frame.get("filename")
            filename = strings.get(filename_id) if isinstance(filename_id, int) else None
            if isinstance(filename_id, str):  # older logs wrote the path itself
                filename, filename_id = filename_id, None
            elif not isinstance(filename_id, int):
                filename_id = None
            self.sink.add("frames", (self.next_id("frames"), envelope_id, stack, depth, filename_id,
                                     filename, frame.get("line"), frame.get("name"), frame.get("loc")))

    def frame_text(self, proc: Process, frames: list | None) -> str | None:
        """`file:line in name` of the innermost frame of a stack."""
        if not frames or not isinstance(frames[-1], dict):
            return None
        frame = frames[-1]
        filename = frame.get("filename")
        if isinstance(filename, int):
            filename = proc.strings.get(filename, f"<string {filename}>")
        return f"{filename}:{frame.get('line')} in {frame.get('name')}"

    def finish(self, check_file_rank: bool = True) -> None:
        """Close open spans and write the source and compile rows (counting the new compiles). `check_file_rank` is
        False for a chunk of a file: the chunks put together decide it (tlindex.ingest.continuation)."""
        for proc in self.processes.values():
            for name, opened in proc.open_spans.items():
                for envelope_id, compile_id, ts, cat in opened:
                    self.sink.add("chromium_events", (self.next_id("chromium_events"), proc.source_id,
                                                      compile_id, name, cat, "B", ts, None, envelope_id, None))
            proc.open_spans = {}
            conflict = proc.file_rank_conflict()
            if check_file_rank and conflict:
                self.error(0, 0, "rank_mismatch", conflict, pid=proc.pid)
            self.sink.add("sources", proc.row(self.file_id))
            for row in proc.volume_rows():
                self.sink.add("volume", row)
            count_unknown(self.unknown, proc.volume)
            proc.volume = {}
            for compile in proc.finished_compiles():
                self.sink.add("compiles", compile.row())
                self.new_compiles += compile.id > 0 and compile.counted  # (an earlier ingest's are negative)
