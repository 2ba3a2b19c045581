"""Group sources into runs, and keep the run-level columns up to date.

A run is one torch job. Sources in one directory belong to the same run when
they share a pid (one process writing several files, e.g. draft_export), their
time spans overlap (the ranks of one distributed job), or they are the rank
files of the directory and no rank appears twice; a script run twice into the
same directory gives two runs. `--run LABEL` puts every new
source in the run of that label instead.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class _Groups:
    """Union-find over source ids."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, item: int) -> int:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _run_for_label(conn: sqlite3.Connection, label: str) -> int:
    row = conn.execute("SELECT id FROM runs WHERE label = ?", (label,)).fetchone()
    if row:
        return row[0]
    return conn.execute("INSERT INTO runs (label) VALUES (?)", (label,)).lastrowid


def _unique_label(conn: sqlite3.Connection, base: str) -> str:
    label, n = base, 1
    while conn.execute("SELECT 1 FROM runs WHERE label = ?", (label,)).fetchone():
        n += 1
        label = f"{base} ({n})"
    return label


def assign_runs(conn: sqlite3.Connection, label: str | None = None, changed_files: tuple[int, ...] = ()) -> list[int]:
    """Give every source without a run its run; return the runs touched. One transaction.

    The runs of `changed_files` (continued logs: their sources keep their run) are refreshed too.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Runs whose sources were all replaced (--replace) give their labels back first.
        conn.execute("DELETE FROM runs WHERE id NOT IN (SELECT run_id FROM sources WHERE run_id IS NOT NULL)")
        pending = conn.execute(
            "SELECT s.id, f.directory FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id IS NULL"
        ).fetchall()
        touched: set[int] = {run_id for (run_id,) in conn.execute(
            f"SELECT DISTINCT run_id FROM sources WHERE run_id IS NOT NULL AND file_id IN "
            f"({', '.join('?' * len(changed_files))})", changed_files)} if changed_files else set()
        if label is not None and pending:
            run_id = _run_for_label(conn, label)
            conn.executemany("UPDATE sources SET run_id = ? WHERE id = ?", [(run_id, s) for s, _ in pending])
            touched.add(run_id)
        elif pending:
            directories = sorted({directory for _, directory in pending})
            for directory in directories:
                touched |= _group_directory(conn, directory)
        conn.execute(
            "UPDATE compiles SET run_id = (SELECT run_id FROM sources WHERE sources.id = compiles.source_id) "
            "WHERE run_id IS NULL OR run_id IS NOT (SELECT run_id FROM sources WHERE sources.id = compiles.source_id)")
        _resolve_cross_file_strings(conn)
        for run_id in touched:
            _refresh_run(conn, run_id)
        conn.execute("DELETE FROM runs WHERE id NOT IN (SELECT run_id FROM sources WHERE run_id IS NOT NULL)")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return sorted(touched)


def _group_directory(conn: sqlite3.Connection, directory: str) -> set[int]:
    rows = conn.execute(
        "SELECT s.id, s.run_id, s.pid, s.first_time, s.last_time FROM sources s "
        "JOIN files f ON f.id = s.file_id WHERE f.directory = ? ORDER BY s.first_time, s.id",
        (directory,)).fetchall()
    groups = _Groups()
    # Rank files (dedicated_log_torch_trace_rank_N_*.log) of one directory, each rank once,
    # are one job however their times fall (tlparse --all-ranks-html reads them so too).
    rank_files = conn.execute(
        "SELECT s.id, s.file_rank FROM sources s JOIN files f ON f.id = s.file_id "
        "WHERE f.directory = ? AND s.file_rank IS NOT NULL", (directory,)).fetchall()
    if len(rank_files) > 1 and len({rank for _, rank in rank_files}) == len(rank_files):
        for source_id, _ in rank_files[1:]:
            groups.union(source_id, rank_files[0][0])
    by_pid: dict[int, int] = {}
    # Sweep in start order: a source overlapping the running end of a group joins it.
    group_end: str | None = None
    previous: int | None = None
    for source_id, _, pid, first, last in rows:
        groups.find(source_id)
        if pid is not None:
            if pid in by_pid:
                groups.union(source_id, by_pid[pid])
            by_pid[pid] = source_id
        if previous is not None and first is not None and group_end is not None and first <= group_end:
            groups.union(source_id, previous)
            group_end = max(group_end, last or first)
        else:
            group_end = last or first
        previous = source_id
    members: dict[int, list[tuple]] = {}
    for row in rows:
        members.setdefault(groups.find(row[0]), []).append(row)
    touched = set()
    for group in members.values():
        if all(run_id is not None for _, run_id, *_ in group):
            continue
        existing = sorted({run_id for _, run_id, *_ in group if run_id is not None})
        if existing:
            run_id = existing[0]
        else:
            start = min((first for *_, first, _ in group if first), default="")
            base = f"{Path(directory).name}@{start[:19]}" if start else Path(directory).name
            run_id = conn.execute("INSERT INTO runs (label) VALUES (?)",
                                  (_unique_label(conn, base),)).lastrowid
        conn.executemany("UPDATE sources SET run_id = ? WHERE id = ? AND run_id IS NULL",
                         [(run_id, source_id) for source_id, *_ in group])
        touched.add(run_id)
    return touched


def _resolve_cross_file_strings(conn: sqlite3.Connection) -> None:
    """Resolve frame file names defined in another file of the same process (draft_export)."""
    conn.execute("""
        UPDATE frames SET filename = (
            SELECT st.value FROM envelopes e
            JOIN sources s ON s.id = e.source_id
            JOIN sources peer ON peer.run_id = s.run_id AND peer.pid = s.pid
            JOIN strings st ON st.source_id = peer.id AND st.string_id = frames.filename_id
            WHERE e.id = frames.envelope_id LIMIT 1)
        WHERE filename IS NULL AND filename_id IS NOT NULL""")


def _refresh_run(conn: sqlite3.Connection, run_id: int) -> None:
    conn.execute("""
        UPDATE runs SET
            directory = (SELECT min(f.directory) FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = runs.id),
            torch_version = (SELECT torch_version FROM sources WHERE run_id = runs.id AND torch_version IS NOT NULL
                             ORDER BY first_time LIMIT 1),
            torch_commit = (SELECT torch_commit FROM sources WHERE run_id = runs.id AND torch_commit IS NOT NULL
                            ORDER BY first_time LIMIT 1),
            start_time = (SELECT min(first_time) FROM sources WHERE run_id = runs.id),
            end_time = (SELECT max(last_time) FROM sources WHERE run_id = runs.id),
            world_size = (SELECT nullif(count(DISTINCT rank), 0) FROM sources WHERE run_id = runs.id),
            source_count = (SELECT count(*) FROM sources WHERE run_id = runs.id)
        WHERE id = ?""", (run_id,))


class UnknownRun(ValueError):
    """A run name that names no run, or several."""


def resolve_run(conn: sqlite3.Connection, name: str) -> dict:
    """A run by id, label, or unique label prefix: {"id", "label"}."""
    rows = conn.execute("SELECT id, label FROM runs").fetchall()
    found = [r for r in rows if str(r[0]) == name or r[1] == name] or [r for r in rows if r[1].startswith(name)]
    if len(found) != 1:
        raise UnknownRun(f"{'no run' if not found else 'several runs'} match {name!r}: give a run id or a "
                         f"unique label prefix")
    return dict(zip(("id", "label"), found[0]))
