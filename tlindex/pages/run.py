"""The run page: its findings first, then ranks and sources, compiles by status, queries, every compile."""

from __future__ import annotations

import sqlite3

from tlindex.answers.derived import stored_findings
from tlindex.answers.findings import export_issue_count, problems
from tlindex.answers.health import run_health
from tlindex.answers.queries import load_queries
from tlindex.answers.runs import command_facts
from tlindex.answers.vllm import has_vllm
from tlindex.errors import NotFound
from tlindex.ingest.runs import rank_decisions
from tlindex.pages.rows import Args, dicts, one
from tlindex.store.kinds import RECOMPILE

COMPILES_SHOWN = 500


def run_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    found = one(conn, "SELECT * FROM runs WHERE id = ?", (run,))
    if found is None:
        raise NotFound(f"No run {run}")
    found["ran"] = command_facts(found)
    found.update(_sources(conn, run))
    found["by_rank"] = _by_rank(conn, run)
    found["rank_decisions"] = rank_decisions(conn, run)
    found["totals"] = one(conn, "SELECT * FROM run_totals WHERE run_id = ?", (run,)) or {}
    found["restarts"] = (run_health(conn, run, ("restarts",)) or {}).get("restarts") or 0
    found["findings"] = stored_findings(conn, [run])[run]  # as the ingest that made the run stored them
    found["problems"] = problems(found["findings"])
    found["exports"] = export_verdict(conn, run)
    found["vllm"] = has_vllm(conn, run)
    found["kinds"] = dicts(conn.execute("""
        SELECT v.kind, sum(v.records) AS records FROM volume v JOIN sources s ON s.id = v.source_id
        WHERE s.run_id = ? AND v.kind != 'str' GROUP BY v.kind ORDER BY records DESC, v.kind LIMIT 12""", (run,)))
    found["compiles"] = dicts(conn.execute(f"""
        SELECT id, rank, compile_id, co_name, status, fail_type, recompile_reason, graph_breaks, duration_s,
               envelope_bytes + payload_bytes AS bytes
        FROM compiles WHERE run_id = ? ORDER BY compile_id = '-/-', id LIMIT {COMPILES_SHOWN}""", (run,)))
    # every canned query that takes a run, so a new one appears on the page without editing it, but those that
    # cannot apply to this run (rank divergence of one process, vLLM's pieces of a run without them)
    queries = [query for query in load_queries().values() if any(p == "run" for p, _ in query.params)
               and _applies(conn, query.name, run)]
    return {"run": found, "queries": queries}


# What a canned query needs of a run to have anything to say (a query not listed here always may).
QUERY_NEEDS = {
    "rank_divergence": "SELECT count(DISTINCT process) > 1 FROM sources WHERE run_id = ?",
    "collectives": "SELECT EXISTS (SELECT 1 FROM collective_ops o JOIN compiles c ON c.id = o.compile "
                   "WHERE c.run_id = ?)",
    "export_issues": "SELECT EXISTS (SELECT 1 FROM export_issue_records e JOIN sources s ON s.id = e.source_id "
                     "WHERE s.run_id = ?)",
    "vllm_pieces": "SELECT EXISTS (SELECT 1 FROM piece_compiles p JOIN compiles c ON c.id = p.compile "
                   "WHERE c.run_id = ?)",
}


def _applies(conn: sqlite3.Connection, name: str, run: int) -> bool:
    sql = QUERY_NEEDS.get(name)
    return sql is None or bool(conn.execute(sql, (run,)).fetchone()[0])


def _sources(conn: sqlite3.Connection, run: int) -> dict:
    sources = dicts(conn.execute("""
        SELECT s.*, f.name AS file, f.path, f.id AS file_id,
               (SELECT count(*) FROM ingest_errors e WHERE e.source_id = s.id) AS errors
        FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = ? ORDER BY s.rank, s.first_time, s.pid""",
        (run,)))
    return {"sources": sources, "ranks": sorted({s["rank"] for s in sources}, key=lambda r: (r is None, r)),
            "bytes": sum(s["bytes"] or 0 for s in sources), "ingest_errors": sum(s["errors"] for s in sources)}


def _by_rank(conn: sqlite3.Connection, run: int) -> list[dict]:
    """Compiles by status per process (the [-/-] compile in a column of its own), with their totals."""
    return dicts(conn.execute(f"""
        SELECT s.process AS rank, sum(compile_id != '-/-') AS compiles, sum(k AND status = 'ok') AS ok,
               sum(k AND status = 'break') AS break, sum(k AND status = 'empty') AS empty,
               sum(k AND status = 'error') AS error, sum(k AND status = 'missing') AS missing,
               max(CASE WHEN NOT k THEN status END) AS unattributed, coalesce(sum({RECOMPILE}), 0) AS recompiles,
               sum(graph_breaks) AS graph_breaks, coalesce(round(sum(duration_s), 3), 0) AS compile_time_s,
               sum(c.envelope_bytes + c.payload_bytes) AS bytes
        FROM (SELECT *, compile_id != '-/-' AS k FROM compiles) c  -- k: a compilation; [-/-] has its own column
        JOIN sources s ON s.id = c.source_id WHERE c.run_id = ?
        GROUP BY s.process ORDER BY min(s.rank), min(coalesce(s.restart, 0)), min(s.pid)""", (run,)))


def export_verdict(conn: sqlite3.Connection, run_id: int) -> dict | None:
    """tlparse's export report in one line: how many issues draft_export found, and the exported programs."""
    programs = dicts(conn.execute("""
        SELECT a.id, a.size, e.line FROM sources s CROSS JOIN envelopes e CROSS JOIN artifacts a
        WHERE s.run_id = ? AND e.source_id = s.id AND e.kind = 'exported_program' AND a.envelope_id = e.id
        AND a.kind = 'exported_program' ORDER BY a.id""",
        (run_id,)))
    if not programs:
        return None
    return {"issues": export_issue_count(conn, run_id), "programs": programs}


def chromium_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    """The run's Perfetto trace, as what streams it needs: the run and its processes' ids in the trace
    (the events themselves are read batch by batch: tlindex.formats.chromium)."""
    from tlindex.formats.chromium import process_ids

    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run,)).fetchone() is None:
        raise NotFound(f"No run {run}")
    return {"run": run, "pids": process_ids(conn, run)}
