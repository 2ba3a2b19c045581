"""Turn the bytes of a TORCH_TRACE log into records and read errors, streaming.

The grammar (shared/research/torch_trace_format.md, 1.3): a glog envelope line
`V<MMDD> <HH:MM:SS.us> <pid> <path>:<line>] <json>` optionally followed by
payload lines, each prefixed by one TAB; `has_payload` is the md5 of the
de-tabbed payload lines joined with "\n". The reader also accepts what real
logs contain: CRLF endings, a launcher prefix such as torchrun's `[rank0]:`,
blank lines, very long lines and bytes that are not UTF-8. It knows nothing of
SQL: it yields `Record`s and `ReadError`s and tracks how far it has consumed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import BinaryIO, Generator, Iterator

import orjson

from tlindex.ingest.splitter import RecordSplitter, Run, excerpt

ENVELOPE_RE = re.compile(rb"([VIWEC])(\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+) +(\d+) (.+?):(\d+)\] ")
LAUNCHER_PREFIX_RE = re.compile(rb"\[[^\]\t]{1,64}\]:")
READ_BLOCK = 1 << 20
# The most a record (its envelope line and payload lines) may hold. The largest real records are far
# below it (tlparse's test logs: 40 KB; torch's generated code of big models: a few MB). A longer one
# is not held: its bytes and lines are counted into one too_long error as they stream by.
MAX_RECORD_BYTES = 64 << 20

# Every kind of ingest_errors row, with what it means (documented in docs/schema.md).
ERROR_KINDS = {
    "bad_prefix": "a line that is neither a glog envelope line nor a payload line; not indexed",
    "bad_json": "an envelope line whose JSON does not parse; not indexed (its payload lines become orphan_payload)",
    "not_an_object": "an envelope line whose JSON is not a non-empty object; not indexed",
    "orphan_payload": "TAB-prefixed lines after a record that declares no payload (one row per run of lines); not indexed",
    "blank_line": "an empty line outside a payload; not indexed (an empty line inside a payload is read as an empty "
                  "payload line, as older torch wrote them)",
    "incomplete_record": "the last line is cut off and does not parse: a log still being written; a later ingest of "
                         "the grown log reads it again",
    "md5_mismatch": "a payload whose md5 differs from has_payload; the record and its payload are indexed as read (md5_ok = 0)",
    "invalid_utf8": "an envelope or payload that is not valid UTF-8; indexed with U+FFFD replacements "
                    "(md5 is checked on the bytes)",
    "rank_mismatch": "a process logs two ranks, or its file name's rank differs from its envelopes' rank",
    "out_of_range": "an envelope line whose pid or emitter line number does not fit a 64-bit integer; not indexed",
    "handler_error": "a record whose envelope is indexed but whose contents the normalizer could not read "
                     "(a shape this tlindex does not expect: an object for a list, a string for a number, ...); "
                     "the message names the envelope kind and the error",
    "bad_value": "a value where a number belongs that is not one (text, a list, an object, an integer past 64 bits): "
                 "its column is NULL, the message names the column and the value as logged; the record is indexed",
    "damaged_gzip": "a .gz file that ends early or is corrupt: what decompressed before the damage is indexed; "
                    "the offset is where the decompressed content stops",
    "too_long": "a record (envelope line and payload lines) longer than MAX_RECORD_BYTES (64 MiB): not held, not "
                "indexed; its lines and bytes are counted",
}
MAX_INTEGER = (1 << 63) - 1  # SQLite's INTEGER


@dataclass(slots=True)
class Record:
    """One envelope line and its payload."""

    line: int                 # 1-based line number of the envelope line
    offset: int               # byte offset of the envelope line
    time: str                 # ISO 8601 local time, year inferred
    pid: int
    emitter_file: str
    emitter_line: int
    data: dict                # the parsed JSON envelope
    envelope_bytes: int
    payload: bytes | None = None   # de-tabbed payload lines joined with \n
    payload_hash: str | None = None  # md5 hex of payload
    payload_bytes: int = 0    # bytes of the payload lines as written
    payload_lines: int = 0
    md5_ok: bool | None = None
    invalid_utf8: bool = False  # the envelope line needed lossy decoding


@dataclass(slots=True)
class ReadError:
    """Lines that could not be read as a record, or a problem with one."""

    line: int
    offset: int
    lines: int                # number of lines concerned
    bytes: int                # bytes of those lines that are not indexed as a record
    kind: str
    message: str
    excerpt: str | None = None
    pid: int | None = None    # the process, when known


def line_body(raw: bytes) -> bytes:
    """A line without its end: the \n, and one \r before it."""
    if raw[-1:] == b"\n":
        raw = raw[:-1]
    return raw[:-1] if raw[-1:] == b"\r" else raw


class Clock:
    """Give glog's month-day-time stamps a year, from the file's mtime.

    A record dated later in the calendar than the file's last modification
    (more than two days, to absorb time zones) was written the year before:
    this also handles a log that crosses New Year.
    """

    def __init__(self, mtime: float):
        self.last = datetime.fromtimestamp(mtime).date() + timedelta(days=2)
        self._years: dict[bytes, int] = {}
        self._days: dict[bytes, str] = {}

    def day(self, mmdd: bytes) -> str:
        """`YYYY-MM-DDT`, the start of an ISO 8601 time on that day."""
        day = self._days.get(mmdd)
        if day is None:
            day = self._days[mmdd] = f"{self.year(mmdd)}-{mmdd[:2].decode()}-{mmdd[2:].decode()}T"
        return day

    def year(self, mmdd: bytes) -> int:
        year = self._years.get(mmdd)
        if year is None:
            month, day = int(mmdd[:2]), int(mmdd[2:])
            year = self.last.year
            for candidate in range(self.last.year, self.last.year - 5, -1):
                try:
                    if date(candidate, month, day) <= self.last:
                        year = candidate
                        break
                except ValueError:  # Feb 29 of a non-leap year, or a bad date
                    continue
            self._years[mmdd] = year
        return year


@dataclass(slots=True)
class _Pending:
    """A record whose payload lines are still being read, line by line."""

    record: Record
    parts: list[bytes] = field(default_factory=list)
    had_cr: bool = False
    blanks: list[tuple[int, int, int, int]] = field(default_factory=list)  # runs: (line, offset, lines, bytes)

    def add(self, raw: bytes, size: int) -> None:
        if self.blanks:
            # Older torch wrote empty payload lines without their TAB.
            count = sum(blank[2] for blank in self.blanks)
            self.parts.extend(b"" for _ in range(count))
            self.record.payload_lines += count
            self.record.payload_bytes += sum(blank[3] for blank in self.blanks)
            self.blanks = []
        body = raw[1:-1] if raw[-1:] == b"\n" else raw[1:]
        if body[-1:] == b"\r":
            body = body[:-1]
            self.had_cr = True
        self.parts.append(body)
        self.record.payload_lines += 1
        self.record.payload_bytes += size

    def blank_errors(self) -> Iterator[ReadError]:
        """Blank lines after the payload that no payload line followed (a run of them is one error)."""
        for line, offset, lines, size in self.blanks:
            yield ReadError(line, offset, lines, size, "blank_line", "blank line" if lines == 1 else f"{lines:,} blank lines")


def detab(region: bytes, lines: int) -> bytes:
    """Payload lines (`lines` of them, each after its TAB, joined by \n) without their TABs: every TAB
    deleted at once when the lines hold no other, else each line's first one."""
    detabbed = region.translate(None, b"\t")
    if len(region) - len(detabbed) == lines:
        return detabbed
    return region[1:].replace(b"\n\t", b"\n")


