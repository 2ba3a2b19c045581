"""`Database`: one tlindex database opened once for a command (or a report, or a request's work) and passed down,
as sqlite-utils' `Database` is: it owns its connection, that connection's limits (every connection goes through
tlindex.store.limits.connect) and its mode, and it is closed once, on the way out, even on an error.

    with Database(path) as db:             # an existing database, brought up to date, read only
        rows = db.execute("SELECT ...").fetchall()
    with Database(path, write=True) as db:  # an existing one, written to (transactions explicit: `immediate`)
        ...

Opening one brings an older tlindex's database up to date first (tlindex.store.db.existing_database), so every
reader sees the schema of this tlindex; a database that is missing, not SQLite, or not tlindex's is a
DatabaseError naming the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType

from tlindex.store.db import connect_read_only, existing_database, open_db


class Database:
    """An existing tlindex database and its one connection (`conn`), read only unless `write`."""

    def __init__(self, path: str | Path, write: bool = False, served: bool = False) -> None:
        self.path = existing_database(path, served)  # (served: its views written too: bring_up_to_date)
        self.read_only = not write
        if write:
            self.conn = open_db(self.path)
            self.conn.isolation_level = None  # transactions explicit (tlindex.store.db.immediate)
        else:
            self.conn = connect_read_only(self.path)

    def execute(self, sql: str, parameters: tuple | list | dict = ()) -> sqlite3.Cursor:
        """`conn.execute`, as sqlite-utils' Database.execute."""
        return self.conn.execute(sql, parameters)

    def close(self) -> None:
        """Close the connection (once; closing again does nothing)."""
        self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Database {str(self.path)!r}{' read-only' if self.read_only else ''}>"
