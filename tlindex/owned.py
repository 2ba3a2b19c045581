"""What tlindex owns on disk: it removes or replaces only what it made, and writes its outputs the usual atomic way.

A folder tlindex makes holds MARKER, a small file naming tlindex and what the folder is (`{"tlindex": "report"}`): a
name and a content nobody writes by accident, so a folder someone else wrote (tlparse's output, a home directory) is
never taken for one. Outputs are written beside their target and moved into place when whole (`atomic_dir`,
`atomic_file`); a non-empty target that is not tlindex's is refused.

What a command writes while it runs (a partial output, an ingest's staging folder, a report's scratch database) is a
`TemporaryFolder`: made with mkdtemp, locked (flock) for as long as its command lives, marked, and removed in
`finally` on every way out Python has. A command killed with -9 leaves one that nobody holds: the next command that
makes one of the same kind in the same place removes it (`sweep`), and only such folders.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tlindex.errors import NotOwned
from tlindex.stopping import signals_held

MARKER = ".tlindex-owned"
MARKER_MAX_BYTES = 4096  # a marker is a line of JSON; anything bigger is not one
KINDS = ("report", "export", "trace", "staging", "scratch", "upload")
TEMPFILE_NAME = "[a-z0-9_]{8}"  # what mkdtemp adds to a prefix
UNFINISHED_AFTER_S = 60  # a folder killed while its marker was written counts as dead once this old


def marker_text(kind: str) -> str:
    """What MARKER holds in a folder of this kind (always the same: two reports of one database are identical)."""
    assert kind in KINDS, kind
    return json.dumps({"tlindex": kind}) + "\n"


def mark(folder: Path, kind: str) -> None:
    """Say in `folder` that tlindex made it, as a `kind`."""
    (folder / MARKER).write_text(marker_text(kind), encoding="utf-8")


def owns(folder: Path, kind: str) -> bool:
    """Whether `folder` (itself, not a link to it) holds tlindex's marker of `kind` (a regular file, not a link)."""
    marker = folder / MARKER
    try:
        if folder.is_symlink() or not folder.is_dir():
            return False
        info = marker.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MARKER_MAX_BYTES:
            return False
        return marker.read_text(encoding="utf-8") == marker_text(kind)
    except (OSError, ValueError):
        return False


def _unfinished(folder: Path, kind: str) -> bool:
    """Whether `folder` is one a command killed as it wrote its marker: nothing in it but MARKER, cut short, and a
    minute old (a running command's may be younger). Removing it loses nothing."""
    try:
        if folder.is_symlink() or os.listdir(folder) != [MARKER]:
            return False
        if time.time() - folder.stat().st_mtime < UNFINISHED_AFTER_S:
            return False
        return marker_text(kind).encode().startswith((folder / MARKER).read_bytes())
    except OSError:
        return False


def is_empty(folder: Path) -> bool:
    """Whether `folder` is a folder with nothing in it."""
    return folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir())


def make_dir(path: Path, kind: str) -> Path:
    """Create `path` (which must not exist: FileExistsError) as a folder of tlindex's of `kind`."""
    with signals_held():  # never a folder without its marker
        path.mkdir()
        try:
            mark(path, kind)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
    return path


def remove(folder: Path, kind: str) -> None:
    """Remove a folder tlindex made as a `kind`, with everything in it; anything else is refused (NotOwned)."""
    if not owns(folder, kind):
        raise NotOwned(f"{folder}: not a {kind} folder made by tlindex (it holds no {MARKER} of one): left alone")
    remove_tree(folder)


