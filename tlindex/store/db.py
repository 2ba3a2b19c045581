"""Open a tlindex database and bring its schema up to date."""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import sys
import time
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from typing import Callable, Iterator

from tlindex.errors import DatabaseError
from tlindex.store import redact
from tlindex.store.compression import register
from tlindex.store.limits import connect
from tlindex.store.resources import current_schema, schema_files
from tlindex.store.user_cache import cache_folder

MIGRATIONS_TABLE = "_tlindex_migrations"
SQLITE_HEADER = b"SQLite format 3\x00"
WAL_FORMAT = b"\x02\x02"  # the header's file format write and read versions (bytes 18 and 19) of a WAL database
BUSY_TIMEOUT_S = 600  # concurrent ingests wait for each other's merges (each one transaction)
# What a migration (by its name without its number) says once, on stderr, from the rows each of its statements
# changed (None: nothing to say).
NOTICES = {"redacted_secrets": redact.migration_notice}
# What a migration (by its name without its number) derives beyond SQL, in its transaction, from what a database
# stores: a step of the layer whose code it runs, registered there (tlindex.ingest.rederive, loaded with
# tlindex.ingest); it returns what to say once on stderr (None: nothing).
AFTER_MIGRATIONS: dict[str, Callable[[sqlite3.Connection], str | None]] = {}
STEPS = ("derived_by_normalizers",)  # the migrations that have such a step


def disk_full(error: BaseException) -> bool:
    """Whether an error is the disk (or the file system's quota) being full, as the OS or SQLite says it."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(error, sqlite3.OperationalError) and "disk is full" in str(error)


def disk_trouble(error: BaseException) -> bool:
    """Whether an error is the disk's or the file system's (said in one line), not a bug (a traceback)."""
    if isinstance(error, sqlite3.OperationalError):  # SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY
        return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in (13, 10, 14, 8)
    return isinstance(error, OSError) and error.errno != errno.EPIPE  # a closed pipe is click's own to handle


def disk_message(error: BaseException, what_stays: str = "what was written before stays whole, and what this "
                 "command was writing was removed; free some space and run it again", intact: bool = False) -> str:
    """The one line a command says of the disk's error: what it said, and, when it is full (or whatever it is, when
    the command knows its database `intact`), that nothing was lost and `what_stays`."""
    filename = getattr(error, "filename", None)
    said = f"{filename}: {error.strerror}" if filename and getattr(error, "strerror", None) else str(error)
    if disk_full(error):
        return f"the disk is full ({said}); nothing was lost: {what_stays}"
    return f"cannot write ({said}); nothing was lost: {what_stays}" if intact else said


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the write lock first (waiting for other writers), so that
    processes writing one database at once never fail on a lock upgrade; rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
            conn.execute("ROLLBACK")
        raise


@lru_cache(maxsize=4)  # schema/current.sql is split once per process
def _statements(sql: str) -> tuple[str, ...]:
    """The statements of a schema file, whole (comments stay with the statement they precede)."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if (";" in line or "*/" in line) and sqlite3.complete_statement(current):  # only such a line can end one
            statements.append(current)
            current = ""
    return tuple(statements)


