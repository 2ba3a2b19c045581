"""What a report of some runs holds, read once to place its files: their compiles, vLLM piece compiles, artifacts
and the configs their metrics name, and each log file of a run with its process."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from tlindex.answers.compiles import alike
from tlindex.store.tables import METRICS_CONFIGS

GROUPED_FROM = 9  # processes: a run of more has a compile page per rank group, not per rank (alike_compiles)


def _marks(runs: list[int]) -> str:
    return ",".join("?" * len(runs))


def compile_runs(conn: sqlite3.Connection, runs: list[int]) -> dict[int, int]:
    """compile row -> its run, of the runs."""
    return dict(conn.execute(f"SELECT id, run_id FROM compiles WHERE run_id IN ({_marks(runs)})", runs).fetchall())


def alike_compiles(conn: sqlite3.Connection, runs: list[int]) -> dict[int, int]:
    """Of runs of GROUPED_FROM processes or more: each compile whose page is its rank group's first rank's (the same
    compile there: compiles.alike; that page lists every rank's), without the compiles of vLLM pieces (a page each)."""
    same: dict[int, int] = {}
    for (run,) in conn.execute(f"""SELECT run_id FROM sources WHERE run_id IN ({_marks(runs)}) GROUP BY run_id
                                   HAVING count(*) >= {GROUPED_FROM}""", runs).fetchall():
        same.update((compile, first) for compile, first in alike(conn, run).items() if compile != first)
    pieces = {compile for (compile,) in conn.execute(f"""SELECT DISTINCT p.compile FROM piece_compiles p
                JOIN compiles c ON c.id = p.compile WHERE c.run_id IN ({_marks(runs)})""", runs)}
    return {compile: first for compile, first in same.items() if not {compile, first} & pieces}


def piece_compiles(conn: sqlite3.Connection, runs: list[int]) -> dict[int, int]:
    """vLLM piece compile -> its compile, of the runs."""
    return dict(conn.execute(f"""SELECT p.id, p.compile FROM piece_compiles p
                JOIN compiles c ON c.id = p.compile WHERE c.run_id IN ({_marks(runs)})""", runs).fetchall())


def run_artifacts(conn: sqlite3.Connection, runs: list[int]) -> Iterator[tuple[int, int, str | None, int]]:
    """The runs' artifacts as (artifact, run, payload, whether it is a provenance mapping), read as iterated."""
    return conn.execute(f"""
                SELECT a.id, s.run_id, a.payload, a.name = 'inductor_provenance_tracking_node_mappings'
                FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id
                JOIN sources s ON s.id = e.source_id WHERE s.run_id IN ({_marks(runs)})""", runs)


def config_payloads(conn: sqlite3.Connection, runs: list[int]) -> set[str]:
    """The payloads of the configs the runs' compiles' metrics logged (the compile pages link them)."""
    return {digest for row in conn.execute(f"""
                SELECT {', '.join(f"m.{column}" for column in METRICS_CONFIGS)}
                FROM metrics m JOIN compiles c ON c.id = m.compile WHERE c.run_id IN ({_marks(runs)})""", runs)
            for digest in row if digest}


def log_processes(conn: sqlite3.Connection, run: int) -> list[tuple[int, str | None, int | None]]:
    """Each log file of a run with its first process and its rank, by rank, then restart, then file."""
    return conn.execute("""
            SELECT file_id, min(process), min(rank) FROM sources WHERE run_id = ? GROUP BY file_id
            ORDER BY min(rank), min(coalesce(restart, 0)), file_id""", (run,)).fetchall()
