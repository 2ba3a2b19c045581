"""Each run's findings computed once and stored (`run_findings`), read by every list over runs.

A run's findings depend on that run alone, so they are computed once (by `tlindex run`, which prints them; by the
first list over runs that reads them: `tlindex runs`, `findings`, `serve`, or the server in the background) and
kept with a stamp of what they were computed from: the registry's `FINDINGS_VERSION`,
the database's migrations (how many, the last), and the run's processes (how many, their bytes, the newest). Reading
compares stamps, one query for any number of runs: a run whose stamp changed (more of its log ingested, a
new tlindex, a migration) or that has none (a database made before) is computed again, and stored when
the connection may write (`refresh`). So what is stored never disagrees with what the registry computes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from tlindex.answers import run_answers
from tlindex.answers.findings.registry import CHECKS, FAILED, FINDINGS_VERSION, NOT_COMPUTED, Finding, findings
from tlindex.store.db import MIGRATIONS_TABLE, immediate

TABLE, STAMPS = "run_findings", "run_findings_stamps"


def _marks(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def has_store(conn: sqlite3.Connection) -> bool:
    """Whether the database has the tables (a database older than migration 015 opened read-only has not)."""
    return conn.execute("SELECT count(*) FROM sqlite_master WHERE name IN (?, ?)", (TABLE, STAMPS)).fetchone()[0] == 2


def registry_version() -> str:
    """The version of what the checks say: FINDINGS_VERSION and which checks are registered (one more is a change)."""
    kinds = ",".join(sorted(CHECKS))
    return f"{FINDINGS_VERSION}.{hashlib.md5(kinds.encode()).hexdigest()[:8]}"


def stamps(conn: sqlite3.Connection, run_ids: list[int] | None = None) -> dict[int, str]:
    """What each run's findings would be computed from now (every run's when `run_ids` is None)."""
    migration = conn.execute(f"SELECT count(*) || '.' || max(name) FROM {MIGRATIONS_TABLE}").fetchone()[0]
    where, params = ("", []) if run_ids is None else (f"WHERE r.id IN ({_marks(run_ids)})", list(run_ids))
    version = registry_version()
    return {run: f"{version}:{migration}:{count}:{size}:{newest}" for run, count, size, newest in conn.execute(
        f"SELECT r.id, count(s.id), coalesce(sum(s.bytes), 0), max(s.id) FROM runs r LEFT JOIN sources s "
        f"ON s.run_id = r.id {where} GROUP BY r.id", params)}


def stale(conn: sqlite3.Connection, run_ids: list[int] | None = None) -> list[int]:
    """The runs (of `run_ids`, else all) whose stored findings are missing or were computed from something else."""
    now = stamps(conn, run_ids)
    if not has_store(conn):
        return sorted(now)
    kept = dict(conn.execute(f"SELECT run_id, stamp FROM {STAMPS}"
                             + ("" if run_ids is None else f" WHERE run_id IN ({_marks(list(now))})"), list(now)
                             if run_ids is not None else []))
    return sorted(run for run, stamp in now.items() if kept.get(run) != stamp)


def _finding(run: int, row: tuple) -> Finding:
    severity, kind, count, text, query, compile, items = row
    made = NOT_COMPUTED if kind == FAILED else CHECKS.get(kind, NOT_COMPUTED)
    return Finding(severity, kind, count, text, query, {"run": str(run)} if query else {}, compile, made.explanation,
                   made.next_steps, json.loads(items) if items else [])


def stored_findings(conn: sqlite3.Connection, run_ids: Iterable[int]) -> dict[int, list[Finding]]:
    """The findings of each run, most severe first: read where stored and current, computed where not."""
    ids = sorted(set(run_ids))
    out: dict[int, list[Finding]] = {run: [] for run in ids}
    if not ids:
        return out
    old = set(stale(conn, ids))
    fresh = [run for run in ids if run not in old]
    for start in range(0, len(fresh), 500):
        part = fresh[start:start + 500]
        for run, *row in conn.execute(f"SELECT run_id, severity, kind, count, text, query, compile, items FROM {TABLE} "
                                      f"WHERE run_id IN ({_marks(part)}) ORDER BY run_id, position", part):
            out[run].append(_finding(run, tuple(row)))
    for run in old:
        out[run] = findings(conn, run)
    if old:
        BACKGROUND.store(conn)
    return out


class Background:
    """Stores stale findings in a thread of its own, one at a time per database, when a server reads them (the
    plugin enables it): the request computes what it shows, the next ones read it stored."""

    def __init__(self) -> None:
        self.served: set[str] = set()  # the database files a server serves (only their findings are stored so)
        self.say = None
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def store(self, conn: sqlite3.Connection) -> None:
        path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
        path = str(Path(path).resolve()) if path else ""
        with self._lock:
            if not path or path not in self.served or path in self._running:
                return
            self._running.add(path)

        def run() -> None:
            try:
                store_findings(path, self.say)
            except Exception:  # pages compute what is not stored: never a failure of theirs
                pass
            finally:
                with self._lock:
                    self._running.discard(path)
        threading.Thread(target=run, name="tlindex-findings", daemon=True).start()


BACKGROUND = Background()


def refresh(conn: sqlite3.Connection, run_ids: list[int] | None = None, progress=None) -> int:
    """Compute and store the findings of the runs (of `run_ids`, else all) whose stored ones are stale; how many.
    They are written a second's worth at a time (one transaction each): readers and other writers wait little,
    and a stop keeps what was written. `progress(done, total)` is told after each write."""
    todo = stale(conn, run_ids)
    now = stamps(conn, todo) if todo else {}
    pending: list[tuple[int, list[Finding]]] = []
    started, done = time.monotonic(), 0
    for n, run in enumerate(todo):
        pending.append((run, findings(conn, run)))
        if n + 1 == len(todo) or time.monotonic() - started >= WRITE_EVERY_S:
            _write(conn, pending, now)
            done += len(pending)
            pending, started = [], time.monotonic()
            if progress is not None:
                progress(done, len(todo))
    return len(todo)


WRITE_EVERY_S = 1.0
SAY_FROM = 50  # stale runs from which storing their findings is said (they take a while)


def _write(conn: sqlite3.Connection, computed: list[tuple[int, list[Finding]]], now: dict[int, str]) -> None:
    ids = [run for run, _ in computed]
    with immediate(conn):
        conn.execute(f"DELETE FROM {TABLE} WHERE run_id IN ({_marks(ids)})", ids)
        conn.executemany(f"INSERT INTO {TABLE} (run_id, position, severity, kind, count, text, query, compile, items) "
                         f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(run, n, f.severity, f.kind, f.count, f.text, f.query, f.compile,
                           json.dumps(f.items) if f.items else None)
                          for run, found in computed for n, f in enumerate(found)])
        conn.executemany(f"INSERT OR REPLACE INTO {STAMPS} (run_id, stamp) VALUES (?, ?)",
                         [(run, now[run]) for run in ids])


def store_findings(db_path, say=None, run_ids: list[int] | None = None) -> int:
    """Store the findings of the runs (of `run_ids`: those an ingest made; else every run) of the database at
    `db_path` whose stored ones are stale (on the first use of a database made before they were stored, `say`
    tells that once); how many. A database that cannot be written is left as it is: its findings are computed when
    read."""
    from tlindex.errors import DatabaseError
    from tlindex.store.db import connect_read_only, write_database

    if not Path(db_path).is_file():  # nothing was ingested: no database made
        return 0
    if run_ids is not None and not run_ids:
        return 0
    conn = connect_read_only(db_path)
    try:
        todo, answers = stale(conn, run_ids), len(run_answers.stale(conn))
        first = bool(todo) and (not has_store(conn) or conn.execute(f"SELECT 1 FROM {STAMPS} LIMIT 1").fetchone() is None)
        why = ("none is stored yet: an ingest leaves them to the first reader, or an older tlindex made it" if first else
               "a newer tlindex, or a migration, makes the stored ones stale")
    finally:
        conn.close()
    if not todo and not answers:
        return 0
    try:
        conn = write_database(db_path)
    except (sqlite3.OperationalError, OSError, DatabaseError):  # (DatabaseError: a migration it lacks cannot be written)
        return 0
    try:
        if say is not None and (first and len(todo) > 1 or len(todo) >= SAY_FROM):
            also = " and the answers of every run's queries" if answers else ""
            say(f"tlindex: storing the findings of {len(todo):,} runs{also} (once: {why})")
        elif say is not None and answers >= SAY_FROM:
            say(f"tlindex: storing the answers of {answers:,} runs to the queries of every run (once)")
        done = refresh(conn, todo)
        run_answers.store_answers(conn)  # every run's that is stale: they are read of every run at once
        return done
    except sqlite3.OperationalError:  # read-only file or folder, a full disk: computed when read instead
        return 0
    finally:
        conn.close()