def _applied(conn: sqlite3.Connection) -> set[str]:
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (MIGRATIONS_TABLE,)).fetchone()
    return {row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")} if exists else set()


def apply_schema(conn: sqlite3.Connection, whole: bool = True, private: bool = False) -> list[str]:
    """Apply every schema/NNN_*.sql migration not yet applied; return the names applied.

    Each file is one migration, recorded in _tlindex_migrations, so a database
    made by an older tlindex is upgraded in place the next time it is opened. A
    new (empty) database is given schema/current.sql instead, the whole schema in
    one script, and every migration it stands for is recorded as applied (then any
    later one in turn); a new private database (in memory, or a scratch file
    without a journal, or one the caller says is `private`: a report's scratch
    database) is a copy of one made so, once per process. With
    `whole=False` a new database is given the migrations one by one. The check and
    the migrations run under one write lock, so processes opening a new database
    at once apply each migration exactly once. A database that records a
    migration this tlindex does not know was written by a newer one: refused.
    """
    register(conn)  # migration 004 compresses with sqlar_compress
    redact.register(conn)  # migration 016 redacts stored commands and labels
    files = schema_files()
    known = {path.stem for path in files}
    done = _applied(conn)
    if done - known:
        raise DatabaseError(f"written by a newer tlindex (schema migrations {', '.join(sorted(done - known))} "
                            f"are unknown to this one); upgrade tlindex to use it")
    if known <= done:
        return []
    copied = []
    if whole and not done and (private or _private(conn)) and _empty(conn):
        schema_image().backup(conn)  # its pages copied: a fraction of the time the script takes
        copied = sorted(_applied(conn))
        if known <= set(copied):
            return copied
    return copied + _migrate(conn, files, whole)


def _migrate(conn: sqlite3.Connection, files: list[Path], whole: bool) -> list[str]:
    """The migrations a database lacks applied under one write lock (schema/current.sql for a new one, when
    `whole`); the names applied."""
    applied, notices = [], []
    with immediate(conn):
        conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT)")
        done = _applied(conn)  # again, now that no one else can be applying them
        if whole and not done and _empty(conn):
            applied = _apply_whole(conn, [path.stem for path in files])
            done = set(applied)
        for path in files:
            if path.stem in done:
                continue
            changes = []
            for statement in _statements(path.read_text()):
                before = conn.total_changes
                conn.execute(statement)
                changes.append(conn.total_changes - before)
            _record(conn, [path.stem])
            applied.append(path.stem)
            notice = NOTICES.get(path.stem.partition("_")[2])
            said = notice(changes) if notice else _step(conn, path.stem)
            notices += [said] if said else []
    if notices:  # said once: the migrations are recorded as applied in the transaction just committed
        where = next((file for _, name, file in conn.execute("PRAGMA database_list") if name == "main"), "")
        for said in notices:
            sys.stderr.write(f"tlindex: {where or 'database'}: {said}\n")
    return applied


def _step(conn: sqlite3.Connection, stem: str) -> str | None:
    """A migration's step beyond SQL (AFTER_MIGRATIONS), run; refused when it is not loaded and there is data."""
    name = stem.partition("_")[2]
    if name not in STEPS:
        return None
    step = AFTER_MIGRATIONS.get(name)
    if step is None and conn.execute("SELECT 1 FROM envelopes LIMIT 1").fetchone():
        raise DatabaseError(f"schema migration {stem} derives rows with tlindex.ingest, which is not loaded")
    return step(conn) if step else None


def _empty(conn: sqlite3.Connection) -> bool:
    """Whether a database holds nothing but the (empty) record of its migrations."""
    return not conn.execute("SELECT 1 FROM sqlite_master WHERE tbl_name != ?", (MIGRATIONS_TABLE,)).fetchone()


def _private(conn: sqlite3.Connection) -> bool:
    """Whether no other connection can be making a database's schema at the same time: one in memory (or a temporary
    one), or a scratch file written without a journal (journal_mode=OFF: never shared, never recovered, as the
    ingest's staging files are). A shared database is made under its write lock instead (`_migrate`)."""
    if any(name == "main" and not file for _, name, file in conn.execute("PRAGMA database_list")):
        return True
    return conn.execute("PRAGMA journal_mode").fetchone()[0] == "off"


def schema_image() -> sqlite3.Connection:
    """This process's in-memory database of the current schema, to read (PRAGMA table_info) or copy; never written."""
    return _schema_image(os.getpid())


