"""A log's bytes cut into the pieces the reader reads: whole records, lines, and runs it does not hold.

Blocks are read and split where a line does not start with a TAB. A record goes whole when it is a
plain envelope line with TAB payload lines, not followed by a blank line (older torch wrote blank
payload lines without their TAB) and not the last record of the input; anything else goes line by
line, through the reader's careful path. Each block is scanned once (a record that spans blocks is
collected in parts): time is linear in the input, memory bounded by the longest record held.
"""

from __future__ import annotations

import re
from typing import BinaryIO, Iterator

RECORD_START_RE = re.compile(rb"\n(?=[^\t])")  # a line that is not a payload line starts here
EXCERPT_BYTES = 200


class Run(tuple):
    """A stretch of input the reader does not hold: (kind, lines, bytes, ends_with_newline, excerpt).
    `blank`: only newlines (CR allowed); `too_long`: a record past the splitter's `max_record` bytes."""


Piece = bytes | tuple[bytes] | Run  # a line, a whole ordinary record `(record,)`, or a run


def split_lines(data: bytes) -> list[bytes]:
    """Lines ending at \n only, ends kept (bytes.splitlines would also split at a lone \r)."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    last = lines.pop()[:-1]
    if last:
        lines.append(last)
    return lines


def excerpt(raw: bytes) -> str:
    """A short printable start of a line."""
    return raw[:EXCERPT_BYTES].rstrip(b"\r\n").decode("utf-8", "backslashreplace")


class RecordSplitter:
    """Iterate over a stream's pieces: `(record,)` for an ordinary record, a line otherwise, a `Run` of
    blank lines as one piece, and a record past `max_record` bytes as one `Run`, counted, never held."""

    def __init__(self, stream: BinaryIO, block_size: int, max_record: int):
        self.stream = stream
        self.block_size = block_size
        self.max_record = max_record
        self.parts: list[bytes] = []  # the record in progress, in blocks
        self.size = 0                 # bytes in parts
        self.skipping: list[int] | None = None  # a too-long record being counted: [lines, bytes]
        self.skipped_excerpt = ""
        self.blanks = [0, 0]          # a run of blank lines: [lines, bytes]
        self.last = b""               # the byte before the current block (a record may start at its first byte)

    def __iter__(self) -> Iterator[Piece]:
        while True:
            block = self.stream.read(self.block_size)
            if not block:
                break
            yield from self._cut(block)
        yield from self._end()

    def _cut(self, block: bytes) -> Iterator[Piece]:
        """The pieces that end in this block; what is left of it is kept for the next."""
        starts = [match.end() for match in RECORD_START_RE.finditer(block)]
        if self.last == b"\n" and block[:1] != b"\t":
            starts.insert(0, 0)
        self.last = block[-1:]
        position = 0
        for end in starts:
            piece = block[position:end]
            position = end
            if self.skipping is not None:
                yield self._skipped(piece)
                continue
            if self.parts:
                self.parts.append(piece)
                piece = b"".join(self.parts)
                self.parts, self.size = [], 0
            if not piece:
                continue
            if piece == b"\n" or piece == b"\r\n":
                self.blanks[0] += 1
                self.blanks[1] += len(piece)
                continue
            if self.blanks[0]:
                yield Run(("blank", self.blanks[0], self.blanks[1], True, ""))
                self.blanks = [0, 0]
            if piece[:1] in b"VIWEC" and block[end:end + 1] not in b"\n\r":  # (inlined: once per record)
                yield (piece,)
            else:
                yield from split_lines(piece)
        self._keep(block[position:])

    def _skipped(self, piece: bytes) -> Run:
        """The end of a too-long record: all of it as one run."""
        lines, size = self.skipping
        self.skipping = None
        return Run(("too_long", lines + piece.count(b"\n"), size + len(piece), True, self.skipped_excerpt))

    def _keep(self, rest: bytes) -> None:
        """Hold the start of a record that goes on in the next block, or count it once it is too long."""
        if self.skipping is not None:
            self.skipping[0] += rest.count(b"\n")
            self.skipping[1] += len(rest)
        elif rest:  # (a blank run stays open: this may be one more blank line)
            self.parts.append(rest)
            self.size += len(rest)
            if self.size > self.max_record:  # too long to hold: count it from here on
                self.skipping = [sum(part.count(b"\n") for part in self.parts), self.size]
                self.skipped_excerpt = excerpt(self.parts[0])
                self.parts, self.size = [], 0

    def _end(self) -> Iterator[Piece]:
        """What is left at the end of the input: blank lines, a too-long record, or a last record as lines."""
        blanks, parts = self.blanks, self.parts
        if parts and b"".join(parts) in (b"\n", b"\r\n"):  # the last line is one more blank one
            blanks = [blanks[0] + 1, blanks[1] + self.size]
            parts = []
        if blanks[0]:
            yield Run(("blank", blanks[0], blanks[1], True, ""))
        if self.skipping is not None:
            ended = self.last == b"\n"
            yield Run(("too_long", self.skipping[0] + (0 if ended else 1), self.skipping[1], ended,
                       self.skipped_excerpt))
        elif parts:
            yield from split_lines(b"".join(parts))
