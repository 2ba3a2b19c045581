"""What a team's server writes of the logs posted to it (the `uploads` table, migration 025): an upload recorded as it
arrives, its state as it is ingested, and the runs retention prunes (tlindex.uploads drives it)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone

from tlindex.store.db import immediate

STATES = ("queued", "ingesting", "done", "failed")


def now() -> str:
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def record(conn: sqlite3.Connection, digest: str, meta: dict) -> tuple[int, bool]:
    """The upload of these bytes (`digest`), recorded queued unless it was posted before: (its id, whether it is
    new). `meta`: the name, size, label, run facts, gate and token the client posted (redacted by the caller)."""
    with immediate(conn):
        found = conn.execute("SELECT id FROM uploads WHERE digest = ?", (digest,)).fetchone()
        if found is not None:
            return found[0], False
        upload = conn.execute(
            "INSERT INTO uploads (digest, name, bytes, label, facts, baseline, fail_on, allow_unjudged, token, state, "
            "received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
            (digest, meta.get("name"), meta["bytes"], meta.get("label"), json.dumps(meta.get("facts") or {}),
             meta.get("baseline"), meta.get("fail_on"), int(bool(meta.get("allow_unjudged"))), meta.get("token"),
             now())).lastrowid
    return upload, True


def set_state(conn: sqlite3.Connection, upload: int, state: str, message: str | None = None,
              run_id: int | None = None) -> None:
    """An upload's state (and, when it ends, its run and what it says)."""
    assert state in STATES, state
    ended = now() if state in ("done", "failed") else None
    with immediate(conn):
        conn.execute("UPDATE uploads SET state = ?, message = coalesce(?, message), run_id = coalesce(?, run_id), "
                     "finished_at = ? WHERE id = ?", (state, message, run_id, ended, upload))


def requeue_interrupted(conn: sqlite3.Connection) -> list[int]:
    """The uploads a killed server was ingesting, queued again (their ingest is done again, once: a file ingested
    before is skipped); their ids."""
    with immediate(conn):
        ids = [row[0] for row in conn.execute("SELECT id FROM uploads WHERE state = 'ingesting'")]
        conn.execute("UPDATE uploads SET state = 'queued' WHERE state = 'ingesting'")
    return ids


def forget(conn: sqlite3.Connection, digests: list[str]) -> None:
    """The uploads of these bytes forgotten (their runs pruned or removed: posted again, they are ingested again)."""
    with immediate(conn):
        conn.executemany("DELETE FROM uploads WHERE digest = ?", [(digest,) for digest in digests])


def prunable(conn: sqlite3.Connection, keep_runs: int | None, keep_days: float | None) -> list[int]:
    """The runs retention removes: past the newest `keep_runs`, or started more than `keep_days` ago; never a run
    someone named (a label given by a person: `tlindex label`, `--label`, `--run`), one marked kept, nor the baseline
    an upload's gate names."""
    baselines = "(SELECT baseline FROM uploads WHERE baseline IS NOT NULL)"  # (NULL in an IN list: no run would go)
    runs = conn.execute(f"SELECT id, start_time FROM runs WHERE NOT (kept OR label_source IS 'given' OR label IN "
                        f"{baselines} OR CAST(id AS TEXT) IN {baselines}) ORDER BY id DESC").fetchall()
    doomed = {run for run, _ in runs[keep_runs:]} if keep_runs is not None else set()
    if keep_days is not None:
        before = (datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=keep_days)).isoformat()
        doomed |= {run for run, start in runs if start is not None and start < before}
    return sorted(doomed)