def remove_tree(folder: Path, held: int | None = None) -> None:
    """A folder removed with everything in it, its MARKER last (killed midway, it is still marked: the next command
    removes it), through the descriptor of the folder opened without following a link (one swapped for a link
    meanwhile is not followed); `held`: the folder as the caller opened and locked it (another one found at its name
    is left alone)."""
    parent = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(folder.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        try:
            if held is not None and not os.path.samestat(os.fstat(held), os.fstat(fd)):
                raise FileExistsError(f"{folder}: another folder than the one locked")
            for name in sorted(os.listdir(fd), key=lambda name: name == MARKER):
                if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    shutil.rmtree(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(folder.name, dir_fd=parent)
    finally:
        os.close(parent)


def _lock(fd: int) -> bool | None:
    """An exclusive lock on an open file or folder, without waiting: True when taken, False when another process
    holds it, None where there is no such lock (no flock, or NFS without its lock daemon)."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None


def in_use(path: Path) -> bool:
    """Whether a running command holds the folder `path` locked (where no lock can be taken, it may: True)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False  # gone
    try:
        return _lock(fd) is not True
    finally:
        os.close(fd)


class TemporaryFolder:
    """A folder of `kind` for one command (in `parent`, else TMPDIR), named `prefix` + mkdtemp's 8 characters: locked
    while the command lives (its forked workers share the lock: a killed one's is free), then marked, and removed by
    `remove` (`with`: on the way out). Those killed commands left with the same prefix are swept first."""

    def __init__(self, prefix: str, parent: Path | None = None, kind: str = "scratch", mode: int | None = None,
                 ours: Callable[[Path], bool] | None = None):
        self.prefix, self.kind = prefix, kind
        folder = Path(parent) if parent is not None else Path(tempfile.gettempdir())
        sweep(folder, prefix, kind, ours)
        self.fd: int | None = None
        try:
            with signals_held():  # locked and marked as it is made: a stop cannot fall in between
                self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=folder))
                self.fd = os.open(self.path, os.O_RDONLY)
                if _lock(self.fd) is False:  # (nobody else knows of it yet)
                    raise OSError(f"{self.path}: locked by another process as it was made")
                mark(self.path, kind)
            if mode is not None:  # mkdtemp's 0700 would hide a report on a shared file server from the others
                self.path.chmod(mode & ~_umask())
        except BaseException:  # a stop held back while it was made comes as the signals are let through: no `with`
            self.remove()      # has begun yet, so nothing else would remove it
            raise

    def remove(self) -> None:
        """The folder gone, if it is still there (a folder moved into place is not), and its lock let go."""
        try:
            if self.fd is not None and self.path.is_dir() and not self.path.is_symlink():
                remove_tree(self.path, held=self.fd)
        except FileNotFoundError:
            pass
        finally:
            self.release()

    def release(self) -> None:
        """Let go of the lock (the folder became an output, or is gone)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> TemporaryFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def named_like(parent: Path | str, prefix: str) -> list[str]:
    """The paths in `parent` named `prefix` and the 8 characters mkdtemp adds (`.r.old-foo.old-x1y2z3w4`, the old
    folder of an output `r.old-foo`, is not one of `.r.old-`'s)."""
    pattern = re.compile(re.escape(prefix) + TEMPFILE_NAME)
    found = glob.glob(os.path.join(glob.escape(str(parent)), f"{glob.escape(prefix)}*"))
    return [path for path in found if pattern.fullmatch(os.path.basename(path))]


def sweep(parent: Path, prefix: str, kind: str, ours: Callable[[Path], bool] | None = None) -> list[Path]:
    """Remove the folders `prefix`* in `parent` that killed commands left: tlindex's of `kind` (or `ours(folder)`),
    or killed as their marker was written, and held by no running command. The paths removed."""
    removed = []
    for found in map(Path, named_like(parent, prefix)):
        if not (ours(found) if ours is not None else owns(found, kind)) and not _unfinished(found, kind):
            continue
        try:
            fd = os.open(found, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone, or a link (never followed)
        try:
            if _lock(fd) is not True:
                continue  # a running command's (or, without locks, perhaps one)
            with suppress(OSError):  # what cannot be removed stays marked: a later command tries again
                remove_tree(found, held=fd)
                removed.append(found)
        finally:
            os.close(fd)
    return removed


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


# --- outputs: written beside, moved into place ------------------------------------------------------

def replaceable(out: Path, kind: str) -> bool:
    """Whether `out` may be replaced by a new folder of `kind`: absent, empty, or one tlindex made as a `kind`."""
    return not out.exists() or is_empty(out) or owns(out, kind)


@contextmanager
def atomic_dir(out: Path, kind: str) -> Iterator[Path]:
    """A folder of `kind` to write `out` into, beside it (`.OUT.partial-*`); moved into place when the `with` ends
    well, an old `out` of tlindex's replaced (anything else at `out` refused: NotOwned); removed on every other way
    out. Killed midway (kill -9), the next command writing `out` removes what it left."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = TemporaryFolder(f".{out.name}.partial-", out.parent, kind, mode=0o777)
    try:
        yield partial.path
        _swap(partial, out, kind)
    finally:
        partial.remove()


def _swap(partial: TemporaryFolder, out: Path, kind: str) -> None:
    """The complete folder becomes `out`; an old `out` (checked again: it may have changed meanwhile) is moved aside
    first (`.OUT.old-*`), then removed. Killed between the two renames, the old one stays there, whole."""
    if out.is_symlink() or (out.exists() and not replaceable(out, kind)):
        raise NotOwned(f"{out}: changed while tlindex wrote its {kind}, and is no longer one tlindex may replace")
    old = TemporaryFolder(f".{out.name}.old-", out.parent, kind, ours=lambda found: _left_aside(found, kind)) \
        if out.exists() else None  # (`out` is there: what killed commands left aside is no one's only copy)
    try:
        with signals_held():  # stopped between the two renames, the old one would be removed as a temporary
            if old is not None:
                out.rename(old.path / kind)
            try:
                partial.path.rename(out)
            except BaseException:
                if old is not None:
                    (old.path / kind).rename(out)
                raise
            partial.release()
    finally:
        if old is not None:
            old.remove()
    # a newer `out` is in place: the old ones killed commands left aside (between their renames) are no one's only copy
    sweep(out.parent, f".{out.name}.old-", kind, ours=lambda found: _left_aside(found, kind))


def _left_aside(folder: Path, kind: str) -> bool:
    """Whether `folder` (named `.OUT.old-*`) is an old `out` a killed command moved aside: tlindex's, holding nothing
    but that `kind` folder (a copy of a report someone named so holds more)."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return False
    inside = folder / kind
    return (owns(folder, kind) and names <= {MARKER, kind}
            and (kind not in names or (inside.is_dir() and not inside.is_symlink())))


def atomic_file(path: Path, pieces: Iterable[bytes], head: bytes, what: str, replace: bool = False) -> None:
    """Write a file piece by piece beside `path` and move it into place when whole: stopped or failing midway, `path`
    is as it was and nothing is left beside it. A file already at `path` that tlindex did not write (it does not
    begin with `head`) is refused unless `replace`; it is checked again just before it is replaced."""
    check_file(path, head, what, replace)
    with TemporaryFolder(f".{path.name}.partial-", path.parent, "export") as partial:
        written = partial.path / path.name
        with open(written, "wb") as out:
            for piece in pieces:
                out.write(piece)
        written.chmod(0o666 & ~_umask())
        check_file(path, head, what, replace)
        os.replace(written, path)


def begins_with(path: Path, head: bytes) -> bool:
    """Whether `path` is a regular file (not a link) that begins with `head`."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        with open(path, "rb") as file:
            return file.read(len(head)) == head
    except OSError:
        return False


def check_file(path: Path, head: bytes, what: str, replace: bool) -> None:
    """NotOwned unless `path` may be written: absent, empty, a file tlindex wrote as `what` (it begins with
    `head`), or `replace` given (a link is then replaced, never what it points to)."""
    if replace or not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_file():
        raise NotOwned(f"{path}: exists and is not a file tlindex wrote (a link, a folder or a device): left alone; "
                       f"--replace replaces it")
    if path.stat().st_size and not begins_with(path, head):
        raise NotOwned(f"{path}: exists and is not a {what} tlindex wrote: left alone; --replace overwrites it")
