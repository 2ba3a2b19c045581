"""schema/current.sql, the whole schema in one script, written from the migrations.

    python -m tlindex.store.schema_script > schema/current.sql

A new database is made from it in one go instead of applying every migration in turn
(tlindex.store.db.apply_schema); tests/test_schema_script.py fails when it is not what the
migrations make, so a migration added without writing it again is caught.
"""

from __future__ import annotations

import sys

from tlindex.store.db import MIGRATIONS_TABLE, apply_schema
from tlindex.store.limits import connect
from tlindex.store.resources import schema_files

HEADER = """\
-- tlindex's whole schema in one script: what the migrations schema/001_initial.sql to schema/{as_of}.sql make.
-- A new database is made from it in one go (tlindex.store.db.apply_schema) and every migration up to the one
-- named on the `as of` line is recorded as applied; a database made before is upgraded by the migrations.
-- Written by `python -m tlindex.store.schema_script > schema/current.sql`, not by hand. The comments of the
-- tables, and of the columns added after a table was made, are in the migrations (and docs/schema.md).
-- as of: {as_of}
"""


def entries(conn) -> list[str]:
    """The SQL of every table, index, view and trigger of a tlindex database, in the order they were made, less the
    record of its migrations and what SQLite makes of itself (its autoindexes, sqlite_sequence)."""
    return [sql for (sql,) in conn.execute(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
        "AND tbl_name != ? ORDER BY rowid", (MIGRATIONS_TABLE,))]


def script() -> str:
    """schema/current.sql as the migrations, applied one by one to an empty database, make it."""
    conn = connect(":memory:")
    try:
        apply_schema(conn, whole=False)
        made = entries(conn)
    finally:
        conn.close()
    return HEADER.format(as_of=schema_files()[-1].stem) + "".join(f"\n{sql};\n" for sql in made)


if __name__ == "__main__":
    sys.stdout.write(script())
