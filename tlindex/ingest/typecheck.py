"""Types at the door: a column declared INTEGER or REAL holds a number (or NULL), whatever the log said.

A log written by another torch, a bug or a hostile hand can put `"x"`, `[1]`, `{}` or an integer
past 64 bits where a number belongs. Handlers store values as logged, and SQLite keeps text in a
numeric column; every page, finding and query after that would have to check again. Instead, a
staging database is checked once before it is merged (`enforce_types`): each value of a typed
column that is not a number becomes NULL, and an ingest note (`bad_value`) names the file, the line
of the record that carried it, the column and the value as logged. Code that reads a typed column
may then trust it; nothing downstream re-checks.

The typed columns are read from the schema itself (their declared type), so a column added by a
migration is checked the day it is added. Columns the normalizer fills itself (ids, references,
counts, sizes: NOT NULL) are not read from a log and are not checked.
"""

from __future__ import annotations

import functools
import math
import sqlite3

from tlindex.store.tables import COLUMNS

# Which of SQLite's storage classes each declared type accepts (an INTEGER column stores 1.0 as 1;
# a REAL one that is not an integer stays real, and 1e308 stays real in an INTEGER column: refused).
ACCEPTED = {"INTEGER": ("integer",), "REAL": ("integer", "real")}
NOUN = {"INTEGER": "a whole number", "REAL": "a number"}
# Where the record that carried a row's values is: the envelope column each table links to.
ENVELOPE_OF = {"envelopes": "id", "chromium_events": "begin_envelope", "compiles": "dynamo_start"}
SHOWN = 120  # characters of a refused value kept in the note
# Columns that hold a point in time, with their unit per second: a number outside 1970-9999 is no time
# (the pages turn these into dates, which Python refuses outside that span).
TIMES = {("metrics", "start_time"): 1, ("chromium_events", "ts_us"): 1_000_000}
LAST_TIME_S = 253_402_300_800  # 10000-01-01


@functools.lru_cache(maxsize=1)
def typed_columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """{table: ((column, declared type), ...)}: the nullable INTEGER and REAL columns rows fill, less
    references to other rows (the normalizer's own ids)."""
    from tlindex.store.db import schema_image

    image, found = schema_image(), {}
    for table, filled in COLUMNS.items():
        references = {row[3] for row in image.execute(f"PRAGMA foreign_key_list({table})")}
        columns = tuple((name, declared) for _, name, declared, not_null, _, primary_key
                        in image.execute(f"PRAGMA table_info({table})")
                        if declared in ACCEPTED and not not_null and not primary_key
                        and name in filled and name not in references)
        if columns:
            found[table] = columns
    return found


def valid(value: object, declared: str, per_second: float | None = None) -> bool:
    """Whether a Python value is what a column of the declared type (a time, with `per_second`) may hold:
    an integer of 64 bits, a finite float for REAL, a flag; a time within 1970-9999."""
    if value is None:
        return True
    if isinstance(value, bool):
        return per_second is None  # a flag: SQLite stores it as 0 or 1; no time
    if isinstance(value, int):
        fits = -(1 << 63) <= value < (1 << 63)
    else:
        fits = declared == "REAL" and isinstance(value, float) and math.isfinite(value)
    return fits and (per_second is None or 0 <= value < LAST_TIME_S * per_second)


def _wrong(table: str, name: str, declared: str) -> str:
    """SQL true for a value of the column that is not of its type (a time: not within 1970-9999)."""
    classes = ", ".join(repr(t) for t in ACCEPTED[declared])
    wrong = f"typeof(t.{name}) NOT IN ('null', {classes}) OR t.{name} IN (9e999, -9e999)"  # or infinite
    per_second = TIMES.get((table, name))
    if per_second is not None:
        wrong += f" OR t.{name} < 0 OR t.{name} >= {LAST_TIME_S * per_second}"
    return wrong


def _envelope_link(conn: sqlite3.Connection, table: str) -> str | None:
    if table in ENVELOPE_OF:
        return ENVELOPE_OF[table]
    columns = {row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")}
    return "envelope_id" if "envelope_id" in columns else None


def enforce_types(conn: sqlite3.Connection, file_id: int, next_error_id: int) -> int:
    """NULL every value of a typed column of this staging database that is not a number, each with a
    `bad_value` ingest note (file, line, column, the value as logged); the number of notes."""
    notes = []
    for table, columns in typed_columns().items():
        wrong = " OR ".join(_wrong(table, name, declared) for name, declared in columns)
        link = _envelope_link(conn, table)
        where = (f"e.line, e.offset, e.source_id, e.kind FROM {table} t LEFT JOIN envelopes e ON e.id = t.{link}"
                 if link else f"NULL, NULL, NULL, NULL FROM {table} t")
        selected = ", ".join(f"t.{name}" for name, _ in columns)
        rows = conn.execute(f"SELECT t.rowid, {selected}, {where} WHERE {wrong}").fetchall()
        for row in rows:
            rowid, values, (line, offset, source, kind) = row[0], row[1:1 + len(columns)], row[1 + len(columns):]
            for (name, declared), value in zip(columns, values):
                if valid(value, declared, TIMES.get((table, name))):
                    continue
                conn.execute(f"UPDATE {table} SET {name} = NULL WHERE rowid = ?", (rowid,))
                shown = value if isinstance(value, str) else repr(value)
                shown = shown if len(shown) <= SHOWN else shown[:SHOWN] + "…"
                record = f"{kind} record" if kind else "a record"
                notes.append((next_error_id + len(notes), file_id, source, line or 0, offset or 0, 1, 0, "bad_value",
                              f"{table}.{name}: {record} gives {shown!r} where {noun(table, name, declared)} "
                              f"belongs; the column is NULL (the log line keeps the value)", shown))
    if notes:
        conn.executemany(f"INSERT INTO ingest_errors ({', '.join(COLUMNS['ingest_errors'])}) "
                         f"VALUES ({', '.join('?' * len(COLUMNS['ingest_errors']))})", notes)
    return len(notes)


def noun(table: str, name: str, declared: str) -> str:
    """What a column holds, in words."""
    return "a time (1970-9999)" if (table, name) in TIMES else NOUN[declared]
