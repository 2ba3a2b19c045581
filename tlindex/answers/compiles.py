"""One compilation's rows, as its page reads them: the compile, its stack, recompile reasons, metrics, guards,
graph breaks, cache events, symbols, spans, artifacts, collectives, and the compiles beside it."""

from __future__ import annotations

import sqlite3

from tlindex.answers.sql import dicts, one


def compile_row(conn: sqlite3.Connection, compile: int) -> dict | None:
    """A compile's row, with its run's label, its log's file name, its process's pid and its compile time (the view
    compile_times: NULL for a row that is no compile); None when there is none."""
    return one(conn, """
        SELECT c.*, r.label AS run_label, f.name AS file, s.pid, t.compile_time_s, t.frames_s, t.backward_s
        FROM compiles c JOIN sources s ON s.id = c.source_id JOIN files f ON f.id = s.file_id
        LEFT JOIN runs r ON r.id = c.run_id LEFT JOIN compile_times t ON t.compile = c.id WHERE c.id = ?""", (compile,))


def time_parts(total_s: float | None, backward_s: float | None) -> dict | None:
    """A compile time and what it is made of, as every surface says it ("30.2 s: 22.7 s tracing and compiling
    frames, 7.5 s compiling backward"): the total, the frames' part and the backward's (None when there is no
    backward); None when no time is known."""
    if total_s is None:
        return None
    backward = round(backward_s, 3) if backward_s else None
    return {"total_s": round(total_s, 3), "frames_s": round(total_s - (backward or 0), 3), "backward_s": backward}


def time_text(parts: dict | None, frames: str = "frames") -> str | None:
    """time_parts in words, for a terminal: `30.2 s: 22.7 s tracing and compiling frames, 7.5 s compiling backward`."""
    if parts is None:
        return None
    if not parts["backward_s"]:
        return f"{parts['total_s']} s"
    return (f"{parts['total_s']} s: {parts['frames_s']} s tracing and compiling {frames}, {parts['backward_s']} s "
            f"compiling backward")


def siblings(conn: sqlite3.Connection, compile: dict) -> list[dict]:
    """The other compiles of a compile's frame in its process and generation, in the order torch numbered them."""
    return dicts(conn.execute("""
        SELECT id, compile_id, status FROM compiles WHERE source_id = ? AND generation = ?
        AND compiled_autograd_id IS ? AND frame_id IS ? AND id != ? ORDER BY frame_compile_id""",
        (compile["source_id"], compile["generation"], compile["compiled_autograd_id"], compile["frame_id"],
         compile["id"])))


def alike(conn: sqlite3.Connection, run: int | None) -> dict[int, int]:
    """Each compile of a run's rank groups (rank_divergence's `group` rows: processes that compiled the same) with the
    same compile on its group's first process (that one's own with itself), for each process whose compiles match the
    first's one for one: compile id, status, code and cache results ([-/-], what a process logged outside any compile,
    is its own); {} when no two processes compiled the same."""
    if run is None or conn.execute("SELECT count(*) FROM sources WHERE run_id = ? AND process IS NOT NULL",
                                   (run,)).fetchone()[0] < 2:
        return {}
    groups = rank_groups(conn, run)
    if not any(len(group) > 1 for group in groups):
        return {}
    found: dict[str, list[tuple[int, str]]] = {}
    for process, compile, said in conn.execute("""
            SELECT s.process, c.id, c.compile_id || '|' || c.status || '|' || coalesce(c.co_name, '') || '|'
                   || coalesce((SELECT group_concat(e.result, ' ') FROM cache_events e WHERE e.compile = c.id), '')
            FROM sources s JOIN compiles c ON c.source_id = s.id
            WHERE s.run_id = ? AND s.process IS NOT NULL ORDER BY s.id, c.id""", (run,)):
        found.setdefault(process, []).append((compile, said))  # (its [-/-] too: no compile, never another's)
    same: dict[int, int] = {}
    for first, *others in (group for group in groups if len(group) > 1):
        mine = found.get(first, [])
        for other in others:
            theirs = found.get(other, [])
            if [said for _, said in theirs] == [said for _, said in mine]:
                same.update({compile: to for (compile, said), (to, _) in zip(theirs, mine) if not said.startswith("-/-|")})
                same.update({to: to for to, said in mine if not said.startswith("-/-|")})
    return same


def rank_groups(conn: sqlite3.Connection, run: int) -> list[list[str]]:
    """The processes of each of a run's rank groups (rank_divergence's `group` rows), in rank order, the largest group
    first: stored by the writer, computed while the run is not derived."""
    if conn.execute("SELECT 1 FROM run_answers_fresh WHERE run_id = ?", (run,)).fetchone():
        rows = conn.execute("SELECT ranks FROM run_rank_divergence WHERE run_id = ? AND finding = 'group'", (run,))
    else:
        from tlindex.answers.queries import load_queries, run_sql

        rows = run_sql(conn, "SELECT ranks FROM (" + load_queries()["rank_divergence"].sql + ") WHERE finding = "
                             "'group'", {"run": str(run)})
    return sorted(([name.strip() for name in str(ranks).split(",")] for (ranks,) in rows), key=lambda g: -len(g))


def run_processes(conn: sqlite3.Connection, run: int) -> list[str]:
    """The names of a run's ranked processes (sources.process: "3", "1 (restart 1)")."""
    return [process for (process,) in conn.execute(
        "SELECT DISTINCT process FROM sources WHERE run_id = ? AND process IS NOT NULL", (run,))]


