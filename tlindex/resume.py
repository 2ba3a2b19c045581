"""Continue a file from where its rows in the main database end.

Two uses: a grown log is parsed again from where the last ingest stopped,
with the state that ingest ended with (restore_state); and the chunks of a
big file split across workers (tlindex.chunks), parsed knowing only which
compile ids were started before them, are fitted to the file's rows when
merged, in order (fit_chunk): line numbers follow on, processes and
compilations already seen continue (their rows are replaced by combined
ones), generations follow on, spans opened earlier are closed by the chunk's
end events, and file names from earlier string tables are filled in.
"""

from __future__ import annotations

import re
import sqlite3

import orjson

from .merge import foreign_keys
from .normalize import Compile, Process
from .normalize.state import FILE_RANK_CONFLICT, RANK_CONFLICT
from .tables import COLUMNS

STRING_REF_RE = re.compile(r"^<string (\d+)>")


def restore_state(conn, file_id: int, current_only: bool = False) -> dict[int, Process]:
    """The normalizer state of a file ingested before, to continue a grown log.

    With current_only, only the compiles of each process's last generation (the
    only ones a continuation can add to) are restored.
    """
    processes: dict[int, Process] = {}
    for source_id, pid, rank, file_rank, first, last, count, size, version, commit in conn.execute(
            "SELECT id, pid, rank, file_rank, first_time, last_time, envelope_count, bytes, torch_version,"
            " torch_commit FROM sources WHERE file_id = ?", (file_id,)).fetchall():
        proc = Process(-source_id, pid, file_rank)
        proc.rank, proc.first_time, proc.last_time = rank, first, last
        proc.envelope_count, proc.bytes = count, size
        proc.torch_version, proc.torch_commit = version, commit
        proc.strings = dict(conn.execute("SELECT string_id, value FROM strings WHERE source_id = ?",
                                         (source_id,)).fetchall())
        proc.rank_conflict_reported = conn.execute(
            "SELECT 1 FROM ingest_errors WHERE source_id = ? AND kind = 'rank_mismatch' AND line > 0",
            (source_id,)).fetchone() is not None
        generation = "(SELECT max(generation) FROM compiles WHERE source_id = :source)" if current_only else "generation"
        rows = conn.execute(f"SELECT * FROM compiles WHERE source_id = :source AND generation = {generation} "
                            "ORDER BY id", {"source": source_id})
        columns = [d[0] for d in rows.description]
        for values in rows.fetchall():
            row = dict(zip(columns, values))
            compile = Compile(-row["id"], -source_id, row["rank"], row["generation"],
                              (row["compiled_autograd_id"], row["frame_id"], row["frame_compile_id"]))
            for name in ("co_name", "co_filename", "co_firstlineno", "fail_type", "fail_reason",
                         "fail_user_frame_filename", "fail_user_frame_lineno", "recompile_reason",
                         "graph_breaks", "start_time", "end_time", "duration_s", "dynamo_start",
                         "envelope_count", "envelope_bytes", "payload_bytes"):
                setattr(compile, name, row[name])
            if compile.dynamo_start is not None:
                compile.dynamo_start = -compile.dynamo_start
            compile.max_attempt = row["attempts"] - 1
            compile.started_attempts = set(range(row["attempts"])) if row["dynamo_start"] else set()
            for kind, metrics_json in conn.execute(
                    "SELECT m.kind, json_object('fail_type', fail_type, 'graph_op_count', graph_op_count,"
                    " 'restart_reasons', json(restart_reasons)) FROM metrics m WHERE m.compile = ?",
                    (row["id"],)).fetchall():
                compile.add_metrics(kind, orjson.loads(metrics_json))
            proc.all_compiles.append(compile)
        # Spans still open when the log was last read are paired with their ends now.
        for name, begin, compile_id, ts, cat in conn.execute(
                "SELECT name, begin_envelope, compile, ts_us, cat FROM chromium_events "
                "WHERE source_id = ? AND ph = 'B' ORDER BY id", (source_id,)).fetchall():
            proc.open_spans.setdefault(name, []).append(
                (-begin, -compile_id if compile_id else None, ts, cat))
        proc.generation = max((c.generation for c in proc.all_compiles), default=0)
        proc.compiles = {c.key: c for c in proc.all_compiles if c.generation == proc.generation}
        processes[pid] = proc
    return processes



