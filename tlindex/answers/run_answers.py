"""Each run's rows of the canned queries asked of every run, stored once (migration 022) and summed when asked.

`run_health`, `compile_time_totals`, `vllm_pieces`, `rank_divergence` and `top_graph_breaks`, asked of every run,
would compute every run's rows on every request (0.3-0.85 s at 3,682 runs). Each names, in a CTE, the rows it
computes per run from the raw tables (`computed`: the run asked, else every run not stored) and, after the line
MARKER, reads the stored rows of the runs whose stamp is current (the view `run_answers_fresh`) beside them: so one
SQL file is both the definition of what is stored and the query, and a run not stored (yet, or any more) is answered
as before. `store_answers` runs the part above MARKER for the runs not stored and keeps the rows, with the stamp the
view `run_answers_now` gives the run (its processes, their bytes, the migrations, the version of what is stored);
`tlindex.answers.findings.stored` calls it wherever it stores the findings (`tlindex run`, `runs`,
`findings`, a server), and a run removed takes its rows with it (a trigger).
"""

from __future__ import annotations

import sqlite3

from tlindex.answers.queries import load_queries, run_sql
from tlindex.store.db import immediate

MARKER = "-- stored per run (tlindex.answers.run_answers)"
STAMPS = "run_answers_stamps"
# Canned query -> (its CTE of rows per run, the table that keeps them), in the order they are stored.
STORED = {
    "run_health": (("computed", "run_health_stored"),),
    "compile_time_totals": (("computed", "run_compile_time_totals"),),
    "vllm_pieces": (("computed", "run_vllm_pieces"),),
    "rank_divergence": (("computed", "run_rank_divergence"),),
    "top_graph_breaks": (("computed", "run_graph_break_groups"), ("computed_functions", "run_graph_break_functions")),
}
CHUNK = 500


def _marks(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def has_store(conn: sqlite3.Connection) -> bool:
    """Whether the database has the stored answers (a database older than migration 022 read as it is has not)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (STAMPS,)).fetchone() is not None


def stale(conn: sqlite3.Connection) -> list[int]:
    """The runs whose stored answers are missing or were computed from something else (none without the store)."""
    if not has_store(conn):
        return []
    return [row[0] for row in conn.execute(
        "SELECT id FROM runs WHERE id NOT IN (SELECT run_id FROM run_answers_fresh) ORDER BY id")]


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
    """The rows `sql` computes for the runs not stored, into `table` (a `position` column numbers each run's): a few
    runs asked one by one (each reads its own rows), many at once (every run not stored, in one pass)."""
    if len(runs) <= ONE_BY_ONE:
        computed = [_rows(conn, sql, str(run)) for run in runs]
    else:
        computed = [_rows(conn, sql, "")]
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


ONE_BY_ONE = 20  # runs not stored up to which each is computed alone (an ingest's), else all at once


def store_answers(conn: sqlite3.Connection) -> int:
    """Compute and store the answers of every run whose stored ones are stale, in one transaction (the runs'
    stamps and rows read at once); how many runs."""
    if not has_store(conn):
        return 0
    with immediate(conn):
        todo = stale(conn)
        if not todo:
            return 0
        now: list[tuple[int, str]] = []
        for start in range(0, len(todo), CHUNK):
            part = todo[start:start + CHUNK]
            now += conn.execute(f"SELECT run_id, stamp FROM run_answers_now WHERE run_id IN ({_marks(part)})",
                                part).fetchall()
            for table in (STAMPS, *(table for parts in STORED.values() for _, table in parts)):
                conn.execute(f"DELETE FROM {table} WHERE run_id IN ({_marks(part)})", part)
        queries = load_queries()
        for name, parts in STORED.items():
            for cte, table in parts:
                _store(conn, per_run_sql(queries[name].sql, cte), table, todo)
        conn.executemany(f"INSERT INTO {STAMPS} (run_id, stamp) VALUES (?, ?)", now)
    return len(todo)


def definitions_digest() -> str:
    """A digest of what is stored: the SQL above MARKER of each stored query, its comments and spacing aside. Another
    digest is another version of the stored rows, which a migration gives the view `run_answers_now`
    (tests/test_run_answers.py pins both)."""
    import hashlib
    import re

    queries = load_queries()
    text = "\n".join(per_run_sql(queries[name].sql, cte) for name, parts in STORED.items() for cte, _ in parts)
    return hashlib.sha256(" ".join(re.sub(r"--[^\n]*", "", text).split()).encode()).hexdigest()[:16]
