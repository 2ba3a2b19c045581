"""The runs page: every run of the database (or those named), with its counts and worst finding."""

from __future__ import annotations

import json
import shlex
import sqlite3

from tlindex.answers.findings import findings, problems
from tlindex.ingest.runs import rank_decisions, ranks_text
from tlindex.pages.rows import Args, dicts, one


def runs_data(conn: sqlite3.Connection, args: Args) -> dict:
    """Every run (or those of `?run=`), oldest first, with its counts, worst finding and biggest compile."""
    only = args.runs(conn) or None
    runs = dicts(conn.execute("""
        SELECT r.*, (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.compile_id != '-/-') AS compiles,
               (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.status = 'error') AS errors,
               (SELECT sum(bytes) FROM sources s WHERE s.run_id = r.id) AS bytes
        FROM runs r ORDER BY r.start_time, r.id"""))
    if only is not None:
        runs = [run for run in runs if run["id"] in only]
    for run in runs:
        run["ran"] = command_facts(run)
        run["ranks_text"] = ranks_text(run["world_size"], run["source_count"] or 0, rank_decisions(conn, run["id"]))
        found = findings(conn, run["id"])
        run["worst"] = (problems(found) or [None])[0]
        run["problem_count"] = len(problems(found))
        run["biggest"] = one(conn, """
            SELECT id, compile_id, co_name, rank, envelope_bytes + payload_bytes AS bytes FROM compiles
            WHERE run_id = ? AND compile_id != '-/-' ORDER BY bytes DESC, id LIMIT 1""", (run["id"],))
    return {"runs": runs, "only": only}


def run_count(conn: sqlite3.Connection) -> int:
    """How many runs the database holds (Datasette's home page says it beside the link to the runs)."""
    return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def runs_listing(conn: sqlite3.Connection) -> list[dict]:
    """Every run, oldest first, as `tlindex runs` lists it: id, label, start and end, torch, ranks, compiles,
    failures, worst finding, and what `tlindex run` knew of the command that wrote it (else null)."""
    listed = []
    for run in dicts(conn.execute("SELECT * FROM runs ORDER BY start_time, id")):
        run_id = run["id"]
        totals = conn.execute("SELECT compiles, failures FROM run_totals WHERE run_id = ?", (run_id,)).fetchone()
        found = problems(findings(conn, run_id))
        listed.append({"id": run_id, "label": run["label"], "start": run["start_time"], "end": run["end_time"],
                       "torch": run["torch_version"], "ranks": run["world_size"], "processes": run["source_count"],
                       "ranks_text": ranks_text(run["world_size"], run["source_count"] or 0,
                                                rank_decisions(conn, run_id)),
                       "compiles": totals[0] if totals else 0, "failures": totals[1] if totals else 0,
                       "worst_finding": found[0].text if found else None, "ran": command_facts(run)})
    return listed


def command_facts(run: dict) -> dict | None:
    """What `tlindex run` kept of the command that wrote a run (schema/014_run_facts.sql), with the command line as a
    shell would take it and how it ended in words; None for a run ingested from logs (or a database older than them).
    On a connection that withholds them (withhold_run_facts: a report), `withheld` and no line, user, host or cwd."""
    withheld = bool(run.get(WITHHELD_FLAG))
    if not run.get("command") and not withheld:
        return None
    try:
        words = json.loads(run["command"])
        line = shlex.join(words) if isinstance(words, list) else str(words)
    except (ValueError, TypeError):
        words, line = None, None if run["command"] is None else str(run["command"])
    ended = (f"killed by {run['signal']}" if run.get("signal") else
             f"exit {run['exit_code']}" if run.get("exit_code") is not None else "exit unknown")
    return {"command": words, "line": line, "ended": ended, "exit_code": run.get("exit_code"),
            "signal": run.get("signal"), "duration_s": run.get("duration_s"), "started": run.get("started"),
            "cwd": run.get("cwd"), "host": run.get("host"), "user": run.get("user"), "withheld": withheld}


WITHHELD = ("command", "cwd", "host", "user")  # where and by whom a run was made: not in a shared report
WITHHELD_FLAG = "run_facts_withheld"  # the column that says so, on a connection that withholds them


def withhold_run_facts(conn: sqlite3.Connection) -> None:
    """Make `runs` on this connection a TEMP view of the table without the WITHHELD columns (NULL; the temp schema is
    searched first), and with WITHHELD_FLAG set where `tlindex run` kept them: every page, canned query and SQL the
    connection reads, a page added later too, then leaves out where and by whom the runs were made (a report does
    unless --with-run-facts)."""
    columns = [row[1] for row in conn.execute("PRAGMA main.table_info(runs)")]
    if not set(WITHHELD) <= set(columns):
        return  # a database older than the run facts holds none
    shown = ", ".join(f"NULL AS {name}" if name in WITHHELD else f'"{name}"' for name in columns)
    conn.execute(f"CREATE TEMP VIEW runs AS SELECT {shown}, command IS NOT NULL AS {WITHHELD_FLAG} FROM main.runs")
