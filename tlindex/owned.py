"""What tlindex owns on disk: it removes or replaces only folders it made, and its temporaries on any way out.

A folder tlindex makes to keep (a report, a Parquet export, the trace folder of `tlindex run`, an
ingest's staging folder) holds MARKER, a small file naming tlindex and what the folder is
(`{"tlindex": "report"}`): a name and a content nobody writes by accident, so a folder someone else
wrote (tlparse's output, a home directory, a folder of logs) is never taken for one. Every command
that removes or replaces a folder goes through `remove` or `swap_into_place`, which check it first.

What a command writes before it is complete (a report's or an export's folder beside its destination,
a trace file, an old report moved aside, a temporary database) is a *temporary*: registered here from
the moment it exists until it is moved into place or removed, so whatever way a command ends
(tlindex.stopping), `remove_temporaries` can take away what it left and say whether anything stayed.
A partial output is also locked (flock) by its command while it lives: the partial a killed command (kill -9)
left beside its destination is one nobody holds, and the next command writing there removes it when it is
tlindex's (its marker, or a file's first bytes), or when it was killed as it wrote the folder's marker
(`unfinished`: nothing in it but an empty or cut marker).

A single file tlindex writes (a chromium trace) is tlindex's when it begins with what tlindex writes first
(`head`): any other file already at its path is refused without `replace` (`check_file`).
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

from tlindex.errors import NotOwned  # noqa: F401 (raised here, imported from here by callers)
from tlindex.stopping import deferred_signals

MARKER = ".tlindex-owned"
MARKER_MAX_BYTES = 4096  # a marker is a line of JSON; anything bigger is not one
KINDS = ("report", "export", "trace", "staging", "scratch")
_BY_DESCRIPTOR = {os.open, os.stat, os.unlink, os.rmdir} <= os.supports_dir_fd  # remove_tree's calls (not on Windows)
TEMPFILE_SUFFIX = "[a-z0-9_]{8}"  # what tempfile adds to a prefix to name a temporary (its _RandomNameSequence)
UNFINISHED_AFTER_S = 60  # a folder without its whole marker counts as a killed command's once this old (`unfinished`)

_temporaries: dict[Path, None] = {}  # this process's temporaries that may still exist (insertion order)
_locks: dict[Path, int] = {}  # partial outputs and scratch folders this process holds locked (their descriptors)


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


def unfinished(folder: Path, kind: str, besides: frozenset[str] = frozenset()) -> bool:
    """Whether `folder` is one tlindex was making as a `kind` when it was killed (kill -9) as it wrote its marker:
    nothing in it but MARKER, empty or cut short (and any of the names `besides`: a staging folder's lock file), and
    older than UNFINISHED_AFTER_S (a running command's may be that young). Removing it loses nothing. (A folder
    killed before its marker existed is empty: it could be anyone's, a mount point, and stays.)"""
    try:
        if folder.is_symlink() or not folder.is_dir() or not {MARKER} <= set(os.listdir(folder)) <= {MARKER, *besides}:
            return False
        if time.time() - folder.stat().st_mtime < UNFINISHED_AFTER_S:
            return False
        whole, marker = marker_text(kind).encode("utf-8"), folder / MARKER
        info = marker.lstat()
        return stat.S_ISREG(info.st_mode) and info.st_size < len(whole) and whole.startswith(marker.read_bytes())
    except OSError:
        return False


def left_by_a_killed(folder: Path, kind: str, besides: frozenset[str] = frozenset()) -> bool:
    """Whether `folder` may be a killed command's `kind` to remove (if nobody holds it): tlindex's, or unfinished
    (with the names `besides` beside its marker)."""
    return owns(folder, kind) or unfinished(folder, kind, besides)


def is_empty(folder: Path) -> bool:
    """Whether `folder` is a folder with nothing in it."""
    return folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir())


def make_dir(path: Path, kind: str) -> Path:
    """Create `path` (which must not exist: FileExistsError) as a folder of tlindex's of `kind`."""
    with deferred_signals():  # never a folder without its marker
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


def remove_tree(folder: Path, ignore_errors: bool = False, held: int | None = None) -> None:
    """A folder removed with everything in it, its MARKER last: a command killed midway (shutil.rmtree goes in the
    folder's listing order, which can put the marker first) leaves a folder still marked as tlindex's, which the
    next command removes, not an unmarked one that nothing would. The folder is opened without following a link and
    emptied through that descriptor, as shutil.rmtree does: one swapped for a link meanwhile (another user's, in a
    shared TMPDIR) is not followed. `held`: the folder as the caller opened and locked it (another one found at its
    name is left alone). With `ignore_errors`, what cannot be removed stays, marked: a later command tries again."""
    try:
        if not _BY_DESCRIPTOR:
            shutil.rmtree(folder)
            return
        parent = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _empty(parent, folder, held)
            os.rmdir(folder.name, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError:
        if not ignore_errors:
            raise


def _empty(parent: int, folder: Path, held: int | None) -> None:
    """remove_tree's first part: every entry of `folder` (in the folder open as `parent`) removed, MARKER last."""
    fd = os.open(folder.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    try:
        if held is not None and _identity(os.fstat(held)) != _identity(os.fstat(fd)):
            raise FileExistsError(f"{folder}: another folder than the one locked")
        for name in os.listdir(fd):
            if name != MARKER and stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                shutil.rmtree(name, dir_fd=fd)
            elif name != MARKER:
                os.unlink(name, dir_fd=fd)
        with suppress(FileNotFoundError):
            os.unlink(MARKER, dir_fd=fd)
    finally:
        os.close(fd)


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def named_like(parent: Path | str, prefix: str) -> list[str]:
    """The paths in `parent` named `prefix` and the 8 characters tempfile adds: the temporaries tlindex makes there
    with that prefix look so, and a longer name that merely begins so (`.r.old-foo.old-x1y2z3w4`, the old folder of
    an output `r.old-foo`, is not one of `.r.old-`'s) does not."""
    pattern = re.compile(re.escape(prefix) + TEMPFILE_SUFFIX)
    found = glob.glob(os.path.join(glob.escape(str(parent)), f"{glob.escape(prefix)}*"))
    return [path for path in found if pattern.fullmatch(os.path.basename(path))]


# --- temporaries ----------------------------------------------------------------------------------

def temporary_dir(prefix: str, parent: Path | None = None, kind: str | None = None) -> Path:
    """A new folder (in `parent`, else the temporary folder), registered until `discard`ed or `keep`t; marked
    when it will become a folder of `kind`."""
    with deferred_signals():  # registered (and marked) as it is made: a stop cannot fall in between
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        _temporaries[folder] = None
        if kind is not None:
            mark(folder, kind)
    return folder


def temporary_file(prefix: str, parent: Path) -> Path:
    """A new empty file in `parent`, registered until `discard`ed or `keep`t."""
    with deferred_signals():  # registered as it is made: a stop cannot fall in between
        handle, name = tempfile.mkstemp(prefix=prefix, dir=parent)
        _temporaries[Path(name)] = None
    os.close(handle)
    return Path(name)


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A scratch folder (scratch_dir) for the length of a `with`, gone after it."""
    folder = scratch_dir(prefix)
    try:
        yield folder
    finally:
        discard(folder)


def scratch_dir(prefix: str, sweep: bool = True) -> Path:
    """A temporary folder in the temporary folder (TMPDIR) for one command (a report's database), locked while the
    command lives (its forked processes share the lock) and marked. With `sweep`, the ones killed commands left are
    removed first (remove_dead_scratch); without, the caller does it while it waits for something else."""
    if sweep:
        remove_dead_scratch(prefix)
    return _held_dir(prefix, None, "scratch")


def remove_dead_scratch(prefix: str) -> list[Path]:
    """Remove the scratch folders (`prefix`*) in TMPDIR that killed commands left (kill -9, when no way out runs),
    and only those: tlindex's (or unfinished), and that nobody holds. (It lists TMPDIR: ~1 ms per 1,000 entries.)"""
    parent = tempfile.gettempdir()
    return _remove_unheld(named_like(parent, prefix), lambda found: left_by_a_killed(found, "scratch"))


def keep(path: Path) -> None:
    """A temporary that became something to keep (moved into place): no longer removed on the way out."""
    _temporaries.pop(path, None)
    _release(path)


def _release(path: Path) -> None:
    """Let go of the lock this process holds on a partial output (it became the output, or is gone)."""
    fd = _locks.pop(path, None)
    if fd is not None:
        os.close(fd)


def discard(path: Path) -> bool:
    """Remove a temporary (a folder with everything in it, or a file) if it is still there; whether it is gone
    (one that could not be removed stays registered, and `remove_temporaries` names it)."""
    try:
        if path.is_dir() and not path.is_symlink():
            remove_tree(path)
        else:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    _temporaries.pop(path, None)
    _release(path)
    return True


def remove_temporaries() -> list[Path]:
    """Remove every temporary of this process still there (newest first); the paths that could not be removed."""
    return [path for path in reversed(list(_temporaries)) if not discard(path)]


def temporary_note(path: Path, text: str) -> Path:
    """Write a small file whole at `path` (replacing what is there) that lasts as long as this command: a
    temporary, removed on every way out but kill -9, so whoever reads one checks that its writer still runs."""
    with deferred_signals():  # registered before it exists: a stop cannot leave it unregistered
        _temporaries[path] = None
    try:
        write_whole(path, [text.encode("utf-8")])
    except BaseException:  # not written: what is at `path` is not this command's to remove
        _temporaries.pop(path, None)
        raise
    return path


def write_whole(path: Path, pieces: Iterable[bytes], head: bytes | None = None,
                check: Callable[[], None] | None = None) -> None:
    """Write a file piece by piece beside `path` and move it into place when whole: stopped or failing midway,
    `path` is as it was and nothing is left beside it. With `head` (what the file begins with), the partials a
    killed writer left beside `path` are removed first; `check()` runs just before the file is moved into place
    (it raises to leave `path` as it is)."""
    with _written_beside(path, pieces, head, 0o666) as partial:  # the trace gets a new file's permissions
        with deferred_signals():
            if check is not None:
                check()
            os.replace(partial, path)
            keep(partial)


@contextmanager
def _written_beside(path: Path, pieces: Iterable[bytes], head: bytes | None, mode: int) -> Iterator[Path]:
    """`pieces` written whole to a partial file beside `path` (with `mode` less the umask: mkstemp's is 0600), held
    locked while the caller moves or links it into place (no other writer takes it for a killed one's), gone after.
    With `head`, the partials killed writers left (they begin with it) are removed first."""
    if head is not None:
        remove_dead_partials(path, lambda found: _begins_with(found, head))
    partial = temporary_file(f".{path.name}.partial-", path.parent)
    try:
        partial.chmod(mode & ~_umask())
        with open(partial, "wb") as out:
            _lock(out.fileno())  # released when the file is closed, or the command dies
            for piece in pieces:
                out.write(piece)
            out.flush()
            yield partial
    finally:
        discard(partial)  # still there only when it was not moved into place (a link's name, when linked)


NEW_FILE_MODE = 0o644  # (less the umask) what SQLite gives a database it creates, and a new file tlindex makes


def write_new(path: Path, pieces: list[bytes], head: bytes) -> bool:
    """Write a file that does not exist yet whole, then link it into place at `path`, never over a file that appeared
    there meanwhile: whether it was (False too where the file system makes no hard links). On Linux the file has no
    name until it is linked (O_TMPFILE): killed at any point, it leaves nothing. Elsewhere it is written beside `path`
    first; the partials a killed writer left there (they begin with `head`) are removed by the next."""
    fd = _unnamed_file(path.parent)
    if fd is not None:
        try:
            with open(fd, "wb", closefd=False) as out:
                for piece in pieces:
                    out.write(piece)
            folder = os.open(path.parent, os.O_RDONLY)
            try:  # linkat following /proc's link to the open file (os.link without a dir_fd calls link, which does not)
                os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=folder, follow_symlinks=True)
            finally:
                os.close(folder)
            return True
        except FileExistsError:
            return False
        except OSError:
            pass  # no /proc: written beside it, as elsewhere
        finally:
            os.close(fd)
    return _write_beside_and_link(path, pieces, head)


def _unnamed_file(folder: Path) -> int | None:
    """A new file without a name in `folder` (Linux's O_TMPFILE), open for writing; None where there is none."""
    if not hasattr(os, "O_TMPFILE"):
        return None
    try:
        return os.open(folder, os.O_TMPFILE | os.O_WRONLY, NEW_FILE_MODE)
    except OSError:  # a file system without it (EOPNOTSUPP), or an old kernel (EISDIR)
        return None


def _write_beside_and_link(path: Path, pieces: list[bytes], head: bytes) -> bool:
    with _written_beside(path, pieces, head, NEW_FILE_MODE) as partial:
        try:
            os.link(partial, path)
        except OSError:  # a file there now (FileExistsError), or no hard links here
            return False
        return True


def _begins_with(path: Path, head: bytes) -> bool:
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
    if path.stat().st_size and not _begins_with(path, head):
        raise NotOwned(f"{path}: exists and is not a {what} tlindex wrote: left alone; --replace overwrites it")


def _lock(fd: int) -> bool | None:
    """Take an exclusive lock on an open file or folder without waiting: True when taken, False when another
    process holds it, None where there is no such lock (no flock, or a file system that refuses it: NFS without
    its lock daemon)."""
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


def remove_dead_partials(out: Path, ours: Callable[[Path], bool]) -> list[Path]:
    """Remove the partial outputs (`.OUT.partial-*`) beside `out` that are tlindex's (`ours`) and that no running
    command holds (a killed one's): the paths removed."""
    return _remove_unheld(named_like(out.parent, f".{out.name}.partial-"), ours)


def _remove_unheld(paths: Iterable[str], ours: Callable[[Path], bool]) -> list[Path]:
    """Remove those of `paths` that are tlindex's (`ours`) and that no running command holds locked (a killed
    one's), nor this one: the paths removed."""
    removed = []
    for found in map(Path, paths):
        if found in _temporaries or not ours(found):
            continue
        try:
            fd = os.open(found, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue  # gone, or a link (never followed)
        try:
            if _lock(fd) is not True:
                continue  # a running command's (or, without locks, perhaps one)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                remove_tree(found, ignore_errors=True, held=fd)
            else:
                found.unlink(missing_ok=True)
            removed.append(found)
        finally:
            os.close(fd)
    return removed


# --- a folder written beside its destination, then swapped in -------------------------------------

def new_partial(out: Path, kind: str) -> Path:
    """A fresh folder of `kind` beside `out` to write it into, with the permissions a new folder gets here
    (mkdtemp's are 0700: a report on a shared file server would be unreadable to others). The partials killed
    commands left beside `out` go first."""
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_partials(out, lambda found: left_by_a_killed(found, kind))
    partial = _held_dir(f".{out.name}.partial-", out.parent, kind)
    partial.chmod(0o777 & ~_umask())
    return partial


def _held_dir(prefix: str, parent: Path | None, kind: str) -> Path:
    """A temporary folder of `kind` in `parent` (else TMPDIR), locked while this command lives (its forked workers share the lock:
    a killed one's is free), then marked: no other command takes a folder it sees marked for a dead one's."""
    with deferred_signals():
        folder = temporary_dir(prefix, parent)
        fd = os.open(folder, os.O_RDONLY)
        _locks[folder] = fd
        if _lock(fd) is False:  # nobody else knows of it yet (None: no locks here, as with flock missing)
            raise OSError(f"{folder}: locked by another process as it was made")
        mark(folder, kind)
    return folder


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def replaceable(out: Path, kind: str) -> bool:
    """Whether `out` may be replaced by a new folder of `kind`: absent, empty, or one tlindex made as a `kind`."""
    return not out.exists() or is_empty(out) or owns(out, kind)


def swap_into_place(partial: Path, out: Path, kind: str) -> None:
    """The complete folder becomes `out`; an old `out` (checked again: it may have changed since the command
    started) stays until then, and is removed after, with those killed commands left aside."""
    if out.is_symlink() or (out.exists() and not replaceable(out, kind)):
        raise NotOwned(f"{out}: changed while tlindex wrote its {kind}, and is no longer one tlindex may replace")
    old = None
    with deferred_signals():  # stopped between the two renames, the old one would be lost with the temporaries
        if out.exists():
            old = _held_dir(f".{out.name}.old-", out.parent, kind)  # marked: killed while it is removed, it is
            out.rename(old / kind)  # removed by the next command that puts a new `out` in place
        try:
            partial.rename(out)
        except BaseException:
            if old is not None:
                (old / kind).rename(out)
            raise
        keep(partial)
    if old is not None:
        discard(old)
    # a newer `out` is in place: the old ones killed commands left aside (between their renames, or while removing
    # them) are no one's only copy any more
    _remove_unheld(named_like(out.parent, f".{out.name}.old-"), lambda found: _left_aside(found, kind))


def _left_aside(folder: Path, kind: str) -> bool:
    """Whether `folder` (named `.OUT.old-*`) is an old `out` that a killed command moved aside: tlindex's (or its
    marker cut), holding nothing but that `kind` folder (a copy of a report someone named so holds more)."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return False
    inside = folder / kind
    return (names <= {MARKER, kind} and (kind not in names or (inside.is_dir() and not inside.is_symlink()))
            and left_by_a_killed(folder, kind))
