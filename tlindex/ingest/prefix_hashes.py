"""The sha256 of a split file's first bytes up to each chunk's end, hashed by a thread while the chunks are parsed.

Each chunk's merge stores the hash of the file up to the chunk's end (a stopped ingest continues from there), and
the chunks merge in order in the main process. Hashed there, a GB costs the main process ~1 s between merges, most
of it at the end of the run when its merges are all that is left. hashlib lets other threads run while it hashes a
block, so a thread started when the file is split hashes it beside the workers' parsing and the main process's
merges; a merge then takes the hash at its chunk's end ready made.
"""

from __future__ import annotations

import hashlib
import threading

BLOCK = 1 << 20  # bytes read and hashed at a time


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
        """Start hashing ahead (once). After the workers are forked: a fork copies no thread mid-flight."""
        with self.changed:
            if self.thread.ident is None:
                self.thread.start()

    def _hash_marks(self) -> None:
        """Hash from the start to the last mark, keeping a copy of the hash at each; an unreadable file stops it
        (then `upto` hashes what is left itself, and meets the error there)."""
        digest, hashed, buffer = hashlib.sha256(), 0, memoryview(bytearray(BLOCK))  # one buffer: no allocations
        try:
            with open(self.path, "rb", buffering=0) as file:
                for mark in self.marks:
                    while hashed < mark and not self.stopped:
                        read = file.readinto(buffer[:min(BLOCK, mark - hashed)])
                        if not read:
                            return
                        digest.update(buffer[:read])
                        hashed += read
                    if self.stopped:
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
                hashed = start
                while hashed < offset:
                    block = file.read(min(BLOCK, offset - hashed))
                    if not block:
                        break
                    digest.update(block)
                    hashed += len(block)
        return digest.hexdigest()

    def stop(self) -> None:
        """Stop hashing ahead (the file's ingest ended); hashes already taken stay."""
        self.stopped = True