def alike_ranks(conn: sqlite3.Connection, compile: dict) -> list[dict]:
    """The same compile on every process of its rank group (alike), in rank order: id, rank, status, compile time and
    start; [] when no other process compiled it the same."""
    if compile["compile_id"] == "-/-":  # no compile: never another's (alike)
        return []
    same = alike(conn, compile["run_id"])
    first = same.get(compile["id"])
    ids = [found for found, to in same.items() if to == first] if first is not None else []
    if len(ids) < 2:
        return []
    return dicts(conn.execute(f"""
        SELECT c.id, s.process AS rank, c.status, t.compile_time_s, c.start_time
        FROM compiles c JOIN sources s ON s.id = c.source_id LEFT JOIN compile_times t ON t.compile = c.id
        WHERE c.id IN ({", ".join("?" * len(ids))}) ORDER BY s.rank, coalesce(s.restart, 0), s.pid""", ids))


def _cut(column: str, chars: int) -> str:
    """SQL for a column of a log's text read up to one character past `chars` (enough to say it was longer)."""
    return f"substr({column}, 1, {chars + 1}) AS {column}"


def stack(conn: sqlite3.Connection, envelope: int) -> list[dict]:
    """The frames of a record's stack, by depth."""
    return dicts(conn.execute(
        "SELECT filename, line, name, loc FROM frames WHERE envelope_id = ? AND stack = 'stack' ORDER BY depth",
        (envelope,)))


def recompile_reasons(conn: sqlite3.Connection, compile: int, chars: int) -> list[dict]:
    """The guards that failed before a compile (why it recompiled), each reason read up to `chars` + 1 characters."""
    return dicts(conn.execute(
        f"SELECT position, previous_compile_id, {_cut('reason', chars)} FROM failed_guards WHERE compile = ? "
        "ORDER BY id", (compile,)))


def compiled_pieces(conn: sqlite3.Connection, compile: int) -> int:
    """How many vLLM pieces a compile compiled (a piece of an abandoned attempt was cut short: not counted)."""
    return conn.execute(
        "SELECT count(*) FROM piece_compile_spans WHERE compile = ? AND NOT abandoned", (compile,)).fetchone()[0]


def metrics(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """A compile's metrics rows, in the order it logged them."""
    return dicts(conn.execute("SELECT * FROM metrics WHERE compile = ? ORDER BY id", (compile,)))


def guards(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """A compile's guards, in the order it logged them."""
    return dicts(conn.execute(
        "SELECT origin, depth, guard_type, text, source, user_code, symbol, value, reason FROM guards "
        "WHERE compile = ? ORDER BY envelope_id, position", (compile,)))


def graph_breaks(conn: sqlite3.Connection, compile: int, chars: int) -> list[dict]:
    """A compile's graph breaks, each reason read up to `chars` + 1 characters and `cut` when longer than `chars`."""
    return dicts(conn.execute(
        f"SELECT id, {_cut('reason', chars)}, length(reason) > {chars} AS cut, user_file, "
        "user_line FROM graph_break_events WHERE compile = ? ORDER BY id", (compile,)))


def cache_events(conn: sqlite3.Connection, compile: int, chars: int) -> list[dict]:
    """A compile's cache hits and misses, each reason read up to `chars` + 1 characters."""
    return dicts(conn.execute(
        f"SELECT cache, result, key, {_cut('reason', chars)} FROM cache_events WHERE compile = ? ORDER BY id",
        (compile,)))


def spans(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """A compile's chromium spans that have a time, by start."""
    return dicts(conn.execute(
        "SELECT name, ts_us, duration_us FROM chromium_events WHERE compile = ? AND ph = 'X' "
        "AND ts_us IS NOT NULL AND duration_us IS NOT NULL ORDER BY ts_us",  # a span without a time has no place
        (compile,)))


def artifacts(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """A compile's artifacts in the order it logged them, with their record's facts and a link record's URL."""
    return dicts(conn.execute("""
        SELECT a.id, a.kind, a.name, a.size, a.payload, e.time, e.line, e.attempt, e.subgraph_name,
               CASE WHEN a.kind = 'link' THEN json_extract(e.metadata, '$.url') END AS url
        FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id WHERE a.compile = ? ORDER BY a.envelope_id""",
        (compile,)))


def collective_ops(conn: sqlite3.Connection, compile: int) -> list[tuple[str, str, str]]:
    """A compile's collectives as (origin: schedule or code, op, collective), in order."""
    return conn.execute(
        "SELECT origin, op, collective FROM collective_ops WHERE compile = ? ORDER BY envelope_id, position",
        (compile,)).fetchall()


def collective_ranks(conn: sqlite3.Connection, compile: dict) -> list[dict]:
    """The same compile id on the run's other ranks, each with its scheduled ops (`ops`) and collectives (`shown`)."""
    return dicts(conn.execute("""
        SELECT c.id, c.rank, coalesce((SELECT group_concat(op, ' ') FROM (SELECT op FROM collective_ops
            WHERE compile = c.id AND origin = 'schedule' ORDER BY envelope_id, position)), '') AS ops,
            (SELECT group_concat(collective, ' ') FROM (SELECT collective FROM collective_ops
            WHERE compile = c.id AND origin = 'schedule' ORDER BY envelope_id, position)) AS shown
        FROM compiles c WHERE c.run_id = ? AND c.compile_id = ? AND c.id != ? ORDER BY c.rank""",
        (compile["run_id"], compile["compile_id"], compile["id"])))


def op_estimate(conn: sqlite3.Connection, compile: int) -> dict | None:
    """How many ops Inductor estimated for a compile, and their estimated runtime in ms."""
    return one(conn, "SELECT count(*) AS ops, sum(estimated_runtime_ns) / 1e6 AS ms FROM op_estimates "
                     "WHERE compile = ?", (compile,))
