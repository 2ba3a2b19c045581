"""What the writer derives of a run, in the transaction that makes the run whole; what every reader then reads.

A run's findings and its rows of the canned queries asked of every run (`run_health`, `compile_time_totals`,
`vllm_pieces`, `rank_divergence`, `top_graph_breaks`) depend on that run alone. The ingest that writes a run calls
`derive_runs` in the transaction that names its processes (tlindex.ingest.runs.assign_runs): the findings go to
`run_findings`, each query's rows per run to its table, and the run to `derived_runs`. A reader never writes: it reads
what is stored, and a run not derived (yet: a run an ingest is still merging) is computed from the raw tables as it
is read, never stored. A change to what is derived is a schema migration whose step derives every run again
(`derive_every_run`), so nothing stored goes stale unseen.

Each stored query names, in a CTE, the rows it computes per run from the raw tables (`computed`: the run asked, else
every run not derived) and, after the line MARKER, reads the stored rows of the derived runs (the view
`run_answers_fresh`) beside them: one SQL file is both the definition of what is stored and the query.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterable

from tlindex.answers.findings import CHECKS, findings
from tlindex.answers.findings.registry import FAILED, NOT_COMPUTED, Finding
from tlindex.answers.queries import load_queries, run_sql

MARKER = "-- stored per run (tlindex.answers.derived)"
# Canned query -> (its CTE of rows per run, the table that keeps them), in the order they are stored.
STORED = {
    "run_health": (("computed", "run_health_stored"),),
    "compile_time_totals": (("computed", "run_compile_time_totals"),),
    "vllm_pieces": (("computed", "run_vllm_pieces"),),
    "rank_divergence": (("computed", "run_rank_divergence"),),
    "top_graph_breaks": (("computed", "run_graph_break_groups"), ("computed_functions", "run_graph_break_functions")),
}
FINDINGS = "run_findings"
DERIVED = "derived_runs"
CHUNK = 500  # runs named in one statement
ONE_BY_ONE = 20  # runs derived at once up to which each is computed alone (an ingest's), else all in one pass
SAY_FROM = 50  # runs derived at once from which it is said on stderr (they take a while)


def _marks(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start:start + CHUNK]


def derive_runs(conn: sqlite3.Connection, run_ids: Iterable[int]) -> list[int]:
    """Compute and store the findings and per-run answers of the runs, in the caller's transaction (what was stored
    of them before replaced); the runs derived."""
    ids = sorted({run for (run,) in conn.execute("SELECT id FROM runs")} & set(run_ids))
    if not ids:
        return []
    for part in _chunks(ids):  # first: the queries then compute these runs from the raw tables
        for table in derived_tables():
            conn.execute(f"DELETE FROM {table} WHERE run_id IN ({_marks(part)})", part)
    queries = load_queries()
    for name, parts in STORED.items():
        for cte, table in parts:
            _store(conn, per_run_sql(queries[name].sql, cte), table, ids)
    found = {run: findings(conn, run) for run in ids}
    own = "next_steps" in table_columns(conn, FINDINGS)  # (not yet, in the step of a migration before 027)
    conn.executemany(f"INSERT INTO {FINDINGS} (run_id, position, severity, kind, count, text, query, compile, items"
                     f"{', next_steps' if own else ''}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?{', ?' if own else ''})",
                     [(run, n, f.severity, f.kind, f.count, f.text, f.query, f.compile,
                       json.dumps(f.items) if f.items else None, *([f.own_next_steps] if own else []))
                      for run in ids for n, f in enumerate(found[run])])
    conn.executemany(f"INSERT INTO {DERIVED} (run_id, findings) VALUES (?, ?)", [(run, len(found[run])) for run in ids])
    return ids


def derive_every_run(conn: sqlite3.Connection) -> str | None:
    """The step of a migration that changes what is derived: every run derived again, the payload text indexed
    (an older tlindex left that to the first search) and the compiles' again (027 filled in names and files), in its
    transaction; what it says once (on stderr), or None."""
    from tlindex.ingest.text_index import index_again, index_payloads

    ids = [run for (run,) in conn.execute("SELECT id FROM runs ORDER BY id")]
    if len(ids) >= SAY_FROM:
        sys.stderr.write(f"tlindex: deriving the findings and answers of {len(ids):,} runs, and indexing their "
                         f"payloads for search (once, for this version of tlindex)\n")
    derive_runs(conn, ids)
    index_payloads(conn)
    index_again(conn, "compiles")
    return None


def stored_tables() -> list[str]:
    """The tables of the per-run answers, in the order they are stored."""
    return [table for parts in STORED.values() for _, table in parts]


def derived_tables() -> list[str]:
    """Every table the writer derives: the runs derived, their findings, their per-run answers."""
    return [DERIVED, FINDINGS, *stored_tables()]


def derived(conn: sqlite3.Connection, run_ids: list[int]) -> set[int]:
    """Those of the runs whose findings and answers are stored (a database older than migration 024, read as it
    is: those with stored findings)."""
    table = DERIVED if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (DERIVED,)).fetchone() else \
        "run_findings_stamps" if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'run_findings_stamps'"
                                              ).fetchone() else None
    if table is None:
        return set()
    found: set[int] = set()
    for part in _chunks(sorted(set(run_ids))):
        found |= {run for (run,) in conn.execute(f"SELECT run_id FROM {table} WHERE run_id IN ({_marks(part)})", part)}
    return found


def _finding(run: int, row: tuple) -> Finding:
    severity, kind, count, text, query, compile, items, next_steps = row
    made = NOT_COMPUTED if kind == FAILED else CHECKS.get(kind, NOT_COMPUTED)
    return Finding(severity, kind, count, text, query, {"run": str(run)} if query else {}, compile, made.explanation,
                   next_steps or made.next_steps, json.loads(items) if items else [], next_steps)


def stored_findings(conn: sqlite3.Connection, run_ids: Iterable[int]) -> dict[int, list[Finding]]:
    """The findings of each run, most severe first: as stored when the run was written; a run not derived (an ingest
    is still merging it) computed now, and not stored."""
    ids = sorted(set(run_ids))
    out: dict[int, list[Finding]] = {run: [] for run in ids}
    stored = derived(conn, ids)
    for part in _chunks(sorted(stored)):
        for run, *row in conn.execute(f"SELECT run_id, severity, kind, count, text, query, compile, items, next_steps FROM "
                                      f"{FINDINGS} WHERE run_id IN ({_marks(part)}) ORDER BY run_id, position", part):
            out[run].append(_finding(run, tuple(row)))
    for run in ids:
        if run not in stored:
            out[run] = findings(conn, run)
    return out


def per_run_sql(sql: str, cte: str) -> str:
    """A canned query's statement that gives the rows of its CTE `cte` (the part above MARKER), for storing."""
    if MARKER not in sql:
        raise ValueError(f"the query has no line {MARKER!r}")
    return sql.split(MARKER)[0].rstrip().rstrip(",") + f"\nSELECT * FROM {cte}"


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """A stored table's columns, in order."""
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _rows(conn: sqlite3.Connection, sql: str, run: str) -> tuple[list[str], list[tuple]]:
    cursor = run_sql(conn, sql, {"run": run, "limit": "-1"})
    return [d[0] for d in cursor.description], cursor.fetchall()


