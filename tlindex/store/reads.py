"""What a statement reads, as SQLite itself says: the tables behind a view, a full-text index or any SQL.

A view shows the rows of the tables it selects from; an FTS5 index shows the text of the table it
indexes, and its shadow tables (`<index>_data`, `_content`, ...) hold that text too. Whoever may not
see a table may not see them either. Which tables those are is listed nowhere: SQLite's authorizer
reports every table a statement reads (through views within views, subqueries and CTEs) while it
prepares the statement. `SchemaCopy` prepares statements on a private, empty, in-memory copy of a
database's schema, so nothing is read and no connection that serves requests is touched; a view or
index created tomorrow, by a migration or lazily by `tlindex search`, is in the copy made after it.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Callable, Iterable

from tlindex.store.limits import connect

SchemaRow = tuple[str, str, "str | None"]  # sqlite_master's type, name and sql
Reads = frozenset[str]

# A statement here only runs on empty tables (a virtual table scanned to see what it reads), but a
# module's scan may still loop: stop it after this many progress calls (of 1,000 instructions each).
STEP_BUDGET = 1_000
MAX_VALUE = 1_000_000  # bytes any value built here may take (SQLite's length limit)
SQL_MEMO, MEMO_SQL_LENGTH = 256, 20_000  # statements whose reads are remembered (canned queries, repeated SQL)
SCHEMA_SQL = "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY rowid"
EXPLAIN_RE = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*explain\b", re.I | re.S)


class SchemaCopy:
    """An empty in-memory database with another's tables and views, which says what SQL would read there."""

    def __init__(self, rows: Iterable[SchemaRow], prepare: Callable[[sqlite3.Connection], object] | None = None):
        self.conn = connect(":memory:", check_same_thread=False)
        if prepare is not None:
            prepare(self.conn)  # the functions the real connections have, which views and queries may call
        self.conn.set_authorizer(None)
        self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE)  # empty: far less than a real database's
        names = set()  # every table and view of the real database
        for kind, name, sql in rows:
            if kind not in ("table", "view") or name.startswith("sqlite_"):
                continue
            names.add(name)
            try:
                self.conn.execute(sql)
            except (sqlite3.Error, TypeError, ValueError):
                pass  # a shadow table its virtual table made already, or a module this copy lacks
        self.names = frozenset(names)
        self.kinds = table_kinds(self.conn)
        self._steps = 0
        self.conn.set_progress_handler(self._over_budget, 1_000)
        self._by_lower = {name.lower(): name for name in self.kinds}
        self._behind: dict[str, Reads | None] = {}
        self._sql: dict[str, Reads | None] = {}

    def close(self) -> None:
        """Let the copy go: its connection closed (the functions `prepare` gave it hold it: dropped, it stays)."""
        self.conn.close()

    def _over_budget(self) -> bool:
        """Whether the statement running here has run past STEP_BUDGET (SQLite then interrupts it)."""
        self._steps += 1
        return self._steps > STEP_BUDGET

    def everything(self) -> Reads:
        """Every table and view but shadow tables (their virtual table stands for them)."""
        return frozenset(name for name in self.names if self.kinds.get(name) != "shadow")

    def knows(self, name: str) -> bool:
        """Whether the real database has a table or view of this name (SQLite's names ignore case)."""
        return name.lower() in self._by_lower or name in self.names

    def behind(self, name: str) -> Reads | None:
        """The tables and views whose rows `name` shows, itself included (as SQLite spells it; a shadow
        table's virtual table stands for it); empty for no such table; None when this copy cannot tell
        (a virtual table of a module it lacks)."""
        canonical = self._by_lower.get(name.lower())
        if canonical is None:
            return None if name in self.names else frozenset()
        if canonical not in self._behind:
            self._behind[canonical] = None  # a cycle (an index of an index of itself) cannot tell
            try:
                self._behind[canonical] = self._find_behind(canonical)
            except (sqlite3.Error, TypeError, ValueError, OverflowError):
                pass  # an index whose content table is gone, a scan over its budget: cannot tell
        return self._behind[canonical]

    def _find_behind(self, name: str) -> Reads | None:
        """behind() of a name the copy has, found (not remembered)."""
        kind = self.kinds[name]
        if kind == "view":  # the authorizer names the tables of the views within it too
            return self._expand(self._authorized("EXPLAIN SELECT * FROM " + quote(name)), skip={name})
        if kind == "virtual":  # an FTS5 index reads its content table as it runs (scanned here: empty)
            reads = self._authorized("SELECT * FROM " + quote(name))
            own = {other for other in reads if self._owner(other) == name}
            return self._expand(reads - own, skip={name})
        owner = self._owner(name)
        return self.behind(owner) if owner is not None else frozenset({name})

    def _owner(self, shadow: str) -> str | None:
        """The virtual table a shadow table belongs to: the longest virtual table name it extends with
        `_` (SQLite's own rule for shadow tables)."""
        if self.kinds.get(shadow) != "shadow":
            return None
        owners = [name for name, kind in self.kinds.items() if kind == "virtual" and shadow.startswith(name + "_")]
        return max(owners, key=len) if owners else None

    def reads(self, sql: str) -> Reads | None:
        """The tables and views `sql` reads (its named parameters NULL); None when SQLite cannot
        prepare it on this copy (a syntax error, a function or module the copy lacks)."""
        if sql in self._sql:
            return self._sql[sql]
        statement = sql if EXPLAIN_RE.match(sql) else "EXPLAIN " + sql
        try:
            found = self._expand(self._authorized(statement), skip=set())
        except (sqlite3.Error, TypeError, ValueError, OverflowError):
            found = None
        if len(sql) <= MEMO_SQL_LENGTH:
            if len(self._sql) >= SQL_MEMO:
                self._sql.pop(next(iter(self._sql)))
            self._sql[sql] = found
        return found

    def _expand(self, reads: set[str], skip: set[str]) -> Reads | None:
        """Each table read with what it shows in turn (a view's index, an index's content table)."""
        found = set(skip)
        for name in reads - skip:
            behind = self.behind(name)
            if behind is None:
                return None
            found |= behind
        return frozenset(name for name in found if self._owner(name) is None)

    def _authorized(self, sql: str) -> set[str]:
        """The tables and views SQLite reports reading while it prepares `sql` and takes its first row
        (an EXPLAIN's: its first instruction)."""
        seen: set[str] = set()

        def record(action: int, table, column, database, inner) -> int:
            if action == sqlite3.SQLITE_READ and table in self.kinds:
                seen.add(table)
            return sqlite3.SQLITE_OK

        self._steps = 0
        self.conn.set_authorizer(record)
        try:
            self.conn.execute(sql, _Null()).close()
        finally:
            self.conn.set_authorizer(None)
        return seen


class _Null(dict):
    """Named parameters, every one NULL."""

    def __missing__(self, key: str) -> None:
        return None


def table_kinds(conn: sqlite3.Connection) -> dict[str, str]:
    """Each table's kind as SQLite says: table, view, virtual or shadow (SQLite before 3.37 has no
    table_list: then a table named after a virtual table and `_` counts as its shadow table)."""
    kinds = {row[1]: row[2] for row in conn.execute("PRAGMA main.table_list") if not row[1].startswith("sqlite_")}
    if kinds:
        return kinds
    for kind, name, sql in schema_rows(conn):
        if not name.startswith("sqlite_"):
            kinds[name] = "virtual" if re.match(r"\s*create\s+virtual\b", sql or "", re.I) else kind
    virtual = [name for name, kind in kinds.items() if kind == "virtual"]
    return {name: "shadow" if kind == "table" and any(name.startswith(v + "_") for v in virtual) else kind
            for name, kind in kinds.items()}


def quote(name: str) -> str:
    """A table name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def schema_rows(conn: sqlite3.Connection) -> list[SchemaRow]:
    """A database's tables and views as sqlite_master has them, in the order they were made."""
    return [tuple(row) for row in conn.execute(SCHEMA_SQL)]