@cache
def _schema_image(pid: int) -> sqlite3.Connection:
    """An in-memory database of the current schema, one per process (`pid`: a forked worker opens its own rather
    than use a connection it inherited); new private databases (the in-memory ones whose schema
    tlindex.store.tables and the type checks read, the staging files of an ingest, a report's scratch database)
    are copies."""
    image = register(connect(":memory:", check_same_thread=False))  # copied from any thread, never written again
    image.deserialize(_schema_bytes())
    return image


@cache
def _schema_bytes() -> bytes:
    """The current schema's database, serialized: kept by forked workers, which open their image from it (bytes
    cross a fork; a connection must not), and in the user's cache folder (`_kept`: making it takes ~15 ms of every
    command that writes a database; reading it, ~0.5 ms)."""
    return _kept("", _made_by_script)


def staging_image() -> sqlite3.Connection:
    """This process's in-memory database of the current schema without its indexes, to copy: an ingest's staging
    files are copies (their rows are written once and read once, by the merge); never written."""
    return _staging_image(os.getpid())


@cache
def _staging_image(pid: int) -> sqlite3.Connection:
    """The staging files' image, one per process (`pid`: as `_schema_image`)."""
    image = register(connect(":memory:", check_same_thread=False))
    image.deserialize(_kept("-staging", _without_indexes))
    return image


def _made_by_script() -> bytes:
    image = register(connect(":memory:"))
    try:
        _migrate(image, schema_files(), whole=True)
        return image.serialize()
    finally:
        image.close()


def _without_indexes() -> bytes:
    """The schema's image less its indexes (dropping 43 of them took ~7 ms of each staging file made)."""
    image = register(connect(":memory:", isolation_level=None))
    try:
        schema_image().backup(image)
        for (index,) in image.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                                      ).fetchall():
            image.execute(f"DROP INDEX {index}")
        return image.serialize()
    finally:
        image.close()


def _kept(suffix: str, make: Callable[[], bytes]) -> bytes:
    """An image's bytes as the user's cache folder keeps them (keyed by the schema's files, this tlindex and SQLite,
    and `suffix`), else `make()`'s, then kept. A cached file carries the SHA-256 of its bytes: one that does not
    match them is made again; an unwritable folder is no error."""
    import hashlib

    folder = cache_folder("schema")
    file = folder / f"{_schema_key()}{suffix}.sqlite" if folder is not None else None
    try:
        cached = file.read_bytes() if file is not None else b""
    except OSError:
        cached = b""
    digest, data = cached[:32], cached[32:]
    if data and hashlib.sha256(data).digest() == digest:
        return data
    data = make()
    if file is not None:
        from tlindex.owned import write_whole

        try:  # written beside and moved into place: a reader never sees half of it, a stop leaves nothing
            write_whole(file, [hashlib.sha256(data).digest(), data])
        except OSError:
            pass  # not kept: made again next time
        _forget_old_images(folder)
    return data


KEPT_IMAGE_DAYS = 30  # images (~0.8 MB each) of other schemas or tlindex versions kept this long after made


def _forget_old_images(folder: Path) -> None:
    """Remove the images made over KEPT_IMAGE_DAYS ago (of an older checkout or tlindex): one still used is made
    again, once."""
    too_old = time.time() - KEPT_IMAGE_DAYS * 86400
    for found in folder.glob("*.sqlite"):
        try:
            if found.stat().st_mtime < too_old:
                found.unlink()
        except OSError:
            pass


def _schema_key() -> str:
    """What the schema's images are made of: the schema's files and this module, which makes them (name, size, time:
    an edited checkout makes them again), this tlindex's version, SQLite's."""
    import hashlib

    from tlindex import __version__

    stats = [(path.name, found.st_size, found.st_mtime_ns)
             for path in [*schema_files(), current_schema(), Path(__file__)] for found in [path.stat()]]
    return hashlib.sha256(repr((stats, __version__, sqlite3.sqlite_version)).encode()).hexdigest()[:32]


# Indexes of envelopes that a big ingest into an empty database makes after its merges (tlindex.ingest.deferred_indexes).
DEFERRED_INDEXES = ("envelopes_payload", "envelopes_kind", "envelopes_source_kind")


