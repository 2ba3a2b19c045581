"""A new database is made from schema/current.sql in one go; it is exactly what the migrations make one by one."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tlindex.store import db
from tlindex.store.compression import register
from tlindex.store.db import _VIEW_RE, MIGRATIONS_TABLE, apply_schema, current_script, schema_views
from tlindex.store.resources import schema_files
from tlindex.store.schema_script import script

ROOT = Path(__file__).resolve().parents[1]
MIGRATIONS = [path.stem for path in schema_files()]


def normalized(sql: str) -> str:
    """SQL without its comments, its layout or the quotes SQLite puts around a renamed table's name."""
    sql = re.sub(r"('(?:[^']|'')*')|--[^\n]*", lambda match: match.group(1) or "", sql)
    sql = re.sub(r'"(\w+)"', r"\1", " ".join(sql.split()))
    return re.sub(r"\s*([(),])\s*", r"\1", sql)


def schema_of(conn: sqlite3.Connection) -> dict:
    """Every entry of sqlite_master (its SQL normalized), each table's and view's columns, indexes and foreign keys,
    and the migrations recorded as applied."""
    entries = {(kind, name, table): normalized(sql or "") for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master")}
    shapes = {}
    for kind, name, _ in entries:
        if kind in ("table", "view"):
            shapes[name] = (conn.execute(f"PRAGMA table_xinfo({name})").fetchall(),
                            conn.execute(f"PRAGMA foreign_key_list({name})").fetchall(),
                            [(index[1:], conn.execute(f"PRAGMA index_xinfo({index[1]})").fetchall())
                             for index in conn.execute(f"PRAGMA index_list({name})")])
    recorded = [name for (name,) in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY name")]
    return {"entries": entries, "shapes": shapes, "migrations": recorded}


def made(path: Path | str, whole: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    assert apply_schema(conn, whole=whole) == MIGRATIONS
    return conn


def test_a_new_database_from_current_sql_is_the_one_the_migrations_make_from_001(tmp_path):
    fresh, migrated = made(tmp_path / "fresh.db", whole=True), made(tmp_path / "migrated.db", whole=False)
    assert schema_of(fresh) == schema_of(migrated)
    assert schema_of(fresh)["migrations"] == MIGRATIONS
    assert len(schema_of(fresh)["entries"]) > 60  # tables, indexes and views: not two empty databases


def test_a_new_in_memory_database_is_a_copy_of_the_same_schema(tmp_path):
    copies = [made(":memory:", whole=True) for _ in range(2)]
    assert schema_of(copies[0]) == schema_of(copies[1]) == schema_of(made(tmp_path / "migrated.db", whole=False))
    copies[0].execute("INSERT INTO runs (label) VALUES ('a copy of its own')")
    assert copies[1].execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert made(":memory:", whole=True).execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_current_sql_is_written_from_the_migrations():
    """Fails when a migration is added (or changed) and current.sql is not written again."""
    _, as_of = current_script()
    assert as_of == MIGRATIONS[-1], f"schema/current.sql stands for {as_of}, the last migration is {MIGRATIONS[-1]}"
    assert (ROOT / "schema" / "current.sql").read_text() == script(), \
        "run: python -m tlindex.store.schema_script > schema/current.sql"


def test_a_migration_current_sql_does_not_have_yet_is_applied_after_it(tmp_path, monkeypatch):
    """A migration 015 added without current.sql written again: a new database still gets it (after current.sql),
    and the check above says current.sql is stale."""
    later = tmp_path / "015_later.sql"
    later.write_text("CREATE TABLE later (id INTEGER PRIMARY KEY); -- a table added after current.sql\n")
    monkeypatch.setattr(db, "schema_files", lambda: [*schema_files(), later])
    for conn in (sqlite3.connect(tmp_path / "new.db"), sqlite3.connect(":memory:")):
        assert apply_schema(conn) == [*MIGRATIONS, "015_later"]
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'later'").fetchone() == ("later",)
        assert apply_schema(conn) == []
    monkeypatch.setattr("tlindex.store.schema_script.schema_files", lambda: [*schema_files(), later])
    assert script() != (ROOT / "schema" / "current.sql").read_text()


def test_an_older_database_is_still_migrated_one_migration_at_a_time(tmp_path):
    conn = register(sqlite3.connect(tmp_path / "old.db"))  # migration 004 compresses
    conn.execute(f"CREATE TABLE {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT)")
    for path in schema_files()[:7]:
        conn.executescript(path.read_text())
        conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, 'then')", (path.stem,))
    conn.commit()
    assert apply_schema(conn) == MIGRATIONS[7:]
    assert schema_of(conn) == schema_of(made(tmp_path / "new.db", whole=True))


def test_the_views_read_from_current_sql_are_the_migrations_last_definitions():
    defined: dict[str, str] = {}
    for path in schema_files():
        defined.update(_VIEW_RE.findall(path.read_text()))
    assert schema_views() == defined


@pytest.mark.parametrize("as_of", ["", "999_unknown"])
def test_a_current_sql_naming_no_migration_of_this_tlindex_is_not_used(tmp_path, monkeypatch, as_of):
    monkeypatch.setattr(db, "current_script", lambda: ("CREATE TABLE wrong (x);", as_of))
    conn = made(tmp_path / "new.db", whole=True)
    assert schema_of(conn) == schema_of(made(tmp_path / "migrated.db", whole=False))


def test_a_scratch_file_without_a_journal_is_a_copy_and_a_shared_file_is_made_under_its_lock(tmp_path, monkeypatch):
    """A staging file (journal_mode=OFF: private) is a copy of the schema; traces.db is made by the script under its
    write lock, since another process may be opening it at the same time."""
    scratch = sqlite3.connect(tmp_path / "staging.db", isolation_level=None)
    scratch.execute("PRAGMA journal_mode=OFF")
    assert apply_schema(scratch) == MIGRATIONS
    assert schema_of(scratch) == schema_of(made(tmp_path / "migrated.db", whole=False))
    monkeypatch.setattr(db, "_schema_image", lambda pid: pytest.fail("a database others may open was copied into"))
    for journal in ("WAL", "DELETE"):
        shared = sqlite3.connect(tmp_path / f"{journal}.db")
        shared.execute(f"PRAGMA journal_mode={journal}")
        assert apply_schema(shared) == MIGRATIONS
        assert schema_of(shared) == schema_of(scratch)


def image_of(data: bytes) -> sqlite3.Connection:
    image = register(sqlite3.connect(":memory:"))  # (its views call sqlar_uncompress)
    image.deserialize(data)
    return image


def test_the_schema_image_is_kept_in_the_cache_folder_and_a_damaged_one_is_made_again(tmp_path, monkeypatch):
    """The image new private databases copy is read from the user's cache folder once made (the script runs once per
    schema, not per command); bytes that do not match their digest are not used, and an unwritable folder is no
    error."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    db._schema_bytes.cache_clear()
    try:
        made_now = db._schema_bytes()
        [kept] = (tmp_path / "cache" / "tlindex" / "schema").glob("*.sqlite")
        assert kept.read_bytes()[32:] == made_now
        with monkeypatch.context() as patched:  # read back: the script is not run
            patched.setattr(db, "_migrate", lambda *args: pytest.fail("the schema was made again"))
            db._schema_bytes.cache_clear()
            assert db._schema_bytes() == made_now
        migrated = schema_of(made(tmp_path / "migrated.db", whole=False))
        assert schema_of(image_of(made_now)) == migrated
        damaged = bytearray(kept.read_bytes())
        damaged[len(damaged) // 2] ^= 1
        kept.write_bytes(bytes(damaged))
        db._schema_bytes.cache_clear()
        made_again = db._schema_bytes()  # (its migrations' times may differ by a second: compared as schemas)
        assert made_again != bytes(damaged[32:]) and schema_of(image_of(made_again)) == migrated
        assert kept.read_bytes()[32:] == made_again  # and kept
        (tmp_path / "a file").write_text("")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a file"))  # no cache folder can be made there (root too)
        db._schema_bytes.cache_clear()
        assert schema_of(image_of(db._schema_bytes())) == migrated
    finally:
        db._schema_bytes.cache_clear()


def test_a_staging_file_is_the_schema_without_its_indexes_and_its_image_is_kept_in_the_cache_folder(tmp_path,
                                                                                                     monkeypatch):
    """An ingest's staging file holds every table, view and trigger of the schema and none of its indexes (its rows
    are written once and read once); its image is made once per schema, then read from the user's cache folder."""
    from tlindex.ingest.staging import StagingWriter

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    db._staging_image.cache_clear()
    try:
        writer = StagingWriter(tmp_path / "staging.db")
        staged = set(writer.conn.execute("SELECT type, name, sql FROM sqlite_master"))
        writer.conn.close()
        image = set(db.schema_image().execute("SELECT type, name, sql FROM sqlite_master"))
        assert staged == {(kind, name, sql) for kind, name, sql in image if kind != "index" or sql is None}
        assert any(kind == "index" and sql for kind, _, sql in image)
        [kept] = (tmp_path / "cache" / "tlindex" / "schema").glob("*-staging.sqlite")
        with monkeypatch.context() as patched:  # read back: not made again
            patched.setattr(db, "_without_indexes", lambda: pytest.fail("the staging image was made again"))
            db._staging_image.cache_clear()
            writer = StagingWriter(tmp_path / "staging-2.db")
            assert set(writer.conn.execute("SELECT type, name, sql FROM sqlite_master")) == staged
            writer.conn.close()
        assert kept.exists()
    finally:
        db._staging_image.cache_clear()


def test_a_new_database_is_the_image_linked_into_place_and_never_over_a_file_made_meanwhile(tmp_path, monkeypatch):
    """`open_db` writes a new database whole as a copy of the schema's image and links it into place: it is the
    database the script makes (the migrations recorded as applied now), in WAL mode, with the permissions SQLite
    gives a new database, and nothing is left beside it. A file another process made meanwhile is opened as it is;
    where no hard link can be made, the script makes the database."""
    import os
    import stat
    import time

    from tlindex.owned import write_new

    path = tmp_path / "traces.db"
    before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    db._schema_bytes()  # (the image: made by the script once)
    link, named = os.link, []

    def linked(*args, **kwargs):  # what the folder holds when the file is linked into place
        named.append(sorted(p.name for p in tmp_path.iterdir()))
        return link(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(db, "_apply_whole", lambda *args: pytest.fail("the new database was made by the script"))
        patched.setattr(os, "link", linked)
        conn = db.open_db(path)
    if hasattr(os, "O_TMPFILE"):  # Linux: the file has no name before it is linked (killed, it leaves nothing)
        assert named == [[]]
    scripted = made(tmp_path / "scripted.db", whole=True)
    assert schema_of(conn) == schema_of(scripted)
    assert all(applied >= before for (applied,) in conn.execute(f"SELECT applied_at FROM {MIGRATIONS_TABLE}"))
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 & ~umask  # as SQLite creates a database
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

    theirs = tmp_path / "theirs.db"
    theirs.write_bytes(b"made meanwhile")
    assert write_new(theirs, [b"SQLite format 3\x00..."], db.SQLITE_HEADER) is False
    assert theirs.read_bytes() == b"made meanwhile" and not list(tmp_path.glob(".theirs.db.*"))

    def no_links(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    conn = db.open_db(tmp_path / "no-links.db")
    assert schema_of(conn) == schema_of(scripted)
    conn.close()
    scripted.close()
    assert not list(tmp_path.glob(".no-links.db.*"))


HOT_JOURNAL = """import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")  # its pages spill to the file: the journal is needed to undo them
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE half_written (x)")
conn.execute("INSERT INTO half_written SELECT zeroblob(4000) FROM (SELECT 1 UNION ALL SELECT 2) , _tlindex_migrations")
os._exit(9)  # killed: no rollback, the journal stays
"""


def test_a_journal_a_killed_writer_left_is_rolled_back_and_the_database_read(tmp_path):
    """Reproduction: a new database killed while it switched to WAL left its rollback journal, and every command
    then refused it ("cannot be read as a SQLite database (attempt to write a readonly database)")."""
    import subprocess
    import sys

    path = tmp_path / "traces.db"
    conn = db.open_db(path)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    subprocess.run([sys.executable, "-c", HOT_JOURNAL, str(path)], check=False)
    assert (tmp_path / "traces.db-journal").stat().st_size > 0
    assert db.existing_database(path) == path
    conn = db.connect_read_only(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_written'").fetchone() == (0,)
    conn.close()


def test_images_made_long_ago_are_forgotten_when_an_image_is_made(tmp_path, monkeypatch):
    """The cache folder keeps an image per schema, tlindex and SQLite: those made over KEPT_IMAGE_DAYS ago (an older
    checkout's) are removed when another is made; a recent one of another schema stays."""
    import os
    import time

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "tlindex" / "schema"
    folder.mkdir(parents=True)
    old, recent = folder / "0123-old.sqlite", folder / "4567-recent.sqlite"
    for path in (old, recent):
        path.write_bytes(b"an image of another schema")
    long_ago = time.time() - (db.KEPT_IMAGE_DAYS + 1) * 86400
    os.utime(old, (long_ago, long_ago))
    db._schema_bytes.cache_clear()
    try:
        db._schema_bytes()
    finally:
        db._schema_bytes.cache_clear()
    assert not old.exists() and recent.exists() and len(list(folder.glob("*.sqlite"))) == 2
