"""A team's server (`tlindex serve --uploads`): logs posted over HTTP, spooled to disk, ingested one at a time, each
becoming a run with a link.

The spool is a folder beside the database, `.traces.db.uploads/`. A body (a log, a `.gz`, or a `.tar`, `.tar.gz` or
`.zip` of a TORCH_TRACE folder) is streamed into a folder of it of its own (`.receiving-*`: locked while its request
lives, removed on every way out), hashed as it arrives and bounded by `Limits.max_upload` (`TooBig`: 413). Whole, the
folder is renamed to the body's SHA-256 and the upload recorded queued (tlindex.ingest.uploads): the same bytes posted
twice are one upload. One thread of the server (`Uploader`) takes the queue in order and ingests each upload in a child
process (`python -m tlindex.uploads DB UPLOAD`, `ingest_upload`): the archive unpacked into the folder's `logs/`
(members checked: no absolute path, no `..`, no link or device, bounded in count and bytes), the logs ingested as one
run, the run's facts kept, retention applied (the gate is judged as the upload's status is read: the same bytes
posted again with other bounds are judged by those). Readers are answered all along (SQLite's
WAL), and a run appears whole or not at all (tlindex.Database.ingest).

Killed with -9: the next server removes the `.receiving-*` folders nobody holds (a partial upload is gone), records a
folder renamed but not yet recorded, and queues again an upload whose ingest was cut off: the files it ingested before
are skipped and it goes on in the run they made, so every complete upload becomes its run exactly once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from tlindex import owned
from tlindex.errors import TlindexError
from tlindex.ingest.discover import is_log_name
from tlindex.stopping import signals_held

ARCHIVES = (".tar", ".tar.gz", ".tgz", ".zip")
CHUNK = 1 << 16


@dataclass(frozen=True)
class Limits:
    """What an upload may be: its bytes as posted, its members and their bytes once unpacked, the queue's length."""

    max_upload: int = 1 << 30        # bytes of a body (413 past it)
    max_files: int = 10_000          # members of an archive
    max_unpacked: int = 16 << 30     # bytes of an archive's members (a compression bomb stops here)
    queue: int = 64                  # uploads queued at once (503 and Retry-After past it)


@dataclass(frozen=True)
class Retention:
    """Which runs a server keeps: the newest `keep_runs`, those of the last `keep_days` (None: no bound)."""

    keep_runs: int | None = None
    keep_days: float | None = None


