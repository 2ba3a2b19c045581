"""The run page (ranks, compiles, failures, queries of one run) and its streamed Perfetto trace."""

from __future__ import annotations

import sqlite3

from datasette.utils.asgi import AsgiStream, NotFound

from tlindex.answers.findings import export_issue_count, findings, problems
from tlindex.answers.vllm import has_vllm
from tlindex.ingest.runs import rank_decisions
from tlindex.store.kinds import RECOMPILE

from ..database import dicts, int_var, one, open_database, render


def run_data(conn: sqlite3.Connection, run_id: int) -> dict | None:
    run = one(conn, "SELECT * FROM runs WHERE id = ?", (run_id,))
    if run is None:
        return None
    run["sources"] = dicts(conn.execute("""
        SELECT s.*, f.name AS file, f.path, f.id AS file_id,
               (SELECT count(*) FROM ingest_errors e WHERE e.source_id = s.id) AS errors
        FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = ? ORDER BY s.rank, s.first_time, s.pid""",
        (run_id,)))
    run["ranks"] = sorted({s["rank"] for s in run["sources"]}, key=lambda r: (r is None, r))
    run["by_rank"] = dicts(conn.execute(f"""
        SELECT s.process AS rank, sum(compile_id != '-/-') AS compiles, sum(k AND status = 'ok') AS ok,
               sum(k AND status = 'break') AS break, sum(k AND status = 'empty') AS empty,
               sum(k AND status = 'error') AS error, sum(k AND status = 'missing') AS missing,
               max(CASE WHEN NOT k THEN status END) AS unattributed, coalesce(sum({RECOMPILE}), 0) AS recompiles,
               sum(graph_breaks) AS graph_breaks, coalesce(round(sum(duration_s), 3), 0) AS compile_time_s,
               sum(c.envelope_bytes + c.payload_bytes) AS bytes
        FROM (SELECT *, compile_id != '-/-' AS k FROM compiles) c  -- k: a compilation; [-/-] has its own column
        JOIN sources s ON s.id = c.source_id WHERE c.run_id = ?
        GROUP BY s.process ORDER BY min(s.rank), min(coalesce(s.restart, 0)), min(s.pid)""", (run_id,)))
    run["rank_decisions"] = rank_decisions(conn, run_id)
    run["totals"] = one(conn, "SELECT * FROM run_totals WHERE run_id = ?", (run_id,)) or {}
    run["bytes"] = sum(s["bytes"] or 0 for s in run["sources"])
    run["ingest_errors"] = sum(s["errors"] for s in run["sources"])
    run["findings"] = findings(conn, run_id)
    run["problems"] = problems(run["findings"])
    run["exports"] = export_verdict(conn, run_id)
    run["vllm"] = has_vllm(conn, run_id)
    run["kinds"] = dicts(conn.execute("""
        SELECT v.kind, sum(v.records) AS records FROM volume v JOIN sources s ON s.id = v.source_id
        WHERE s.run_id = ? AND v.kind != 'str' GROUP BY v.kind ORDER BY records DESC, v.kind LIMIT 12""", (run_id,)))
    run["compiles"] = dicts(conn.execute("""
        SELECT id, rank, compile_id, co_name, status, fail_type, recompile_reason, graph_breaks, duration_s,
               envelope_bytes + payload_bytes AS bytes
        FROM compiles WHERE run_id = ? ORDER BY id LIMIT 500""", (run_id,)))
    return run


def export_verdict(conn: sqlite3.Connection, run_id: int) -> dict | None:
    """tlparse's export report in one line: how many issues draft_export found, and the exported programs."""
    programs = dicts(conn.execute("""
        SELECT a.id, a.size, e.line FROM envelopes e CROSS JOIN sources s CROSS JOIN artifacts a
        WHERE e.kind = 'exported_program' AND s.id = e.source_id AND s.run_id = ? AND a.envelope_id = e.id
        AND a.kind = 'exported_program' ORDER BY a.id""",
        (run_id,)))
    if not programs:
        return None
    return {"issues": export_issue_count(conn, run_id), "programs": programs}


async def run_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    run_id = int_var(request, "run")
    run = await db.execute_fn(lambda conn: run_data(conn, run_id))
    if run is None:
        raise NotFound(f"No run {run_id}")
    from tlindex.answers.queries import load_queries

    # Every canned query that takes a run, so a new one appears here without editing this page.
    queries = [query for query in load_queries().values() if any(p == "run" for p, _ in query.params)]
    return await render(datasette, request, "run.html", {"database": db.name, "run": run, "u": urls,
                                                         "queries": queries})


async def chromium_trace(datasette, request):
    """The run's chromium events as one Perfetto trace (tlindex.formats.chromium), streamed batch by batch."""
    from tlindex.formats.chromium import TraceEncoder, event_batch, process_ids

    db = (await open_database(datasette, request)).db
    run_id = int_var(request, "run")
    if not (await db.execute("SELECT 1 FROM runs WHERE id = ?", [run_id])).rows:
        raise NotFound(f"No run {run_id}")
    pids = await db.execute_fn(lambda conn: process_ids(conn, run_id))

    async def stream(writer) -> None:
        encoder = TraceEncoder(pids)
        await writer.write(encoder.head().decode())
        after = 0
        while after is not None:
            events, after = await db.execute_fn(lambda conn: event_batch(conn, run_id, pids, after))
            await writer.write(encoder.batch(events).decode())
        await writer.write(encoder.tail.decode())

    return AsgiStream(stream, content_type="application/json", headers={
        "content-disposition": f'attachment; filename="run-{run_id}-chromium.json"'})