def _insert(conn: sqlite3.Connection, table: str, rows: list[tuple]) -> None:
    columns = COLUMNS[table]
    conn.executemany(f"INSERT INTO staging.{table} ({', '.join(columns)}) "
                     f"VALUES ({', '.join('?' * len(columns))})", rows)


def _next_id(conn: sqlite3.Connection, table: str) -> int:
    """The first id not used yet in a staging table."""
    return conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM staging.{table}").fetchone()[0]


def _remap(conn: sqlite3.Connection, target: str, mapping: dict[int, int]) -> None:
    """Point every staging reference to `target` ids in mapping at their new ids."""
    if not mapping:
        return
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS remap (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
    conn.execute("DELETE FROM temp.remap")
    conn.executemany("INSERT INTO temp.remap VALUES (?, ?)", mapping.items())
    for table, links in foreign_keys(conn).items():
        for column, referenced in links.items():
            if referenced == target:
                conn.execute(f"UPDATE staging.{table} SET {column} = (SELECT new FROM temp.remap "
                             f"WHERE old = {column}) WHERE {column} IN (SELECT old FROM temp.remap)")


def fit_chunk(conn: sqlite3.Connection, local: dict[int, Process], file_id: int, lines_before: int,
              sha256: str) -> None:
    """Rewrite the attached staging database of a chunk as a continuation of file `file_id`.

    `local` is the state the chunk's parse ended with; `lines_before` the lines
    of the file before the chunk. Runs inside the merge's transaction.
    """
    state = restore_state(conn, file_id, current_only=True)
    plans = []
    for pid, mine in local.items():
        known = state.get(pid)
        if known is not None:
            # The chunk's first generation is the file's current one (the chunk was
            # given its compile ids): an id seen there continues that compile.
            continued = {c.id: (c, known.compiles[c.key]) for c in mine.all_compiles
                         if c.generation == 0 and c.key in known.compiles}
            plans.append((mine, known, continued))

    conn.execute("UPDATE staging.envelopes SET line = line + ?", (lines_before,))
    conn.execute("UPDATE staging.ingest_errors SET line = line + ? WHERE line > 0", (lines_before,))
    conn.execute("UPDATE staging.files SET id = ?, lines_ingested = lines_ingested + ?, sha256 = ?",
                 (-file_id, lines_before, sha256))
    _remap(conn, "files", {1: -file_id})
    _remap(conn, "sources", {mine.source_id: known.source_id for mine, known, _ in plans})
    _remap(conn, "compiles", {local_id: earlier.id for *_, continued in plans
                              for local_id, (_, earlier) in continued.items()})

    for mine, known, continued in plans:
        _fill_string_references(conn, known)  # before the chunk's own strings join the table
        _fit_rank_conflict(conn, mine, known, file_id)
        for compile, earlier in continued.values():
            earlier.absorb(compile)
        new = [c for c in mine.all_compiles if c.id not in continued]
        for compile in new:
            compile.generation += known.generation
            compile.source_id = known.source_id
        known.absorb(mine)
        known.all_compiles += new
        conn.execute("DELETE FROM staging.sources WHERE id = ?", (mine.source_id,))
        _insert(conn, "sources", [known.row(-file_id)])
        conn.execute("DELETE FROM staging.compiles WHERE source_id = ?", (known.source_id,))
        _insert(conn, "compiles", [c.row() for c in known.finished_compiles()])
        _close_spans(conn, known)


def _fit_rank_conflict(conn: sqlite3.Connection, mine: Process, known: Process, file_id: int) -> None:
    """Report a process that logs two ranks once, where a single pass reports it."""
    if known.rank is None or mine.rank is None:
        return  # the chunk's own report (if any) is the first
    in_stream = "FROM staging.ingest_errors WHERE source_id = ? AND kind = 'rank_mismatch' AND line > 0"
    reported = conn.execute("SELECT 1 FROM main.ingest_errors WHERE source_id = ? AND kind = 'rank_mismatch' "
                            "AND line > 0", (-known.source_id,)).fetchone()
    if not reported and mine.rank == known.rank:
        return  # the chunk compared with the same first rank
    conn.execute(f"DELETE {in_stream}", (known.source_id,))
    if reported:
        return
    # The chunk's first rank differs from the process's: a single pass reports it there.
    line, offset = conn.execute("SELECT line, offset FROM staging.envelopes WHERE source_id = ? AND rank IS NOT NULL "
                                "ORDER BY id LIMIT 1", (known.source_id,)).fetchone()
    _insert(conn, "ingest_errors", [(_next_id(conn, "ingest_errors"), -file_id, known.source_id, line, offset, 1, 0,
                                     "rank_mismatch", RANK_CONFLICT.format(pid=mine.pid, rank=mine.rank,
                                                                          first=known.rank), None)])


def _close_spans(conn: sqlite3.Connection, proc: Process) -> None:
    """End events of the chunk close spans begun before it; spans still open are written again."""
    ends = conn.execute("SELECT id, name, ts_us, compile FROM staging.chromium_events WHERE source_id = ? "
                        "AND ph = 'E' AND begin_envelope IS NULL ORDER BY id", (proc.source_id,)).fetchall()
    for event_id, name, ts, compile_id in ends:
        opened = proc.open_spans.get(name)
        if not opened:
            continue
        begin_id, begin_compile, begin_ts, cat = opened.pop()
        numeric = isinstance(ts, (int, float)) and isinstance(begin_ts, (int, float))
        conn.execute("UPDATE staging.chromium_events SET ph = 'X', compile = ?, cat = ?, ts_us = ?, "
                     "duration_us = ?, begin_envelope = ? WHERE id = ?",
                     (begin_compile if begin_compile is not None else compile_id, cat, begin_ts,
                      ts - begin_ts if numeric else None, begin_id, event_id))
    # The merge drops the file's open spans from the main database (as for a grown
    # log): write the earlier ones still open, then the chunk's, in that order.
    still_open = conn.execute("SELECT name, begin_envelope, compile, ts_us, cat FROM staging.chromium_events "
                              "WHERE source_id = ? AND ph = 'B' ORDER BY id", (proc.source_id,)).fetchall()
    conn.execute("DELETE FROM staging.chromium_events WHERE source_id = ? AND ph = 'B'", (proc.source_id,))
    spans = [(name, *span) for name, opened in proc.open_spans.items() for span in opened]
    spans += still_open
    next_id = _next_id(conn, "chromium_events")
    _insert(conn, "chromium_events", [(next_id + i, proc.source_id, compile_id, name, cat, "B", ts, None, begin, None)
                                      for i, (name, begin, compile_id, ts, cat) in enumerate(spans)])


def _fill_string_references(conn: sqlite3.Connection, proc: Process) -> None:
    """File names the chunk could not resolve: strings defined earlier in the process."""
    envelopes = "SELECT id FROM staging.envelopes WHERE source_id = :source"
    conn.execute(f"UPDATE staging.frames SET filename = (SELECT value FROM main.strings s WHERE "
                 f"s.source_id = -:source AND s.string_id = frames.filename_id) WHERE filename IS NULL "
                 f"AND filename_id IS NOT NULL AND envelope_id IN ({envelopes})", {"source": proc.source_id})
    for guard_id, user_code in conn.execute(
            f"SELECT id, user_code FROM staging.guards WHERE user_code LIKE '<string %' "
            f"AND envelope_id IN ({envelopes})", {"source": proc.source_id}).fetchall():
        match = STRING_REF_RE.match(user_code)
        value = proc.strings.get(int(match.group(1))) if match else None
        if value is not None:
            conn.execute("UPDATE staging.guards SET user_code = ? WHERE id = ?",
                         (value + user_code[match.end():], guard_id))


def report_file_ranks(conn: sqlite3.Connection, file_id: int) -> None:
    """The file-name rank check chunks skip, on the file's whole processes (after its last chunk)."""
    for source_id, file_rank, rank in conn.execute(
            "SELECT id, file_rank, rank FROM main.sources WHERE file_id = ? AND file_rank IS NOT NULL "
            "AND rank IS NOT NULL AND file_rank != rank", (file_id,)).fetchall():
        conn.execute("INSERT INTO main.ingest_errors (file_id, source_id, line, offset, lines, bytes, kind, "
                     "message) VALUES (?, ?, 0, 0, 1, 0, 'rank_mismatch', ?)",
                     (file_id, source_id, FILE_RANK_CONFLICT.format(file_rank=file_rank, rank=rank)))
