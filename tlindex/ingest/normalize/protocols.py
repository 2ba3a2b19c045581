"""What handlers may use of the normalizer, as protocols (so handler modules need not import core)."""

from __future__ import annotations

from typing import Protocol


class Sink(Protocol):
    """Where rows go: a staging writer (or a test's list)."""

    def add(self, table: str, row: tuple) -> None: ...
    def add_payload(self, digest: str, text: str, size: int) -> None: ...


class Normalizer(Protocol):
    """The services tlindex.ingest.normalize.core.FileNormalizer offers a handler."""

    sink: Sink
    new_compiles: int

    def next_id(self, table: str) -> int: ...
    def error(self, line: int, offset: int, kind: str, message: str, excerpt: str | None = None,
              *, lines: int = 1, size: int = 0, pid: int | None = None) -> None: ...
    def store_text(self, text: str) -> str: ...
    def frames(self, proc, envelope_id: int, stack: str, frames: list) -> None: ...
    def frame_text(self, proc, frames: list | None) -> str | None: ...
