"""The runs a database holds, read: which a list shows (a filter, a screen, the last N), their rows and counts as the
runs page and `tlindex runs` list them, one run as its pages read it (its row, label, totals, sources, compiles by
rank, kinds of record, compiles, exported programs), the runs holding some logs, what `tlindex run` kept of a
command."""

from __future__ import annotations

import datetime
import json
import re
import shlex
import sqlite3
from dataclasses import dataclass

from tlindex.answers.derived import stored_findings
from tlindex.answers.findings import problems
from tlindex.answers.names import resolve_run
from tlindex.answers.sql import dicts, one
from tlindex.errors import UsageError
from tlindex.ingest.normalize.known import kind_name, known
from tlindex.ingest.runs import rank_decisions, ranks_text
from tlindex.store.kinds import RECOMPILE

PAGE_SIZE = 50  # runs a screen of the runs page shows (and `tlindex runs` lists by default)
COMMAND_FAILED = "coalesce(r.exit_code, 0) != 0 OR r.signal IS NOT NULL"
FAILING = f"EXISTS (SELECT 1 FROM run_findings f WHERE f.run_id = r.id AND f.severity = 'error') OR {COMMAND_FAILED}"


@dataclass(frozen=True)
class RunFilter:
    """Which runs a list shows: a label prefix, a first and last day (YYYY-MM-DD, of their start), failing ones
    only (a compile failed, or the command `tlindex run` ran failed)."""

    label: str | None = None
    since: str | None = None
    until: str | None = None
    failing: bool = False

    def where(self, conn: sqlite3.Connection) -> tuple[str, list]:
        """The SQL condition on runs `r` and its parameters."""
        clauses, params = ["1"], []
        if self.label:
            clauses.append("substr(r.label, 1, ?) = ?")
            params += [len(self.label), self.label]
        if self.since:
            clauses.append("r.start_time >= ?")
            params.append(self.since)
        if self.until:
            clauses.append("r.start_time < date(?, '+1 day')")
            params.append(self.until)
        if self.failing:  # the runs not derived yet (an ingest is merging them) are computed here: none is missed
            unstored = [run for run in (row[0] for row in conn.execute(
                        "SELECT id FROM runs WHERE id NOT IN (SELECT run_id FROM run_answers_fresh)"))
                        if any(f.severity == "error" for f in stored_findings(conn, [run])[run])]
            clauses.append(f"({FAILING} OR r.id IN ({','.join('?' * len(unstored))}))")
            params += unstored
        return " AND ".join(clauses), params

    def as_args(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in (("label", self.label), ("since", self.since), ("until", self.until),
                                    ("failing", "1" if self.failing else None)) if v]


def day(name: str, text: str | None) -> str | None:
    """A YYYY-MM-DD argument, or UsageError (400)."""
    if not text:
        return None
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            raise ValueError
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{name} must be a day as YYYY-MM-DD, not {text[:40]!r}") from None


