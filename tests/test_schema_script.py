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
        text = path.read_text()
        for name in re.findall(r"^DROP VIEW (\w+);", text, re.M):  # (a migration may drop a view to make it again)
            defined.pop(name, None)
        defined.update(_VIEW_RE.findall(text))
    assert schema_views() == defined


@pytest.mark.parametrize("as_of", ["", "999_unknown"])
def test_a_current_sql_naming_no_migration_of_this_tlindex_is_not_used(tmp_path, monkeypatch, as_of):
    monkeypatch.setattr(db, "current_script", lambda: ("CREATE TABLE wrong (x);", as_of))
    conn = made(tmp_path / "new.db", whole=True)
    assert schema_of(conn) == schema_of(made(tmp_path / "migrated.db", whole=False))


def image_of(data: bytes) -> sqlite3.Connection:
    image = register(sqlite3.connect(":memory:"))  # (its views call sqlar_uncompress)
    image.deserialize(data)
    return image


def test_a_staging_file_is_the_schema_without_its_indexes(tmp_path):
    """An ingest's staging file holds every table, view and trigger of the schema and none of its indexes (its rows
    are written once and read once)."""
    from tlindex.ingest.staging import StagingWriter

    writer = StagingWriter(tmp_path / "staging.db")
    staged = set(writer.conn.execute("SELECT type, name, sql FROM sqlite_master"))
    writer.conn.close()
    image = set(db.schema_image().execute("SELECT type, name, sql FROM sqlite_master"))
    assert staged == {(kind, name, sql) for kind, name, sql in image if kind != "index" or sql is None}
    assert any(kind == "index" and sql for kind, _, sql in image)


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

    from tlindex import Database

    path = tmp_path / "traces.db"
    conn = Database(path, create=True).conn
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    subprocess.run([sys.executable, "-c", HOT_JOURNAL, str(path)], check=False)
    assert (tmp_path / "traces.db-journal").stat().st_size > 0
    Database(path).close()
    conn = db.connect_read_only(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_written'").fetchone() == (0,)
    conn.close()


