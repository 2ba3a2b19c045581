"""Continue a file from where its rows in the main database end.

Two uses: a grown log is parsed again from where the last ingest stopped,
with the state that ingest ended with (restore_state); and the chunks of a
big file split across workers (tlindex.ingest.chunks), parsed knowing only which
compile ids were started before them, are fitted to the file's rows when
merged, in order (fit_chunk): line numbers follow on, processes and
compilations already seen continue (their rows are replaced by combined
ones), generations follow on, spans opened earlier are closed by the chunk's
end events, and file names from earlier string tables are filled in.
"""

from __future__ import annotations

import sqlite3

import orjson

from tlindex.ingest.merge import foreign_keys
from tlindex.ingest.normalize import Compile, Process
from tlindex.ingest.normalize.spans import FRAME_SPAN, WARM_SPAN, close_spans_of_chunk, restore_open_spans
from tlindex.ingest.normalize.state import FILE_RANK_CONFLICT, RANK_CONFLICT
from tlindex.ingest.normalize.strings import fill_string_references_of_chunk, restore_strings
from tlindex.ingest.staging import insert_rows, next_staging_id


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
        restore_strings(conn, proc, source_id)
        proc.rank_conflict_reported = conn.execute(
            "SELECT 1 FROM ingest_errors WHERE source_id = ? AND kind = 'rank_mismatch' AND line > 0",
            (source_id,)).fetchone() is not None
        generation = "(SELECT max(generation) FROM compiles WHERE source_id = :source)" if current_only else "generation"
        rows = conn.execute(f"SELECT * FROM compiles WHERE source_id = :source AND generation = {generation} "
                            "ORDER BY id", {"source": source_id})
        columns = [d[0] for d in rows.description]
        for values in rows.fetchall():
            row = dict(zip(columns, values))
            metrics = [(kind, orjson.loads(text)) for kind, text in conn.execute(
                "SELECT m.kind, json_object('fail_type', fail_type, 'graph_op_count', graph_op_count,"
                " 'restart_reasons', json(restart_reasons)) FROM metrics m WHERE m.compile = ?", (row["id"],))]
            ended = conn.execute(  # what decides a compile without metrics ended (Compile.status), as recorded
                "SELECT EXISTS (SELECT 1 FROM chromium_events WHERE compile = :id AND name = :warm AND ph IN ('X', 'E')), "
                "EXISTS (SELECT 1 FROM chromium_events WHERE compile = :id AND name = :span AND ph IN ('X', 'E'))",
                {"id": row["id"], "warm": WARM_SPAN, "span": FRAME_SPAN}).fetchone()
            compile = Compile.restore(row, metrics, (bool(ended[0]), bool(ended[1])))
            proc.all_compiles.append(compile)
        restore_open_spans(conn, proc, source_id)
        proc.generation = max((c.generation for c in proc.all_compiles), default=0)
        proc.compiles = {c.key: c for c in proc.all_compiles if c.generation == proc.generation}
        processes[pid] = proc
    return processes



def _remap(conn: sqlite3.Connection, mappings: dict[str, dict[int, int]], shifted: dict[str, dict[str, str]]) -> None:
    """Point every staging reference to the ids of each target table in `mappings` at their new ids, and set the
    `shifted` columns ({table: {column: SQL expression}}): one UPDATE per staging table, so that a table is
    rewritten once (the envelopes of a chunk were rewritten three times: lines, processes, compiles)."""
    for target, mapping in mappings.items():
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS remap_{target} (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
        conn.execute(f"DELETE FROM temp.remap_{target}")
        conn.executemany(f"INSERT INTO temp.remap_{target} VALUES (?, ?)", mapping.items())
    for table, links in foreign_keys(conn).items():
        sets = dict(shifted.get(table, {}))
        remapped = [(column, referenced) for column, referenced in links.items() if mappings.get(referenced)]
        for column, referenced in remapped:
            sets[column] = f"coalesce((SELECT new FROM temp.remap_{referenced} WHERE old = {column}), {column})"
        if not sets:
            continue
        where = "" if table in shifted else " WHERE " + " OR ".join(
            f"{column} IN (SELECT old FROM temp.remap_{referenced})" for column, referenced in remapped)
        conn.execute(f"UPDATE staging.{table} SET {', '.join(f'{c} = {e}' for c, e in sets.items())}{where}")


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

    conn.execute("UPDATE staging.files SET id = ?, lines_ingested = lines_ingested + ?, sha256 = ?",
                 (-file_id, lines_before, sha256))
    lines = int(lines_before)
    _remap(conn, {"files": {1: -file_id},
                  "sources": {mine.source_id: known.source_id for mine, known, _ in plans},
                  "compiles": {local_id: earlier.id for *_, continued in plans
                               for local_id, (_, earlier) in continued.items()}},
           {"envelopes": {"line": f"line + {lines}"},
            "ingest_errors": {"line": f"CASE WHEN line > 0 THEN line + {lines} ELSE line END"}})

    for mine, known, continued in plans:
        fill_string_references_of_chunk(conn, known)  # before the chunk's own strings join the table
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
        insert_rows(conn, "sources", [known.row(-file_id)])
        conn.execute("DELETE FROM staging.compiles WHERE source_id = ?", (known.source_id,))
        insert_rows(conn, "compiles", [c.row() for c in known.finished_compiles()])
        close_spans_of_chunk(conn, known)


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
    insert_rows(conn, "ingest_errors", [(next_staging_id(conn, "ingest_errors"), -file_id, known.source_id, line, offset, 1, 0,
                                     "rank_mismatch", RANK_CONFLICT.format(pid=mine.pid, rank=mine.rank,
                                                                          first=known.rank), None)])


def report_file_ranks(conn: sqlite3.Connection, file_id: int) -> None:
    """The file-name rank check chunks skip, on the file's whole processes (after its last chunk)."""
    for source_id, file_rank, rank in conn.execute(
            "SELECT id, file_rank, rank FROM main.sources WHERE file_id = ? AND file_rank IS NOT NULL "
            "AND rank IS NOT NULL AND file_rank != rank", (file_id,)).fetchall():
        conn.execute("INSERT INTO main.ingest_errors (file_id, source_id, line, offset, lines, bytes, kind, "
                     "message) VALUES (?, ?, 0, 0, 1, 0, 'rank_mismatch', ?)",
                     (file_id, source_id, FILE_RANK_CONFLICT.format(file_rank=file_rank, rank=rank)))
