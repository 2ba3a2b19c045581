"""The sha256 of a split file's first bytes up to each chunk's end, hashed by a thread while the chunks are parsed.

Each chunk's merge stores the hash of the file up to the chunk's end (a stopped ingest continues from there), and
the chunks merge in order in the main process. Hashed there, a GB costs the main process ~1 s between merges, most
of it at the end of the run when its merges are all that is left. hashlib lets other threads run while it hashes a
block, so a thread started once the workers are forked (a fork copies no thread mid-flight) hashes the file beside
their parsing and the main process's merges; a merge then takes the hash at its chunk's end ready made.
"""

from __future__ import annotations

import hashlib
import threading
from typing import BinaryIO, Callable

BLOCK = 1 << 20  # bytes read and hashed at a time


def _hash_into(digest: "hashlib._Hash", file: BinaryIO, hashed: int, end: int,
               stopped: Callable[[], bool] = lambda: False) -> int:
    """Hash the file's bytes from `hashed` (where it is positioned) to `end` into digest; the offset reached (short
    of `end` when the file is shorter, or when `stopped`)."""
    while hashed < end and not stopped():
        block = file.read(min(BLOCK, end - hashed))
        if not block:
            break
        digest.update(block)
        hashed += len(block)
    return hashed


class PrefixHashes:
    """sha256 of the file's first `offset` bytes for any offset; those at `marks` hashed ahead by a thread."""

    def __init__(self, path: str, marks: list[int]):
        self.path = path
        self.marks = sorted(set(mark for mark in marks if mark > 0))
        self.at: dict[int, "hashlib._Hash"] = {0: hashlib.sha256()}  # offset: the hash of the bytes before it
        self.stopped = False
        self.ended = False  # the thread's work is over: every mark hashed, or it stopped
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._hash_marks, name=f"sha256 {path}", daemon=True)

    def start(self) -> None:
        """Start hashing ahead (once)."""
        with self.changed:
            if self.thread.ident is None:
                self.thread.start()

    def _hash_marks(self) -> None:
        """Hash from the start to the last mark, keeping a copy of the hash at each; an unreadable file stops it
        (then `upto` hashes what is left itself, and meets the error there)."""
        digest, hashed = hashlib.sha256(), 0
        try:
            with open(self.path, "rb") as file:
                for mark in self.marks:
                    hashed = _hash_into(digest, file, hashed, mark, lambda: self.stopped)
                    if hashed < mark:
                        return
                    with self.changed:
                        self.at[mark] = digest.copy()
                        self.changed.notify_all()
        except OSError:
            return
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def upto(self, offset: int) -> str:
        """The hex sha256 of the file's first `offset` bytes."""
        self.start()
        with self.changed:  # at a mark it is there already, unless the thread is still on its way to it
            self.changed.wait_for(lambda: offset in self.at or self.ended)
            start = max(mark for mark in self.at if mark <= offset)
            digest = self.at[start].copy()
        if start < offset:
            with open(self.path, "rb") as file:
                file.seek(start)
                _hash_into(digest, file, start, offset)
        return digest.hexdigest()

    def stop(self) -> None:
        """Stop hashing ahead (the file's ingest ended), and wait for the thread (at most one block): an ingest
        leaves no thread behind. Hashes already taken stay."""
        self.stopped = True
        if self.thread.ident is not None:
            self.thread.join()
