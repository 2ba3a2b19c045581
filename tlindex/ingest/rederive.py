"""What an older tlindex did not derive from the records it stored, derived when its database is brought up to date.

Migrations 002, 005 and 006 added tables and columns whose rows the normalizers make at ingest from records every
database keeps (envelopes and their payloads): a database ingested before them holds no collective ops, op estimates
or graph executions (002), no guard identities (005) and no compile fingerprints (006), and migrating it left them
empty. Migration 021 runs `derive` in its transaction (tlindex.Database passes it to every open): the
normalizers' own handlers read each stored record that has no rows, the identities and prints are computed as the
normalizer and the merge compute them, `BATCH` records (guards, compiles) at a time, so that memory stays bounded.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from types import SimpleNamespace

from tlindex.ingest.fingerprints import PRINTS, write_prints
from tlindex.ingest.guard_keys import guard_identity
from tlindex.ingest.normalize.handlers import ARTIFACT_HANDLERS, HANDLERS

STEP = "021_derived_by_normalizers"
BATCH = 500  # records, guards or compiles read at once (a batch of payloads is what memory holds)
# table -> the records its rows come from, (envelope kind, artifact name or None): the normalizer's handler of each
SOURCES = {
    "collective_ops": {("artifact", "inductor_collective_schedule"): ARTIFACT_HANDLERS["inductor_collective_schedule"],
                       ("inductor_output_code", None): HANDLERS["inductor_output_code"]},
    "op_estimates": {("artifact", "inductor_runtime_and_tensor_meta"):
                     ARTIFACT_HANDLERS["inductor_runtime_and_tensor_meta"]},
    "graph_executions": {("artifact", "graph_execution"): ARTIFACT_HANDLERS["graph_execution"]},
}


@dataclass
class _Rows:
    """The sink and id source a handler is given (tlindex.ingest.normalize.protocols.Normalizer): rows collected,
    ids continuing the table's."""

    next_ids: dict[str, int]
    rows: dict[str, list[tuple]] = field(default_factory=dict)

    @property
    def sink(self) -> _Rows:
        return self

    def add(self, table: str, row: tuple) -> None:
        self.rows.setdefault(table, []).append(row)

    def next_id(self, table: str) -> int:
        self.next_ids[table] += 1
        return self.next_ids[table]


def _records_without_rows(conn: sqlite3.Connection, table: str, after: int) -> list:
    """The next `BATCH` records (after envelope `after`, in the order they were logged) that `table` has rows from,
    but that have none."""
    kinds = " OR ".join("(e.kind = ?" + (" AND e.name = ?)" if name else ")") for kind, name in SOURCES[table])
    values = [value for source in SOURCES[table] for value in source if value]
    return conn.execute(
        f"SELECT e.id, e.compile, e.kind, e.name, p.text FROM envelopes e JOIN payloads p ON p.hash = e.payload "
        f"WHERE ({kinds}) AND e.id > ? AND NOT EXISTS (SELECT 1 FROM {table} t WHERE t.envelope_id = e.id) "
        f"ORDER BY e.id LIMIT ?", (*values, after, BATCH)).fetchall()


def derive_rows(conn: sqlite3.Connection, table: str) -> int:
    """The rows of `table` its records' handlers make, for the records that have none; how many were made."""
    made, after = 0, 0
    while batch := _records_without_rows(conn, table, after):
        start = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
        rows = _Rows({table: start})
        for envelope_id, compile_row, kind, name, text in batch:
            handler = SOURCES[table].get((kind, name)) or SOURCES[table][kind, None]
            compile = None if compile_row is None else SimpleNamespace(id=compile_row)
            handler(rows, None, None, envelope_id, compile, None, text)
        found = rows.rows.get(table, [])
        if found:
            conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(found[0]))})", found)
        made += len(found)
        after = batch[-1][0]
    return made


def derive_identities(conn: sqlite3.Connection) -> int:
    """Each guard's identity (tlindex.ingest.guard_keys) where it has none; how many guards."""
    made, after = 0, 0
    while batch := conn.execute("SELECT id, guard_type, text FROM guards WHERE identity IS NULL AND id > ? "
                                "ORDER BY id LIMIT ?", (after, BATCH)).fetchall():
        conn.executemany("UPDATE guards SET identity = ? WHERE id = ?",
                         [(guard_identity(guard_type, text), row) for row, guard_type, text in batch])
        made += len(batch)
        after = batch[-1][0]
    return made


def derive_prints(conn: sqlite3.Connection) -> int:
    """The prints of each compile that has none (tlindex.ingest.fingerprints, as the merge writes them); how many."""
    unknown = " OR ".join(f"{column} IS NULL" for column in PRINTS if column != "stack_print")  # (NULL: no stack)
    made, after = 0, 0
    while batch := [row for (row,) in conn.execute(f"SELECT id FROM compiles WHERE ({unknown}) AND id > ? "
                                                    f"ORDER BY id LIMIT ?", (after, BATCH))]:
        write_prints(conn, f"WHERE ({unknown}) AND id BETWEEN {batch[0]} AND {batch[-1]}")
        made += len(batch)
        after = batch[-1]
    return made


def derive(conn: sqlite3.Connection) -> str | None:
    """Everything above, in the caller's transaction; what was derived, said once (None when nothing was)."""
    counts = {table.replace("_", " "): derive_rows(conn, table) for table in SOURCES}
    counts["guard identities"] = derive_identities(conn)
    counts["compile fingerprints"] = derive_prints(conn)
    derived = ", ".join(f"{count} {what}" for what, count in counts.items() if count)
    if not derived:
        return None
    return f"rows an older tlindex did not make, derived from the records it stored (migration {STEP}): {derived}"