class Refused(TlindexError):
    """An upload that cannot be taken: the message says why; `status` is the HTTP answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def spool_of(db_path: Path) -> Path:
    """The spool folder of a database: beside it, hidden."""
    real = Path(db_path).resolve()
    return real.parent / f".{real.name}.uploads"


class Receiving:
    """One body arriving: written into a locked folder of the spool, hashed and counted as it comes."""

    def __init__(self, spool: Path, limits: Limits):
        if not spool.is_dir():
            try:
                owned.make_dir(spool, "upload")  # marked as tlindex's, as every folder of an upload in it
            except FileExistsError:  # (another request made it meanwhile)
                pass
        self.spool, self.limits = spool, limits
        self.folder = owned.TemporaryFolder(".receiving-", spool, "upload")
        self.body = open(self.folder.path / "body", "wb")
        self.hash, self.size = hashlib.sha256(), 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limits.max_upload:
            raise Refused(f"the upload is larger than {self.limits.max_upload:,} bytes, the most this server takes "
                          f"(tlindex serve --max-upload)", 413)
        self.hash.update(chunk)
        self.body.write(chunk)

    def finish(self, meta: dict) -> str:
        """The body whole: its folder renamed to its digest (with what the client said of it beside it), unless the
        same bytes are there already; its digest."""
        self.body.close()
        digest = self.hash.hexdigest()
        (self.folder.path / "meta.json").write_text(json.dumps({**meta, "bytes": self.size}))
        with signals_held():
            try:
                self.folder.path.rename(self.spool / digest)
            except OSError:  # posted before (or at the same time): that folder is the upload's
                pass
        return digest

    def discard(self) -> None:
        """What arrived removed (a client that went away, a refused body, a full disk)."""
        self.body.close()
        self.folder.remove()


def recover(db, spool: Path) -> list[int]:
    """What a killed server left: the receiving folders nobody holds removed, the uploads renamed but not recorded
    recorded, those a killed ingest was doing queued again; the uploads queued again."""
    from tlindex.answers.uploads import recorded
    from tlindex.ingest.uploads import record, requeue_interrupted

    if not spool.is_dir():
        return []
    owned.sweep(spool, ".receiving-", "upload")
    known = recorded(db.conn)
    for folder in sorted(spool.iterdir()):
        if len(folder.name) == 64 and folder.name not in known and (folder / "meta.json").is_file():
            record(db.conn, folder.name, json.loads((folder / "meta.json").read_text()))
    return requeue_interrupted(db.conn)


# --- unpacking ------------------------------------------------------------------------------------

def unpack(body: Path, name: str, into: Path, limits: Limits) -> list[Path]:
    """The logs of an upload into `into`: an archive's members (each checked, none outside `into`), or the body itself
    as a log (or `.gz`) of its name. The paths written; Refused for a member that is a link, a device, or outside."""
    into.mkdir(exist_ok=True)
    lowered = name.lower()
    if lowered.endswith((".tar", ".tar.gz", ".tgz")):
        return _untar(body, into, limits)
    if lowered.endswith(".zip"):
        return _unzip(body, into, limits)
    target = into / _safe_name(PurePosixPath(name).name or "upload.log")
    if not is_log_name(target.name):  # a log by whatever name it came: ingested as ingest does (a .gz inflated)
        target = target.with_name(target.name[:-3] + ".log.gz" if target.name.endswith(".gz") else target.name + ".log")
    os.replace(body, target)  # (the same file system: no copy)
    return [target]


def _safe_name(name: str) -> str:
    name = "".join(c if c.isprintable() and c not in "/\\" else "_" for c in name).strip(". ") or "upload.log"
    return name[:200]


def _member_path(into: Path, name: str) -> Path:
    """Where a member goes: below `into`, or Refused (an absolute path, `..`, a name that is nothing)."""
    parts = PurePosixPath(name.replace("\\", "/"))
    if parts.is_absolute() or ".." in parts.parts or not [p for p in parts.parts if p not in ("", ".")]:
        raise Refused(f"the archive's member {name[:200]!r} would be written outside its folder: refused")
    return into.joinpath(*[_safe_name(p) for p in parts.parts if p not in ("", ".")])


class _Budget:
    """The members and bytes an archive may unpack to."""

    def __init__(self, limits: Limits):
        self.limits, self.files, self.bytes = limits, 0, 0

    def member(self) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise Refused(f"the archive holds more than {self.limits.max_files:,} files, the most an upload may")

    def grow(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.limits.max_unpacked:
            raise Refused(f"the archive unpacks to more than {self.limits.max_unpacked:,} bytes, the most an upload "
                          f"may (a compression bomb?)")


def _write_member(source, path: Path, budget: _Budget) -> Path:
    """A member's bytes into a new file at `path` (its folders made), counted against the budget."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            budget.grow(len(chunk))
            out.write(chunk)
    return path


def _untar(body: Path, into: Path, limits: Limits) -> list[Path]:
    budget, written = _Budget(limits), []
    try:
        with tarfile.open(body, mode="r:*") as archive:
            for member in archive:
                if member.isdir():
                    continue
                if not member.isreg():
                    raise Refused(f"the archive's member {member.name[:200]!r} is a link or a device: refused")
                budget.member()
                path = _member_path(into, member.name)
                source = archive.extractfile(member)
                written.append(_write_member(source, path, budget))
    except (tarfile.TarError, EOFError, OSError) as error:
        if isinstance(error, FileExistsError):
            raise Refused(f"the archive names one file twice ({error.filename}): refused") from None
        raise Refused(f"the archive cannot be read ({error})") from None
    return written


