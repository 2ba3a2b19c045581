"""The schema, the code's column lists and docs/schema.md stay in step."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tlindex.formats.schema_doc import render, tables
from tlindex.ingest.reader import ERROR_KINDS
from tlindex.store.db import apply_schema
from tlindex.store.tables import COLUMNS

ROOT = Path(__file__).resolve().parents[1]


def schema_columns() -> dict[str, list[str]]:
    conn = sqlite3.connect(":memory:")
    apply_schema(conn)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                                        "AND name NOT LIKE '\\_%' ESCAPE '\\'")]
    return {name: [r[1] for r in conn.execute(f"PRAGMA table_info({name})")] for name in names}


def test_every_column_the_normalizer_writes_exists():
    columns = schema_columns()
    for table, names in COLUMNS.items():
        assert set(names) <= set(columns[table]), table


def test_every_table_and_column_is_documented():
    documented = {name: [c[0] for c in cols] for name, description, cols in tables()}
    for name, description, _ in tables():
        assert description, name
    assert documented == schema_columns()


def test_docs_schema_md_is_generated_from_the_schema():
    assert (ROOT / "docs" / "schema.md").read_text() == render(), \
        "run: python -m tlindex.formats.schema_doc > docs/schema.md"


def test_every_error_kind_written_is_documented_and_every_documented_kind_is_written():
    """The kinds tlindex writes (string literals given as a kind) are exactly ERROR_KINDS, each in docs/schema.md."""
    import ast

    written = set()
    for path in (ROOT / "tlindex").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):  # ReadError(line, offset, lines, bytes, KIND, ...), error(line, offset, KIND)
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                at = {"ReadError": 4, "error": 2}.get(name)
                if at is not None and len(node.args) > at and isinstance(node.args[at], ast.Constant):
                    written.add(node.args[at].value)
            elif isinstance(node, ast.Assign) and any(getattr(t, "attr", "") == "kind" for t in node.targets) \
                    and isinstance(node.value, ast.Constant):
                written.add(node.value.value)  # item.kind = "incomplete_record"
    assert written == set(ERROR_KINDS)
    docs = (ROOT / "docs" / "schema.md").read_text()
    for kind in ERROR_KINDS:
        assert f"| `{kind}` |" in docs, kind


MIGRATIONS = sorted(p.stem for p in (ROOT / "schema").glob("[0-9]*.sql"))


def test_applying_the_schema_twice_is_a_no_op():
    conn = sqlite3.connect(":memory:")
    assert apply_schema(conn) == MIGRATIONS and MIGRATIONS[0] == "001_initial"
    assert apply_schema(conn) == []


def test_a_database_of_an_older_schema_is_upgraded_in_place_and_keeps_its_rows(tmp_path):
    from tlindex.store.db import MIGRATIONS_TABLE

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript((ROOT / "schema" / "001_initial.sql").read_text())
    conn.execute(f"CREATE TABLE {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT)")
    conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES ('001_initial', 'then')")
    conn.execute("INSERT INTO files VALUES (1, '/x.log', 'x.log', '/', 1, NULL, 'h', 0, 1, 1, 'then')")
    conn.commit()
    assert apply_schema(conn) == MIGRATIONS[1:]
    assert conn.execute("SELECT path FROM files").fetchall() == [("/x.log",)]
    assert {table for table in COLUMNS} <= {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