def deferred_indexes(conn: sqlite3.Connection, present: bool = False) -> list[str]:
    """The DEFERRED_INDEXES the database lacks (with `present`: those it has)."""
    have = {name for (name,) in conn.execute(
        f"SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ({', '.join('?' * len(DEFERRED_INDEXES))})",
        DEFERRED_INDEXES)}
    return [name for name in DEFERRED_INDEXES if (name in have) == present]


def make_deferred_indexes(conn: sqlite3.Connection) -> list[str]:
    """Make the DEFERRED_INDEXES the database lacks, with the current schema's own statements; their names."""
    if not deferred_indexes(conn):
        return []
    image = schema_image()
    with immediate(conn):
        made = deferred_indexes(conn)  # again, under the write lock
        for name in made:
            conn.execute(image.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0])
    return made


def _record(conn: sqlite3.Connection, names: list[str]) -> None:
    conn.executemany(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                     [(name,) for name in names])


AS_OF_RE = re.compile(r"^-- as of: (\S+)$", re.M)


@cache  # the schema does not change under a running process
def current_script() -> tuple[str, str]:
    """schema/current.sql and the last migration it stands for (its `-- as of: NNN_name` line)."""
    text = current_schema().read_text()
    match = AS_OF_RE.search(text)
    return text, match.group(1) if match else ""


def _apply_whole(conn: sqlite3.Connection, migrations: list[str]) -> list[str]:
    """schema/current.sql on a new database, and the migrations it stands for recorded as applied: those up to its
    `as of` (the later ones are then applied in turn); nothing when it names no migration of this tlindex."""
    text, as_of = current_script()
    if as_of not in migrations:
        return []
    for statement in _statements(text):
        conn.execute(statement)
    stood_for = migrations[:migrations.index(as_of) + 1]
    _record(conn, stood_for)
    return list(stood_for)


def connect_read_only(path: str | Path, **kwargs) -> sqlite3.Connection:
    """A read-only connection to a tlindex database, with the functions its `payloads` view needs (limited) and
    the views of this tlindex (current_views)."""
    conn = register(connect(f"file:{path}?mode=ro", uri=True, **kwargs))
    current_views(conn)
    return conn