def _unzip(body: Path, into: Path, limits: Limits) -> list[Path]:
    budget, written = _Budget(limits), []
    try:
        with zipfile.ZipFile(body) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                kind = (info.external_attr >> 16) & 0o170000
                if kind and not stat.S_ISREG(kind):
                    raise Refused(f"the archive's member {info.filename[:200]!r} is a link or a device: refused")
                budget.member()
                path = _member_path(into, info.filename)
                with archive.open(info) as source:
                    written.append(_write_member(source, path, budget))
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as error:
        if isinstance(error, FileExistsError):
            raise Refused(f"the archive names one file twice ({error.filename}): refused") from None
        raise Refused(f"the archive cannot be read ({error})") from None
    return written


# --- in the server: the queue, one ingest at a time ----------------------------------------------------------

@dataclass
class Uploader:
    """The server's queue: a thread that ingests the queued uploads one after another, each in a child process; what
    each child said of its progress, for the status pages."""

    db_path: Path
    limits: Limits = field(default_factory=Limits)
    retention: Retention = field(default_factory=Retention)
    progress: dict[int, tuple[int, int]] = field(default_factory=dict)  # an ingesting upload's bytes done, of all
    wake: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    child: subprocess.Popen | None = None

    @property
    def spool(self) -> Path:
        return spool_of(self.db_path)

    def start(self) -> None:
        """What a killed server left recovered, then the queue's thread started."""
        from tlindex.database import Database

        with Database(self.db_path, write=True) as db:
            recover(db, self.spool)
        threading.Thread(target=self._loop, name="tlindex-uploads", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        if self.child is not None and self.child.poll() is None:
            self.child.kill()  # its upload is queued again by the next server (recover)

    def _loop(self) -> None:
        """The queue, in order, until the server stops, on a connection of the thread's own; an error of the
        thread's own is logged, never its end."""
        import logging

        from tlindex.answers.uploads import queued
        from tlindex.database import Database

        db = Database(self.db_path, write=True)
        try:
            while not self.stopped.is_set():
                try:
                    waiting = queued(db.conn)
                    if waiting:
                        self._ingest(db, waiting[0]["id"])
                        continue
                except Exception:  # (a disk that failed a read, say: tried again in a moment)
                    logging.getLogger(__name__).exception("tlindex: the uploads' queue")
                self.wake.wait(1.0)
                self.wake.clear()
        finally:
            db.close()

    def _ingest(self, db, upload: int) -> None:
        """One upload ingested by a child process, whose progress lines are read as they come."""
        self.progress[upload] = (0, 0)
        self.child = subprocess.Popen(
            [sys.executable, "-m", "tlindex.uploads", str(self.db_path), str(upload), json.dumps(asdict(self.limits)),
             json.dumps(asdict(self.retention))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        last = ""
        for line in self.child.stdout:
            words = line.split()
            if len(words) == 3 and words[0] == "progress":
                self.progress[upload] = (int(words[1]), int(words[2]))
            elif line.strip():
                last = line.strip()[:300]  # what it said last, should it die
        self.child.wait()
        if not self.stopped.is_set():
            _ended(db, upload, f"its ingest ended abruptly (exit {self.child.returncode}){': ' + last if last else ''}")
        self.progress.pop(upload, None)


def _ended(db, upload: int, message: str) -> None:
    """An upload whose child ended: failed with `message` if the child did not say how it ended (it died)."""
    from tlindex.answers.uploads import upload as upload_row
    from tlindex.ingest.uploads import set_state

    row = upload_row(db.conn, upload)
    if row is not None and row["state"] in ("queued", "ingesting"):
        set_state(db.conn, upload, "failed", message)


# --- in the child: one upload ingested -----------------------------------------------------------------------

def ingest_upload(db_path: Path, upload_id: int, limits: Limits, retention: Retention) -> int:
    """The whole of one upload's ingest: unpacked, ingested as one run (the run an earlier, cut off ingest of it made,
    if any), its facts kept, retention applied, its state saved; the exit code."""
    from tlindex.answers.uploads import upload
    from tlindex.database import Database
    from tlindex.ingest.uploads import set_state

    with Database(db_path, write=True) as db:
        row = upload(db.conn, upload_id)
        if row is None or row["state"] == "done":
            return 0
        set_state(db.conn, upload_id, "ingesting")
        folder = spool_of(db_path) / row["digest"]
        logs = folder / "logs"
        try:
            if not folder.is_dir():
                raise Refused(f"its files are gone from the spool ({folder})")
            if not logs.is_dir() or not any(logs.iterdir()):
                if logs.exists():
                    shutil.rmtree(logs)
                unpack(folder / "body", row["name"] or "upload.log", logs, limits)
        except Refused as error:
            set_state(db.conn, upload_id, "failed", str(error))
            return 3
        run = _ingested(db, row, logs)
        if run is None:
            set_state(db.conn, upload_id, "failed", "the upload holds no log that a run could be made of")
            return 3
        set_state(db.conn, upload_id, "done", _said(db, run), run)
        prune(db, retention)
    return 0


def _ingested(db, row: dict, logs: Path) -> int | None:
    """The upload's logs ingested as one run (continuing the run a cut off ingest made of them); its id."""
    from tlindex.store.redact import redact_text, storable

    earlier = db.runs_of([logs])
    if earlier:  # a killed ingest's: its files are skipped, the rest goes into the same run
        label, unique = db.run(earlier[0])["label"], False
    else:
        wanted = row["label"] or PurePosixPath(row["name"] or "upload").name.split(".")[0] or "upload"
        label, unique = redact_text(storable(wanted))[:200], True
    db.ingest([logs], label, unique_label=unique, label_source="upload",
              progress=lambda done, total: print(f"progress {done} {total}", flush=True))
    runs = db.runs_of([logs])
    if not runs:
        return None
    facts = _facts(row["facts"])
    if facts:
        db.record_facts(runs[0], facts)
    return runs[0]


def _facts(posted: dict) -> dict:
    """The run facts a client posted, as the run keeps them: redacted again here, only the known ones."""
    from tlindex.store.redact import redact_text, storable, stored_command

    facts = {}
    command = posted.get("command")
    if isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        facts["command"] = json.dumps(stored_command(command))
    for name in ("exit_code", "duration_s"):
        if isinstance(posted.get(name), (int, float)) and not isinstance(posted.get(name), bool):
            facts[name] = posted[name]
    for name in ("signal", "started", "host", "user", "cwd"):
        if isinstance(posted.get(name), str):
            facts[name] = redact_text(storable(posted[name]))[:400]
    return facts


def _said(db, run: int) -> str:
    """The run's findings in one line."""
    from tlindex.answers.findings import problems

    found = problems(db.findings(run))
    if not found:
        return "nothing to report"
    return f"{len(found)} problem{'s' * (len(found) != 1)}; the worst: {found[0].text}"


def prune(db, retention: Retention) -> list[int]:
    """The runs past the retention removed, with their uploads' folders (a baseline or a run someone named stays)."""
    from tlindex.answers.uploads import of_runs
    from tlindex.ingest.uploads import forget, prunable

    if retention.keep_runs is None and retention.keep_days is None:
        return []
    doomed = prunable(db.conn, retention.keep_runs, retention.keep_days)
    if not doomed:
        return []
    digests = of_runs(db.conn, doomed)
    db.remove_runs([str(run) for run in doomed])
    forget(db.conn, digests)
    for digest in digests:
        folder = spool_of(db.path) / digest
        if owned.owns(folder, "upload"):
            owned.remove(folder, "upload")
    return doomed


if __name__ == "__main__":
    sys.exit(ingest_upload(Path(sys.argv[1]), int(sys.argv[2]), Limits(**json.loads(sys.argv[3])),
                           Retention(**json.loads(sys.argv[4]))))