def _without_line_end_cr(payload: bytes, claimed: object) -> tuple[bytes, str]:
    """A payload read from CRLF lines: one CR per line end is the line ending's,
    unless only the payload with every line ending in CR matches the md5 (as _finish)."""
    stripped = payload.replace(b"\r\n", b"\n")
    if stripped.endswith(b"\r"):
        stripped = stripped[:-1]
    digest = hashlib.md5(stripped).hexdigest()
    if digest != claimed:
        raw = stripped.replace(b"\n", b"\r\n") + b"\r"
        raw_digest = hashlib.md5(raw).hexdigest()
        if raw_digest == claimed:
            return raw, raw_digest
    return stripped, digest


class LogReader:
    """Stream records out of one log; `consumed_*` say how far it got.

    A last line that does not parse and lacks its newline (a live log still
    being written) is reported as an `incomplete_record` error and not counted
    as consumed; a last record whose payload md5 fails is indexed but not
    counted as consumed either. A later ingest of the grown log replaces both
    and reads on from there. A whole last line without its newline is read as usual.
    A `complete` stream (a chunk of a file that ends where another record
    starts) has no such provisional end.
    """

    def __init__(self, stream: BinaryIO, clock: Clock, line: int = 0, offset: int = 0,
                 skip_rest_of_line: bool = False, complete: bool = False):
        self.stream = stream
        self.clock = clock
        self.consumed_lines = line
        self.consumed_offset = offset
        self.skip_rest_of_line = skip_rest_of_line
        self.complete = complete
        self._line = line        # lines read so far
        self._offset = offset    # bytes read so far
        self._pending: _Pending | None = None   # a record collecting payload lines
        self._orphan: ReadError | None = None   # a run of payload lines with no record

    def __iter__(self) -> Iterator[Record | ReadError]:
        if self.skip_rest_of_line:
            # The previous ingest ended on a line without its newline: the rest
            # of that line (normally just the newline) was part of it.
            self._offset += len(self.stream.readline())
            self._consume(self._line, self._offset)
        for piece in RecordSplitter(self.stream, READ_BLOCK, MAX_RECORD_BYTES):
            if piece.__class__ is tuple:
                # A whole, ordinary record: no per-line work (the common case).
                if self._pending is not None or self._orphan is not None:  # (rarely)
                    yield from self._ended()
                record = piece[0]
                start = self._offset
                self._consume(self._line, start)
                line = self._line + 1
                self._offset = start + len(record)
                lines = record.count(b"\n")
                item, orphan = self._whole_record(record, line, start, lines)
                yield item
                if orphan is not None:
                    yield orphan
                self._line = line + lines - 1
                self._consume(self._line, self._offset)
            elif piece.__class__ is Run:
                yield from self._run(piece)
            elif (yield from self._careful_line(piece)):
                return  # a cut-off last line: nothing after it is consumed
        yield from self._end_of_input()

    def _run(self, run: Run) -> Iterator[ReadError]:
        """Blank lines (inside a pending payload, or an error) or a record too long to hold."""
        kind, lines, size, complete, shown = run
        start = self._offset
        self._line += lines
        self._offset += size
        if kind == "blank" and self._pending is not None:
            self._pending.blanks.append((self._line - lines + 1, start, lines, size))
            return
        yield from self._ended()
        line = self._line - lines + 1
        if kind == "blank":
            yield ReadError(line, start, lines, size, "blank_line",
                            "blank line" if lines == 1 else f"{lines:,} blank lines")
        else:
            yield ReadError(line, start, lines, size, "too_long",
                            f"a record of {size:,} bytes in {lines:,} line{'s' * (lines != 1)}, longer than "
                            f"{MAX_RECORD_BYTES:,}: not indexed", shown)
        if complete or self.complete:
            self._consume(self._line, self._offset)

    def _careful_line(self, raw: bytes) -> Generator[Record | ReadError, None, bool]:
        """One line of an unusual record, read on its own; return whether the input ends here, cut off."""
        self._line += 1
        line_no, start = self._line, self._offset
        self._offset += len(raw)
        size = self._offset - start
        if raw[:1] == b"[":
            prefix = LAUNCHER_PREFIX_RE.match(raw)
            if prefix and raw[prefix.end():prefix.end() + 1] == b"\t":
                raw = raw[prefix.end():]
        if raw[:1] == b"\t":
            self._payload_line(raw, line_no, start, size)
            return False
        if self._pending is not None and not raw.strip():
            self._pending.blanks.append((line_no, start, 1, size))
            return False
        # A new record (or a non-record line) ends the pending one.
        yield from self._ended()
        self._consume(line_no - 1, start)
        item = self._parse_envelope(raw, line_no, start, size)
        if isinstance(item, Record) and "has_payload" in item.data:
            self._pending = _Pending(item)
            return False
        if isinstance(item, ReadError) and raw[-1:] != b"\n" and item.kind != "blank_line":
            # An unterminated last line that does not parse is still being written.
            item.kind = "incomplete_record"
            item.message = "the last line is cut off (a log still being written?)"
            yield item
            return True
        yield item
        self._consume(line_no, self._offset)
        return False

    def _payload_line(self, raw: bytes, line_no: int, start: int, size: int) -> None:
        """A TAB line: one more line of the pending payload, or of a run of orphan payload lines."""
        if self._pending is not None:
            self._pending.add(raw, size)
        elif self._orphan is not None:
            self._orphan.lines += 1
            self._orphan.bytes += size
        else:
            self._orphan = ReadError(line_no, start, 1, size, "orphan_payload",
                                     "payload lines follow a record that declares no payload", excerpt(raw))

    def _end_of_input(self) -> Iterator[Record | ReadError]:
        """The last pending record or orphan run; a last record whose md5 fails is not consumed."""
        pending = self._pending
        if pending is not None:
            if not self._finish(pending) and not self.complete:
                # Possibly cut off by a writer still at work: indexed as read, but
                # not consumed, so a later ingest of the grown log reads it again.
                yield pending.record
                yield from pending.blank_errors()
                return
            yield pending.record
            yield from pending.blank_errors()
        elif self._orphan is not None:
            yield self._orphan
        self._consume(self._line, self._offset)

    def _ended(self) -> Iterator[Record | ReadError]:
        """What a new piece of input ends: the record collecting payload lines, or a run of orphan lines."""
        pending, orphan = self._pending, self._orphan
        self._pending = self._orphan = None
        if pending is not None:
            self._finish(pending)
            yield pending.record
            yield from pending.blank_errors()
        if orphan is not None:
            yield orphan

    def _whole_record(self, record: bytes, line_no: int, start: int,
                      lines: int) -> tuple[Record | ReadError, ReadError | None]:
        """Parse an ordinary record of `lines` lines: envelope line, then TAB payload lines de-tabbed in one
        go; return it and the error for its payload lines when its envelope declares none."""
        newline = record.index(b"\n") + 1
        item = self._parse_envelope(record[:newline], line_no, start, newline)
        if isinstance(item, Record) and "has_payload" in item.data:
            item.payload_lines = lines - 1
            item.payload_bytes = len(record) - newline
            payload = detab(record[newline:-1], lines - 1)
            claimed = item.data.get("has_payload")
            if b"\r" in payload:
                payload, digest = _without_line_end_cr(payload, claimed)
            else:
                digest = hashlib.md5(payload).hexdigest()
            item.payload, item.payload_hash = payload, digest
            item.md5_ok = digest == claimed
            return item, None
        region = record[newline:]
        if region:
            return item, ReadError(line_no + 1, start + newline, region.count(b"\n"), len(region), "orphan_payload",
                                   "payload lines follow a record that declares no payload", excerpt(region))
        return item, None

    def _consume(self, line_no: int, offset: int) -> None:
        self.consumed_lines = line_no
        self.consumed_offset = offset

    @staticmethod
    def _finish(pending: "_Pending") -> bool:
        """Join and verify the payload; return whether its md5 matches."""
        record, parts = pending.record, pending.parts
        payload = b"\n".join(parts)
        digest = hashlib.md5(payload).hexdigest()
        claimed = record.data.get("has_payload")
        if digest != claimed and pending.had_cr:
            # The file was converted to CRLF after writing, or the payload
            # itself ends lines with \r: accept whichever the md5 confirms.
            raw_payload = b"\n".join(p + b"\r" for p in parts)
            raw_digest = hashlib.md5(raw_payload).hexdigest()
            if raw_digest == claimed:
                payload, digest = raw_payload, raw_digest
        record.payload = payload
        record.payload_hash = digest
        record.md5_ok = digest == claimed
        return record.md5_ok

    def _parse_envelope(self, raw: bytes, line_no: int, start: int, size: int) -> Record | ReadError:
        line = line_body(raw)
        if not line or line.isspace():
            return ReadError(line_no, start, 1, size, "blank_line", "blank line")
        match = ENVELOPE_RE.match(line)
        if match is None:
            prefix = LAUNCHER_PREFIX_RE.match(line)
            match = ENVELOPE_RE.match(line, prefix.end()) if prefix else None
            if match is None:
                match = ENVELOPE_RE.search(line)  # tolerate other text before the prefix, as tlparse does
            if match is None:
                return ReadError(line_no, start, 1, size, "bad_prefix",
                                 "line is neither a glog envelope nor a payload line", excerpt(raw))
        _, month, day, clock_time, pid, path, path_line = match.groups()
        body = line[match.end():]
        invalid_utf8 = False
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = body.decode("utf-8", "replace")
                invalid_utf8 = True
            try:
                data = json.loads(text)  # the stdlib accepts what orjson refuses (huge ints, ...)
            except (ValueError, RecursionError) as stdlib_error:
                reason = "nested too deeply" if isinstance(stdlib_error, RecursionError) else error
                return ReadError(line_no, start, 1, size, "bad_json",
                                 f"envelope JSON does not parse: {reason}", excerpt(raw), _fits(int(pid)))
        if not isinstance(data, dict) or not data:
            return ReadError(line_no, start, 1, size, "not_an_object",
                             "envelope JSON is not a non-empty object", excerpt(raw), _fits(int(pid)))
        pid_value, emitter_line = int(pid), int(path_line)
        if pid_value > MAX_INTEGER or emitter_line > MAX_INTEGER:
            return ReadError(line_no, start, 1, size, "out_of_range",
                             "pid or emitter line number too large for a 64-bit integer", excerpt(raw))
        time = self.clock.day(month + day) + clock_time.decode()
        return Record(line_no, start, time, pid_value, path.decode("utf-8", "replace"), emitter_line,
                      data, size, invalid_utf8=invalid_utf8)


def _fits(value: int) -> int | None:
    """A pid for an error row, if it fits SQLite's INTEGER."""
    return value if value <= MAX_INTEGER else None
