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
from typing import Callable, Iterator, Mapping

from tlindex.errors import DatabaseError
from tlindex.store import redact
from tlindex.store.compression import register
from tlindex.store.limits import connect
from tlindex.store.resources import current_schema, schema_files

MIGRATIONS_TABLE = "_tlindex_migrations"
SQLITE_HEADER = b"SQLite format 3\x00"
WAL_FORMAT = b"\x02\x02"  # the header's file format write and read versions (bytes 18 and 19) of a WAL database
BUSY_TIMEOUT_S = 600  # concurrent ingests wait for each other's merges (each one transaction)
# What a migration (by its name without its number) says once, on stderr, from the rows each of its statements
# changed (None: nothing to say).
NOTICES = {"redacted_secrets": redact.migration_notice}
# The migrations (by name without their number) that derive rows beyond SQL, in their transaction, from what a
# database stores: each a function of the layer whose code it runs, which tlindex.Database passes to every open.
STEPS = ("derived_by_normalizers", "derived_at_write")


def step_name(stem: str) -> str | None:
    """The step of STEPS a migration runs: its name without the number is the step's, or ends with it
    (`029_ranks_derived_at_write`: a later change to what is derived, which derives every run again)."""
    name = stem.partition("_")[2]
    return next((step for step in STEPS if name == step or name.endswith("_" + step)), None)


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


Step = Callable[[sqlite3.Connection], "str | None"]  # a migration's step beyond SQL: what it says once (or None)


def apply_schema(conn: sqlite3.Connection, steps: Mapping[str, Step] | None = None, whole: bool = True) -> list[str]:
    """Apply every schema/NNN_*.sql migration not yet applied; return the names applied.

    Each file is one migration, recorded in _tlindex_migrations, so a database made by an older tlindex is upgraded
    in place the next time it is opened. A new (empty) database is given schema/current.sql instead, the whole
    schema in one script, and every migration it stands for is recorded as applied (then any later one in turn);
    with `whole=False` it is given the migrations one by one. A migration named in STEPS also derives rows beyond
    SQL: `steps` gives the function of each (tlindex.Database passes them all, whatever command runs). The check and
    the migrations run under one write lock, so processes opening a new database at once apply each migration exactly
    once. A database that records a migration this tlindex does not know was written by a newer one: refused.
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
    return _migrate(conn, files, whole, steps)


def _migrate(conn: sqlite3.Connection, files: list[Path], whole: bool, steps: Mapping[str, Step] | None) -> list[str]:
    """The migrations a database lacks applied under one write lock (schema/current.sql for a new one, when
    `whole`); the names applied."""
    applied, notices = [], []
    with immediate(conn):
        conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT)")
        done = _applied(conn)  # again, now that no one else can be applying them
        if whole and not done and _empty(conn):
            applied = _apply_whole(conn, [path.stem for path in files])
            done = set(applied)
        pending = [path.stem for path in files if path.stem not in done]
        last_of_step = {step_name(stem): stem for stem in pending}  # a step runs once, after the last migration of it
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
            said = notice(changes) if notice else _step(conn, path.stem, steps) \
                if last_of_step.get(step_name(path.stem)) == path.stem else None
            notices += [said] if said else []
    if notices:  # said once: the migrations are recorded as applied in the transaction just committed
        where = next((file for _, name, file in conn.execute("PRAGMA database_list") if name == "main"), "")
        for said in notices:
            sys.stderr.write(f"tlindex: {where or 'database'}: {said}\n")
    return applied


def _step(conn: sqlite3.Connection, stem: str, steps: Mapping[str, Step] | None) -> str | None:
    """A migration's step beyond SQL, run (a database without envelopes has nothing to derive); refused when the
    caller gave none (only tlindex.Database opens a database that holds rows). Of several migrations pending with one
    step (024, 027, 028 and 029 derive every run again), only the last runs it: the code derives for the newest schema."""
    name = step_name(stem)
    if name is None or not conn.execute("SELECT 1 FROM envelopes LIMIT 1").fetchone():
        return None
    if steps is None or name not in steps:
        raise DatabaseError(f"schema migration {stem} derives rows: open the database with tlindex.Database")
    return steps[name](conn)


def _empty(conn: sqlite3.Connection) -> bool:
    """Whether a database holds nothing but the (empty) record of its migrations."""
    return not conn.execute("SELECT 1 FROM sqlite_master WHERE tbl_name != ?", (MIGRATIONS_TABLE,)).fetchone()


def schema_image() -> sqlite3.Connection:
    """This process's in-memory database of the current schema, to read (PRAGMA table_info) or copy; never written."""
    return _schema_image(os.getpid())