def check_database(path: str | Path) -> None:
    """Refuse a file that is not SQLite, or a SQLite database that is not tlindex's (or empty)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as file:
        if file.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise DatabaseError(f"{path}: not a SQLite database; give --db a tlindex database or a new file name")
    _roll_back_hot_journal(path)
    try:
        conn = connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        raise DatabaseError(f"{path}: cannot be read as a SQLite database ({error})")
    if tables and MIGRATIONS_TABLE not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
        raise DatabaseError(f"{path}: a SQLite database that tlindex did not make (tables: {shown}); "
                            f"tlindex writes only to its own databases: give --db another file")


def _roll_back_hot_journal(path: Path) -> None:
    """A rollback journal a killed writer left beside the database (a new one killed while it switched to WAL)
    rolled back by a connection that may write, as SQLite does when one opens it: a read-only one cannot, and
    refused to read the database ("attempt to write a readonly database"). SQLite leaves the journal of a writer
    still running alone (its lock); a database nobody may write to is left as it is."""
    journal = Path(f"{path}-journal")
    try:
        if journal.stat().st_size == 0 or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            return
    except OSError:
        return  # (no journal: the usual case)
    try:
        conn = connect(str(path), timeout=BUSY_TIMEOUT_S)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        pass  # said by the read that follows


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. SQLite does not wait (busy timeout) for this switch, so retry while another
    process holds the new database's first lock."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _new_from_image(path: Path) -> None:
    """A database that does not exist yet written whole as a copy of the schema's image (its migrations recorded as
    applied now, in WAL mode), then linked into place (~3 ms where the script takes ~13; tlindex.owned.write_new):
    never over a file another process made meanwhile, which is then opened as it is; where no file can be linked,
    the script makes it."""
    if os.path.lexists(path) or not path.parent.is_dir():
        return  # (a missing folder: connect says so)
    from tlindex.owned import write_new

    image = register(connect(":memory:", isolation_level=None))
    try:
        image.deserialize(_schema_bytes())
        image.execute(f"UPDATE {MIGRATIONS_TABLE} SET applied_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now')")
        data = image.serialize()
    finally:
        image.close()
    data = data[:18] + WAL_FORMAT + data[20:]  # in WAL mode from the start: no journal to switch it, nor left
    try:
        write_new(path, [data], SQLITE_HEADER)
    except OSError:
        pass  # a folder that cannot be written to: connect says so


def open_db(path: str | Path, scratch: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) a tlindex database with the current schema, in WAL mode.

    WAL lets Datasette read the database while an ingest writes to it. Raises
    DatabaseError for a file that is not (or cannot become) a tlindex database. The indexes an ingest killed
    between its merges left out (DEFERRED_INDEXES) are made again. `scratch`: a new database that no other process
    knows of (a report's, in a temporary folder of its own), made as a copy of the schema image, as private ones are.
    """
    check_database(path)
    if not scratch:
        _new_from_image(Path(path))
    try:
        conn = connect(str(path), timeout=BUSY_TIMEOUT_S)
        if scratch:
            apply_schema(conn, private=True)  # a copy of the image, before WAL: written in place
        _wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        apply_schema(conn)
        make_deferred_indexes(conn)
    except sqlite3.DatabaseError as error:
        raise DatabaseError(f"{path}: cannot be opened as a tlindex database ({error})")
    return conn


def existing_database(db_path: str | Path, served: bool = False) -> Path:
    """The database a reading command opens: it exists and is a tlindex database (an older tlindex's brought up to
    date: bring_up_to_date, `served` passed on), else DatabaseError saying why."""
    path = Path(db_path)
    if not path.exists():
        raise DatabaseError(f"{path}: no such database (run `tlindex ingest` first)")
    if path.is_dir():
        raise DatabaseError(f"{path}: a directory, not a database (give --db the database file)")
    check_database(path)
    try:
        conn = connect_read_only(path)
        try:
            made_by_tlindex = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (MIGRATIONS_TABLE,)).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        raise DatabaseError(f"{path}: cannot be read as a SQLite database ({error})") from None
    if not made_by_tlindex:
        raise DatabaseError(f"{path}: not a tlindex database (empty); run `tlindex ingest` to make one")
    bring_up_to_date(path, served)
    return path


def bring_up_to_date(path: Path, served: bool = False) -> list[str]:
    """Migrate a database an older tlindex made (its tables and columns, and the rows a later migration derives from
    what it stores), so that every command and page reads it as one of this tlindex; the migrations applied. One that
    lacks only views is read through this tlindex's (current_views), unchanged, unless it is `served` (by Datasette,
    or written into a report, which read the file's own views): then its views are written too when it can be
    written. One that lacks more and cannot be written to is refused in one line, saying how to read it."""
    conn = connect_read_only(path)
    try:
        done, known = _applied(conn), [p.stem for p in schema_files()]
    finally:
        conn.close()
    missing = [stem for stem in known if stem not in done]
    if not missing or done - set(known):  # (a newer tlindex's: read as it is, never migrated by an older one)
        return []
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    if all(_views_only(stem) for stem in missing) and not (served and writable):
        return []  # read through this tlindex's views (current_views), unchanged
    if not writable:
        if all(_views_only(stem) or stem.partition("_")[2] in STEPS for stem in missing):
            return []  # what only a step derives is left underived: its tables are there, read as they are
        raise DatabaseError(f"{path}: made by an older tlindex (without schema migrations {', '.join(missing)}), and "
                            f"read-only here, so it cannot be brought up to date: copy it where it can be written")
    open_db(path).close()  # (a newer tlindex's database: refused there, in one line)
    return missing