def listed_runs(conn: sqlite3.Connection, chosen: RunFilter, page: int | None, size: int = PAGE_SIZE) -> dict:
    """One screen of the runs `chosen` keeps, counted from the newest (page 1, the default: the newest `size` runs),
    oldest first within it: their ids, and where the screen is among them (`number` of `pages`, `matching` runs of
    `total`, the first shown being the `first`-th oldest)."""
    where, params = chosen.where(conn)
    total = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    matching = conn.execute(f"SELECT count(*) FROM runs r WHERE {where}", params).fetchone()[0]
    pages = max(1, -(-matching // size))
    number = 1 if page is None else page
    if not 1 <= number <= pages:
        raise UsageError(f"page must be a whole number from 1 to {pages}, not {number}")
    ids = [row[0] for row in conn.execute(f"SELECT r.id FROM runs r WHERE {where} ORDER BY r.start_time DESC, "
                                          f"r.id DESC LIMIT ? OFFSET ?", [*params, size, (number - 1) * size])][::-1]
    return {"ids": ids, "number": number, "pages": pages, "size": size, "matching": matching, "total": total,
            "first": max(1, matching - number * size + 1), "args": chosen.as_args()}


def last_runs(conn: sqlite3.Connection, chosen: RunFilter, last: int | None) -> tuple[list[int], int]:
    """The ids of the last `last` runs `chosen` keeps (all of them when None), oldest first, and how many it keeps."""
    where, params = chosen.where(conn)
    matching = conn.execute(f"SELECT count(*) FROM runs r WHERE {where}", params).fetchone()[0]
    ids = [row[0] for row in conn.execute(f"SELECT r.id FROM runs r WHERE {where} ORDER BY r.start_time DESC, r.id DESC"
                                          f" LIMIT ?", [*params, -1 if last is None else last])]
    return ids[::-1], matching


def run_rows(conn: sqlite3.Connection, ids: list[int]) -> list[dict]:
    """The runs' rows with their counts, oldest first."""
    if not ids:
        return []
    return dicts(conn.execute(f"""
        SELECT r.*, (SELECT count(*) FROM compile_times c WHERE c.run_id = r.id) AS compiles,
               (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.status = 'error') AS errors,
               (SELECT sum(bytes) FROM sources s WHERE s.run_id = r.id) AS bytes
        FROM runs r WHERE r.id IN ({",".join("?" * len(ids))}) ORDER BY r.start_time, r.id""", ids))


def run_row(conn: sqlite3.Connection, run: int) -> dict | None:
    """A run's row; None when there is none."""
    return one(conn, "SELECT * FROM runs WHERE id = ?", (run,))


def run_exists(conn: sqlite3.Connection, run: int) -> bool:
    """Whether the database holds a run of this id."""
    return conn.execute("SELECT 1 FROM runs WHERE id = ?", (run,)).fetchone() is not None


def run_label(conn: sqlite3.Connection, run: int) -> str | None:
    """A run's label; None when there is no such run."""
    label = conn.execute("SELECT label FROM runs WHERE id = ?", (run,)).fetchone()
    return label[0] if label else None


def run_labels(conn: sqlite3.Connection, runs: list[int]) -> dict[int, str]:
    """The labels of the runs, by id."""
    return dict(conn.execute(f"SELECT id, label FROM runs WHERE id IN ({','.join('?' * len(runs))})",
                             runs).fetchall())


def run_totals(conn: sqlite3.Connection, run: int) -> dict | None:
    """A run's row of the view run_totals; None when it has no compiles."""
    return one(conn, "SELECT * FROM run_totals WHERE run_id = ?", (run,))


def run_ranks(conn: sqlite3.Connection, run: int) -> list[int]:
    """The ranks of a run's processes, in order."""
    return [rank for (rank,) in conn.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? AND rank IS NOT NULL "
                                             "ORDER BY rank", (run,))]


def ingested_since(conn: sqlite3.Connection, run: int) -> float:
    """Seconds since a log of the run was last ingested (a run `tlindex watch` follows is ingested every few)."""
    (seconds,) = conn.execute("""
        SELECT (julianday('now') - julianday(max(f.ingested_at))) * 86400 FROM sources s JOIN files f ON f.id = s.file_id
        WHERE s.run_id = ?""", (run,)).fetchone()
    return float("inf") if seconds is None else seconds


def run_sources(conn: sqlite3.Connection, run: int) -> list[dict]:
    """A run's processes (its sources) by rank, each with its log file and how many ingest errors it had."""
    return dicts(conn.execute("""
        SELECT s.*, f.name AS file, f.path, f.id AS file_id,
               (SELECT count(*) FROM ingest_errors e WHERE e.source_id = s.id) AS errors
        FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = ? ORDER BY s.rank, s.first_time, s.pid""",
        (run,)))


def compiles_by_rank(conn: sqlite3.Connection, run: int) -> list[dict]:
    """A run's compiles (compile_times) by status per process, [-/-] in a column of its own, with their totals."""
    return dicts(conn.execute(f"""
        SELECT s.process AS rank, count(t.compile) AS compiles, count(CASE WHEN t.status = 'ok' THEN 1 END) AS ok,
               count(CASE WHEN t.status = 'break' THEN 1 END) AS break,
               count(CASE WHEN t.status = 'empty' THEN 1 END) AS empty,
               count(CASE WHEN t.status = 'error' THEN 1 END) AS error,
               count(CASE WHEN t.status = 'missing' THEN 1 END) AS missing,
               max(CASE WHEN c.compile_id = '-/-' THEN c.status END) AS unattributed,
               count(CASE WHEN c.{RECOMPILE} THEN t.compile END) AS recompiles,
               sum(c.graph_breaks) AS graph_breaks, coalesce(round(sum(t.compile_time_s), 3), 0) AS compile_time_s,
               sum(c.envelope_bytes + c.payload_bytes) AS bytes
        FROM compiles c LEFT JOIN compile_times t ON t.compile = c.id  -- t: a compile; [-/-] has its own column
        JOIN sources s ON s.id = c.source_id WHERE c.run_id = ?
        GROUP BY s.process ORDER BY min(s.rank), min(coalesce(s.restart, 0)), min(s.pid)""", (run,)))


def record_kinds(conn: sqlite3.Connection, run: int, shown: int) -> list[dict]:
    """The `shown` kinds of record a run logged most (string tables aside), with how many records of each."""
    return dicts(conn.execute("""
        SELECT v.kind, sum(v.records) AS records FROM volume v JOIN sources s ON s.id = v.source_id
        WHERE s.run_id = ? AND v.kind != 'str' GROUP BY v.kind ORDER BY records DESC, v.kind LIMIT ?""", (run, shown)))


def unknown_kinds(conn: sqlite3.Connection, run: int) -> list[dict]:
    """The kinds of record a run logged that tlindex does not know yet (tlindex.ingest.normalize.known), most records
    first: {"kind", "name", "label", "records"} (name: the artifact's, for an artifact)."""
    rows = conn.execute("""SELECT v.kind, v.name, sum(v.records) FROM volume v JOIN sources s ON s.id = v.source_id
                           WHERE s.run_id = ? GROUP BY v.kind, v.name""", (run,)).fetchall()
    found = [{"kind": kind, "name": name if kind == "artifact" else None, "label": kind_name(kind, name),
              "records": records} for kind, name, records in rows if not known(kind, name)]
    merged: dict[str, dict] = {}  # another kind's metadata names (graph_dump, ...) are no kinds of their own
    for row in found:
        merged.setdefault(row["label"], {**row, "records": 0})["records"] += row["records"]
    return sorted(merged.values(), key=lambda row: (-row["records"], row["label"]))


def run_compiles(conn: sqlite3.Connection, run: int, shown: int) -> list[dict]:
    """A run's first `shown` compiles, then the rows that are none ([-/-], an export's compile context), each with its
    compile time (compile_times) and the bytes it logged."""
    return dicts(conn.execute("""
        SELECT c.id, c.rank, c.compile_id, c.co_name, c.status, c.fail_type, c.recompile_reason, c.graph_breaks,
               t.compile_time_s, t.backward_s, c.envelope_bytes + c.payload_bytes AS bytes
        FROM compiles c LEFT JOIN compile_times t ON t.compile = c.id WHERE c.run_id = ?
        ORDER BY t.compile IS NULL, c.compile_id = '-/-', c.id LIMIT ?""", (run, shown)))


def exported_programs(conn: sqlite3.Connection, run: int) -> list[dict]:
    """The programs a run's torch.export calls logged (their artifacts: id, size and line)."""
    return dicts(conn.execute("""
        SELECT a.id, a.size, e.line FROM sources s CROSS JOIN envelopes e CROSS JOIN artifacts a
        WHERE s.run_id = ? AND e.source_id = s.id AND e.kind = 'exported_program' AND a.envelope_id = e.id
        AND a.kind = 'exported_program' ORDER BY a.id""",
        (run,)))


def run_count(conn: sqlite3.Connection) -> int:
    """How many runs the database holds (Datasette's home page says it beside the link to the runs)."""
    return conn.execute("SELECT count(*) FROM runs").fetchone()[0]


def runs_listing(conn: sqlite3.Connection, ids: list[int] | None = None) -> list[dict]:
    """The runs (of `ids`, else every run), oldest first, as `tlindex runs` lists them: id, label, whether it is kept
    (`tlindex label RUN --keep`), start and end, torch, ranks, compiles, failures, worst finding, and what
    `tlindex run` knew of the command that wrote it (else null)."""
    rows = dicts(conn.execute("SELECT * FROM runs ORDER BY start_time, id") if ids is None else
                 conn.execute(f"SELECT * FROM runs WHERE id IN ({','.join('?' * len(ids))}) ORDER BY start_time, id",
                              ids))
    found = stored_findings(conn, [run["id"] for run in rows])
    listed = []
    for run in rows:
        run_id = run["id"]
        counts = conn.execute("SELECT compiles, failures FROM run_totals WHERE run_id = ?", (run_id,)).fetchone() \
            or (0, 0)
        worst = problems(found[run_id])
        listed.append({"id": run_id, "label": run["label"], "kept": bool(run.get("kept")),
                       "start": run["start_time"], "end": run["end_time"],
                       "torch": run["torch_version"], "ranks": run["world_size"], "processes": run["source_count"],
                       "ranks_text": ranks_text(run["world_size"], run["source_count"] or 0,
                                                rank_decisions(conn, run_id)),
                       "compiles": counts[0], "failures": counts[1],
                       "worst_finding": worst[0].text if worst else None, "ran": command_facts(run)})
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
    """Make `runs` and `files` on this connection TEMP views of the tables (the temp schema is searched first) without
    where and by whom the runs were made: the WITHHELD columns NULL, with WITHHELD_FLAG set where `tlindex run` kept
    them; a label made of the command line (`label_source` 'command') the neutral `run N`; and the folder `tlindex run`
    traced into (often under the user's home) by its name, not its path. Every page, canned query and SQL the
    connection reads, a page added later too, then leaves them out (a report does unless --with-run-facts)."""
    columns = [row[1] for row in conn.execute("PRAGMA main.table_info(runs)")]
    if not set(WITHHELD) <= set(columns):
        return  # a database older than the run facts holds none
    traced = "command IS NOT NULL"  # a run `tlindex run` made: its directory is tlindex's trace folder
    replaced = {name: "NULL" for name in WITHHELD}
    replaced["directory"] = f"CASE WHEN {traced} THEN {_name_of('directory')} ELSE directory END"
    if "label_source" in columns:
        replaced["label"] = "CASE WHEN label_source = 'command' THEN 'run ' || id ELSE label END"
    shown = ", ".join(f'{replaced[name]} AS "{name}"' if name in replaced else f'"{name}"' for name in columns)
    conn.execute(f"CREATE TEMP VIEW runs AS SELECT {shown}, {traced} AS {WITHHELD_FLAG} FROM main.runs")
    file_columns = [row[1] for row in conn.execute("PRAGMA main.table_info(files)")]
    in_trace = f"id IN (SELECT s.file_id FROM main.sources s JOIN main.runs r ON r.id = s.run_id WHERE r.{traced})"
    shown_files = {"directory": f"CASE WHEN {in_trace} THEN {_name_of('directory')} ELSE directory END",
                   "path": f"CASE WHEN {in_trace} THEN {_name_of('directory')} || '/' || name ELSE path END"}
    conn.execute("CREATE TEMP VIEW files AS SELECT " + ", ".join(
        f'{shown_files[name]} AS "{name}"' if name in shown_files else f'"{name}"' for name in file_columns)
        + " FROM main.files")


def _name_of(column: str) -> str:
    """SQL for the last part of a path held in `column` (its folder's name)."""
    return f"replace({column}, rtrim({column}, replace({column}, '/', '')), '')"


def biggest_compile(conn: sqlite3.Connection, run_id: int) -> dict | None:
    """The run's compile that logged the most bytes (its records and payloads)."""
    return one(conn, """
        SELECT c.id, c.compile_id, c.co_name, c.rank, c.envelope_bytes + c.payload_bytes AS bytes
        FROM compile_times t JOIN compiles c ON c.id = t.compile WHERE t.run_id = ? ORDER BY bytes DESC, c.id LIMIT 1""",
               (run_id,))


def runs_of_paths(conn: sqlite3.Connection, paths: list[str]) -> list[int]:
    """The runs holding the logs PATHs name (as discovered by ingest)."""
    from tlindex.ingest.discover import discover

    files, _ = discover(paths)
    wanted = {str(path.resolve()) for path in files}
    return sorted({run for (path, run) in conn.execute(
        "SELECT f.path, s.run_id FROM files f JOIN sources s ON s.file_id = f.id") if path in wanted})


def runs_by_name(conn: sqlite3.Connection, names: list[str], last: int | None = None) -> list[int]:
    """Runs by id or label prefix; when none are named, the last `last` runs (every run when None)."""
    if not names:
        return sorted(row[0] for row in conn.execute("SELECT id FROM runs ORDER BY start_time DESC, id DESC LIMIT ?",
                                                     (-1 if last is None else last,)))
    return sorted({resolve_run(conn, name)["id"] for name in names})


def report_size(conn: sqlite3.Connection, runs: list[int]) -> tuple[int, int, int]:
    """(runs in the database, compiles of `runs`, their artifacts): what a report of them holds, a page each."""
    total = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    marks = ",".join("?" * len(runs))
    compiles, artifacts = conn.execute(
        f"SELECT count(DISTINCT c.id), count(a.id) FROM compiles c LEFT JOIN artifacts a ON a.compile = c.id "
        f"WHERE c.run_id IN ({marks})", runs).fetchone()
    return total, compiles, artifacts