@cache
def _schema_image(pid: int) -> sqlite3.Connection:
    """An in-memory database of the current schema, made by its script once per process (`pid`: a forked worker
    makes its own rather than use a connection it inherited)."""
    image = register(connect(":memory:", check_same_thread=False))  # copied from any thread, never written again
    _migrate(image, schema_files(), whole=True, steps={})
    return image


def staging_image() -> sqlite3.Connection:
    """This process's in-memory database of the current schema without its indexes, to copy: an ingest's staging
    files are copies (their rows are written once and read once, by the merge); never written."""
    return _staging_image(os.getpid())


@cache
def _staging_image(pid: int) -> sqlite3.Connection:
    """The staging files' image, one per process (`pid`: as `_schema_image`)."""
    image = register(connect(":memory:", check_same_thread=False, isolation_level=None))
    schema_image().backup(image)
    for (index,) in image.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                                  ).fetchall():
        image.execute(f"DROP INDEX {index}")
    return image


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
    """A read-only connection to a tlindex database, with the functions its `payloads` view needs (bounded) and
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


def open_database(path: str | Path, steps: Mapping[str, Step], *, create: bool = False,
                  write: bool = False) -> sqlite3.Connection:
    """The one way tlindex opens a database file: checked (DatabaseError naming it: missing unless `create`, not
    SQLite, not tlindex's), brought up to date (migrated, with `steps`: an older tlindex's database is read as this
    tlindex's), then a connection that writes (`create` or `write`: WAL, transactions explicit) or reads only.

    A database that lacks only views is read through this tlindex's views (current_views), unchanged, until a command
    that writes opens it; one that lacks more and cannot be written is refused in one line, saying how to read it. A
    newer tlindex's database is read as it is and never written."""
    path = Path(path)
    if path.is_dir():
        raise DatabaseError(f"{path}: a directory, not a database (give --db the database file)")
    new = not path.exists() or path.stat().st_size == 0
    if new and not create:
        raise DatabaseError(f"{path}: no such database (run `tlindex ingest` first)")
    check_database(path)
    if not new and not _made_by_tlindex(path):
        if not create:
            raise DatabaseError(f"{path}: not a tlindex database (empty); run `tlindex ingest` to make one")
    elif not new and not create and not write:
        missing = _missing(path)
        if all(_views_only(stem) for stem in missing):
            return connect_read_only(path)  # read through this tlindex's views, the file unchanged (none: current)
        if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            if all(_views_only(stem) or step_name(stem) for stem in missing):
                return connect_read_only(path)  # read as it is (what a step derives: underived)
            raise DatabaseError(f"{path}: made by an older tlindex (without schema migrations {', '.join(missing)}), "
                                f"and read-only here, so it cannot be brought up to date: copy it where it can be "
                                f"written")
    conn = _writer(path, steps)
    if create or write:
        return conn
    conn.close()
    return connect_read_only(path)


def is_tlindex_connection(conn: sqlite3.Connection) -> bool:
    """Whether a connection (Datasette's, say) is to a database tlindex made (false on any error)."""
    try:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                            (MIGRATIONS_TABLE,)).fetchone() is not None
    except sqlite3.Error:
        return False


def _made_by_tlindex(path: Path) -> bool:
    try:
        conn = connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (MIGRATIONS_TABLE,)).fetchone() is not None
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        raise DatabaseError(f"{path}: cannot be read as a SQLite database ({error})") from None


def _missing(path: Path) -> list[str]:
    """The migrations of this tlindex a database lacks (none for a newer tlindex's: it is read as it is)."""
    conn = connect(f"file:{path}?mode=ro", uri=True)
    try:
        done = _applied(conn)
    finally:
        conn.close()
    known = [p.stem for p in schema_files()]
    return [] if done - set(known) else [stem for stem in known if stem not in done]


def _writer(path: Path, steps: Mapping[str, Step]) -> sqlite3.Connection:
    """A connection that writes: WAL (Datasette reads while an ingest writes), the schema brought up to date, the
    indexes an ingest killed between its merges left out made again (DEFERRED_INDEXES)."""
    try:
        conn = connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)  # transactions explicit: `immediate`
        try:
            _wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            apply_schema(conn, steps)
            make_deferred_indexes(conn)
        except BaseException:
            conn.close()
            raise
    except sqlite3.DatabaseError as error:
        raise DatabaseError(f"{path}: cannot be opened as a tlindex database ({error})") from None
    return conn


_VIEWS_ONLY_RE = re.compile(r"^(CREATE VIEW|DROP VIEW|CREATE INDEX|CREATE UNIQUE INDEX)\b")


@cache
def _views_only(stem: str) -> bool:
    """Whether a migration only makes views (or indexes): a reader does without it (current_views), the file as is."""
    if step_name(stem):
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