def read_database(db_path: str | Path) -> sqlite3.Connection:
    """A read-only connection to an existing tlindex database (existing_database says why not)."""
    return connect_read_only(existing_database(db_path))


def write_database(db_path: str | Path) -> sqlite3.Connection:
    """A connection that writes to an existing tlindex database, transactions explicit (`immediate`)."""
    conn = open_db(existing_database(db_path))
    conn.isolation_level = None
    return conn


_VIEWS_ONLY_RE = re.compile(r"^(CREATE VIEW|DROP VIEW|CREATE INDEX|CREATE UNIQUE INDEX)\b")


@cache
def _views_only(stem: str) -> bool:
    """Whether a migration only makes views (or indexes): a reader does without it (current_views), the file as is."""
    if stem.partition("_")[2] in STEPS:
        return False
    path = next(p for p in schema_files() if p.stem == stem)
    statements = [re.sub(r"^(\s*--[^\n]*\n)*\s*", "", statement) for statement in _statements(path.read_text())]
    return all(_VIEWS_ONLY_RE.match(statement) or not statement.strip() for statement in statements)


_VIEW_RE = re.compile(r"^CREATE VIEW (\w+) AS\n(.*?);$", re.S | re.M)


def schema_scripts() -> list[str]:
    """The scripts that make the current schema: schema/current.sql and the migrations after it (all the migrations
    when it names none of them)."""
    files = schema_files()
    text, as_of = current_script()
    stems = [path.stem for path in files]
    if as_of not in stems:
        return [path.read_text() for path in files]
    return [text] + [path.read_text() for path in files[stems.index(as_of) + 1:]]


@cache
def schema_views() -> dict[str, str]:
    """Each view of the schema, by name, as the last schema script defines it (a migration may redefine one)."""
    defined: dict[str, str] = {}
    for text in schema_scripts():
        defined.update(_VIEW_RE.findall(text))
    return defined


def _words(sql: str) -> str:
    return " ".join(sql.split())


def current_views(conn: sqlite3.Connection) -> list[str]:
    """Each view of this tlindex's schema that a tlindex database lacks, or holds as an older tlindex defined it,
    made a TEMP view of the current definition (the temp schema is searched first), and the names made. A database
    is migrated by the next command that writes to it; until then, a read-only connection (a reading command,
    Datasette) reads it as this tlindex would. A view the database cannot answer yet (it reads a table added since)
    is left as it is. Nothing happens on a database that is not tlindex's."""
    stored = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('view', 'table')"))
    if MIGRATIONS_TABLE not in stored:
        return []
    made = []
    for name, body in schema_views().items():
        if name in stored and _words(stored[name] or "") == _words(f"CREATE VIEW {name} AS\n{body}"):
            continue
        try:
            conn.execute(f"CREATE TEMP VIEW {name} AS\n{body}")
        except sqlite3.DatabaseError:
            continue
        try:
            conn.execute(f"EXPLAIN SELECT * FROM temp.{name}")  # prepared, not run: does it read what exists?
            made.append(name)
        except sqlite3.DatabaseError:
            conn.execute(f"DROP VIEW temp.{name}")
    return made


def with_views(conn: sqlite3.Connection, names: tuple[str, ...]) -> str:
    """`WITH name AS (...)` for those of the schema's views `names` (dependencies first) that the database lacks,
    else "": a database written by an older tlindex is migrated by the next command that writes to it, and a reading
    command opens it read-only, so it reads a view added since from the view's own definition (the schema's, once)."""
    present = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'view' UNION SELECT name FROM sqlite_temp_master")}
    missing = [name for name in names if name not in present]
    if not missing:
        return ""
    defined = schema_views()
    return "WITH " + ", ".join(f"{name} AS (\n{defined[name]}\n)" for name in missing) + "\n"
