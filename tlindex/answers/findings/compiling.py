"""The checks of what was compiling when a run's logs end: a log that stops mid-compile (still compiling, if the job
runs; hung or killed, if it ended) and a rank that is still compiling what every other rank finished (rank_divergence's
`behind` rows). The run page's "compiling now" reads their items; `tlindex watch` says them as logs grow."""

from __future__ import annotations

import sqlite3

from tlindex.answers.findings.ranks import divergence_rows, processes, rank_names
from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import group_ranks, plural, rank_list


def open_compiles(context: Context) -> list[dict]:
    """Each process's last compile when it began (dynamo_start) and logged no compilation metrics: what it was
    compiling at its run's last record, and for how long by then (read once)."""
    def compute() -> list[dict]:
        rows = context.conn.execute("""
            WITH last AS (SELECT max(last_time) AS t FROM sources WHERE run_id = :run)
            SELECT s.process, c.id, c.compile_id, c.co_name, c.start_time,
                   round((julianday(last.t) - julianday(c.start_time)) * 86400, 1) AS seconds
            FROM sources s CROSS JOIN last
            JOIN compiles c ON c.id = (SELECT max(id) FROM compiles WHERE source_id = s.id AND compile_id != '-/-')
            WHERE s.run_id = :run AND c.status = 'missing' AND c.dynamo_start IS NOT NULL
            ORDER BY s.rank, coalesce(s.restart, 0), s.pid""", {"run": context.run}).fetchall()
        return [{"rank": int(p) if p is not None and p.lstrip("-").isdigit() else p, "compile": row_id,
                 "compile_id": cid, "function": name, "started": start, "seconds": seconds}
                for p, row_id, cid, name, start, seconds in rows]
    return context.shared("open_compiles", compute)


def _behind(context: Context) -> dict:
    """The processes compiling what every other one finished, with rank_divergence's sentence for each."""
    return {rank: row["detail"] for row in divergence_rows(context).get("behind", [])
            for rank in rank_names(row["ranks"])}


@check("rank_behind", "warning", 15, "A rank behind every other",
       "At the run's last record one rank was still compiling a compile that every other rank had finished: it has "
       "fallen behind, and the others wait for it at their next collective (a hang, if it never finishes).",
       "Open its compile (its timeline says which phase it is in); if the job ended, its log stops there: the process "
       "hung, crashed or was killed mid-compile.")
def rank_behind(conn: sqlite3.Connection, run: int, context: Context):
    behind = _behind(context)
    late = [row for row in open_compiles(context) if row["rank"] in behind]
    if not late:
        return []
    first = late[0]
    more = f" (and {rank_list([row['rank'] for row in late[1:]], processes(context))})" if late[1:] else ""
    return [context.finding(len(late), f"{rank_list([first['rank']]).capitalize()} is behind every other: "
                                       f"{behind[first['rank']]}{more}.", compile=first["compile"],
                            items=[{**row, "behind": behind[row["rank"]]} for row in late])]


@check("mid_compile", "warning", 16, "A log stops mid-compile",
       "A process's last compile began (dynamo_start) and never logged its compilation metrics: while the job runs it "
       "is compiling now; once the job has ended its log stops mid-compile, the process hung, crashed or was killed.",
       "If the job is running, watch it (`tlindex watch`); if it ended, open the compile: its last records say what it "
       "was doing, and the process's own output (a Python traceback, an OOM kill) why it stopped.")
def mid_compile(conn: sqlite3.Connection, run: int, context: Context):
    behind = _behind(context)
    rows = [row for row in open_compiles(context) if row["rank"] not in behind]
    if not rows:
        return []
    ranked = all(row["rank"] is not None for row in rows)
    where = {row["rank"]: f"[{row['compile_id']}]" + (f" {row['function']}" if row["function"] else "")
             for row in rows} if ranked else {}
    said = group_ranks(where, among=processes(context)) if ranked else \
        ", ".join(f"[{row['compile_id']}] {row['function'] or ''}".rstrip() for row in rows)
    seconds = [row["seconds"] for row in rows if row["seconds"] is not None]
    span = "" if not seconds else f", {min(seconds):g} s in" if min(seconds) == max(seconds) else \
        f", {min(seconds):g}–{max(seconds):g} s in"
    return [context.finding(len(rows), f"{plural(len(rows), 'log')} stop{'s' * (len(rows) == 1)} mid-compile "
                                       f"({said}{span} at the last record): still compiling if the job runs, else it "
                                       f"hung or was killed.", compile=rows[0]["compile"], items=rows)]


def compiling_now(found: list, world: list) -> list[str]:
    """What the run's findings say was compiling at its last record, a line per group of ranks as people say them:
    "rank 37: compiling [4/1] forward for 212.0 s at the last record; the other 255 ranks finished it, …" (the run
    page's "compiling now", `tlindex watch`'s lines)."""
    lines: list[str] = []
    open_: dict[str, list] = {}
    for finding in found:
        if finding.kind == "rank_behind":
            lines += [f"{rank_list([item['rank']])}: {item['behind']}" for item in finding.items]
        elif finding.kind == "mid_compile":
            for item in finding.items:
                where = f"[{item['compile_id']}]" + (f" {item['function']}" if item["function"] else "")
                open_.setdefault(where, []).append(item)
    for where, items in open_.items():
        seconds = [item["seconds"] for item in items if item["seconds"] is not None]
        span = "" if not seconds else f" for {min(seconds):g} s" if min(seconds) == max(seconds) else \
            f" for {min(seconds):g}–{max(seconds):g} s"
        ranks = [item["rank"] for item in items]
        named = rank_list(ranks, world) if None not in ranks else plural(len(items), "process", "processes")
        lines.append(f"{named}: compiling {where}{span} at the last record")
    return lines