def _store(conn: sqlite3.Connection, sql: str, table: str, runs: list[int]) -> None:
    """The rows `sql` computes for the runs (not derived: the caller removed them from derived_runs), into `table` (a
    `position` column numbers each run's): a few runs asked one by one (each reads its own rows), many at once."""
    computed = [_rows(conn, sql, str(run)) for run in runs] if len(runs) <= ONE_BY_ONE else [_rows(conn, sql, "")]
    columns = table_columns(conn, table)
    wanted, placed, rows = set(runs), {}, []
    for names, found in computed:
        index = [names.index(column) if column in names else None for column in columns]
        at = names.index("run_id")
        for row in found:
            run = row[at]
            if run not in wanted:
                continue
            placed[run] = placed.get(run, -1) + 1
            rows.append(tuple(placed[run] if i is None else row[i] for i in index))
    conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({_marks(columns)})", rows)


def definitions_digest() -> str:
    """A digest of what is stored: the SQL above MARKER of each stored query, its comments and spacing aside. Another
    digest is another version of the stored rows, which needs a migration that derives every run again
    (tests/test_run_answers.py pins it)."""
    import hashlib
    import re

    queries = load_queries()
    text = "\n".join(per_run_sql(queries[name].sql, cte) for name, parts in STORED.items() for cte, _ in parts)
    return hashlib.sha256(" ".join(re.sub(r"--[^\n]*", "", text).split()).encode()).hexdigest()[:16]
