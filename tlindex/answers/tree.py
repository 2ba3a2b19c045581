"""The tree page's reads: runs, their compiles and their artifacts, each with its own text as the filter reads it
(`text`, lower-cased by SQLite's `lower`: the page's filter box reads the same texts), kept by the filter's words."""

from __future__ import annotations

import sqlite3

from tlindex.answers.sql import dicts, one

# Each node's own text, as the filter reads it (the browser's filter box reads the same, from the page).
RUN_TEXT = "lower('run ' || r.id || ' ' || r.label)"
COMPILE_TEXT = ("lower('[' || c.compile_id || ']' || CASE WHEN c.generation > 0 THEN '~' || c.generation ELSE '' END"
                " || ifnull(' rank ' || c.rank, '') || ' ' || ifnull(c.co_name, '') || ' ' || c.status)")
ARTIFACT_TEXT = "lower(a.kind || ' ' || a.name)"
ARTIFACT_PATH = f"{RUN_TEXT} || char(10) || {COMPILE_TEXT} || char(10) || {ARTIFACT_TEXT}"


def _where(words: list[str], path: str) -> tuple[str, list[str]]:
    """SQL keeping the rows whose `path` holds every word, and its parameters."""
    return " AND ".join([f"instr({path}, ?) > 0" for _ in words]) or "1", list(words)


def _in(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def artifact_counts(conn: sqlite3.Connection, words: list[str], runs: list[int]) -> dict[int, int]:
    """compile row -> how many of its artifacts the filter keeps (every artifact without a filter), of the runs."""
    where, params = _where(words, ARTIFACT_PATH)
    return dict(conn.execute(f"""SELECT a.compile, count(*) FROM compiles c JOIN artifacts a ON a.compile = c.id
        JOIN runs r ON r.id = c.run_id WHERE c.run_id IN ({_in(runs)}) AND {where} GROUP BY a.compile""",
                             [*runs, *params]))


def tree_runs(conn: sqlite3.Connection, only: list[int]) -> list[dict]:
    """The runs' rows as the tree lists them, oldest first, each with its text."""
    return dicts(conn.execute(f"SELECT r.id, r.label, r.start_time, r.world_size, {RUN_TEXT} AS text "
                              f"FROM runs r WHERE r.id IN ({_in(only)}) ORDER BY r.start_time, r.id", only))


def tree_compiles(conn: sqlite3.Connection, runs: list[int]) -> dict[int, list[dict]]:
    """run -> its compiles, by rank and then in the order each process logged them (of the runs); `counted` says
    which are compiles (compile_times: not [-/-], not an export's compile context)."""
    found: dict[int, list[dict]] = {}
    for compile in dicts(conn.execute(f"""
            SELECT c.id, c.run_id, c.compile_id, c.rank, c.generation, c.co_name, c.status, {COMPILE_TEXT} AS text,
                   EXISTS (SELECT 1 FROM compile_times t WHERE t.compile = c.id) AS counted
            FROM compiles c JOIN runs r ON r.id = c.run_id WHERE c.run_id IN ({_in(runs)})
            ORDER BY c.run_id, c.rank, c.source_id, c.id""", runs)):
        found.setdefault(compile.pop("run_id"), []).append(compile)
    return found


def newest_runs(conn: sqlite3.Connection, last: int) -> tuple[list[int], int]:
    """The ids of the newest `last` runs, and how many older ones there are."""
    ids = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY start_time DESC, id DESC LIMIT ?", (last,))]
    return ids, conn.execute("SELECT count(*) FROM runs").fetchone()[0] - len(ids)


def tree_artifacts(conn: sqlite3.Connection, compile: int, words: list[str], limit: int) -> list[dict]:
    """The first `limit` artifacts of a compile that the filter keeps, in the order it logged them, with their text."""
    where, params = _where(words, ARTIFACT_PATH)
    return dicts(conn.execute(f"""
        SELECT a.id, a.kind, a.name, a.size, {ARTIFACT_TEXT} AS text FROM artifacts a
        JOIN compiles c ON c.id = a.compile JOIN runs r ON r.id = c.run_id
        WHERE a.compile = ? AND {where} ORDER BY a.envelope_id LIMIT ?""", [compile, *params, limit]))


def picked_artifact(conn: sqlite3.Connection, artifact: int) -> dict | None:
    """An artifact with its compile and run, as the tree names it while a second one is picked; None when none."""
    return one(conn, """SELECT a.id, a.kind, a.name, a.size, c.id AS compile, c.compile_id, c.rank, c.run_id,
                                r.label AS run_label
                         FROM artifacts a LEFT JOIN compiles c ON c.id = a.compile LEFT JOIN runs r ON r.id = c.run_id
                         WHERE a.id = ?""", (artifact,))


def ungrouped_compiles(conn: sqlite3.Connection) -> int:
    """How many compiles are in no run (an ingest stopped between its merge and its grouping)."""
    return conn.execute("SELECT count(*) FROM compiles WHERE run_id IS NULL").fetchone()[0]
