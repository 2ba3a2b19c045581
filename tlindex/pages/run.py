"""The run page: its findings first, then ranks and sources, compiles by status, queries, every compile."""

from __future__ import annotations

import sqlite3

from tlindex.answers import runs
from tlindex.answers.compiles import time_parts
from tlindex.answers.derived import stored_findings
from tlindex.answers.findings import export_issue_count, fix_first, problems
from tlindex.answers.findings.alike import group_rows
from tlindex.answers.findings.compiling import compiling_now
from tlindex.answers.health import run_health
from tlindex.answers.queries import run_queries
from tlindex.answers.uploads import posted_as
from tlindex.answers.vllm import has_vllm
from tlindex.errors import NotFound
from tlindex.ingest.normalize.known import unknown_words
from tlindex.ingest.runs import rank_decisions
from tlindex.pages.rows import Args

COMPILES_SHOWN = 500
KINDS_SHOWN = 12
LIVE_S = 60  # a run whose logs were ingested this recently may still be written (`tlindex watch`): its page refreshes
REFRESH_S = 2  # every so many seconds


def run_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    found = runs.run_row(conn, run)
    if found is None:
        raise NotFound(f"No run {run}")
    found["ran"] = runs.command_facts(found)
    found["uploads"] = posted_as(conn, run)  # a team's server's: shown instead of its spool folder
    found.update(_sources(conn, run))
    found["timelines"] = timelines(found["sources"])
    found["by_rank"] = runs.compiles_by_rank(conn, run)
    found["rank_decisions"] = rank_decisions(conn, run)
    found["totals"] = runs.run_totals(conn, run) or {}
    found["compile_time"] = time_parts(found["totals"].get("compile_time_s") or 0, found["totals"].get("backward_time_s"))
    found["restarts"] = (run_health(conn, run, ("restarts",)) or {}).get("restarts") or 0
    found["findings"] = stored_findings(conn, [run])[run]  # as the ingest that made the run stored them
    found["problems"] = problems(found["findings"])
    first = fix_first(found["findings"])  # the one to fix first, marked when there are several
    found["fix_first"] = found["findings"].index(first) if first is not None and len(found["problems"]) > 1 else None
    world = [rank for rank in found["ranks"] if rank is not None]
    found["groups"] = group_rows(found["findings"], world)
    found["compiling"] = compiling_now(found["findings"], world)
    found["refresh_s"] = REFRESH_S if runs.ingested_since(conn, run) < LIVE_S else None
    found["exports"] = export_verdict(conn, run)
    found["vllm"] = has_vllm(conn, run)
    found["kinds"] = runs.record_kinds(conn, run, KINDS_SHOWN)
    found["unknown_kinds"] = runs.unknown_kinds(conn, run)
    found["unknown_words"] = unknown_words({row["label"]: row["records"] for row in found["unknown_kinds"]})
    found["compiles"] = runs.run_compiles(conn, run, COMPILES_SHOWN)
    return {"run": found, "queries": run_queries(conn, run)}


def _sources(conn: sqlite3.Connection, run: int) -> dict:
    sources = runs.run_sources(conn, run)
    return {"sources": sources, "ranks": sorted({s["rank"] for s in sources}, key=lambda r: (r is None, r)),
            "bytes": sum(s["bytes"] or 0 for s in sources), "ingest_errors": sum(s["errors"] for s in sources)}


def export_verdict(conn: sqlite3.Connection, run_id: int) -> dict | None:
    """tlparse's export report in one line: how many issues draft_export found, and the exported programs."""
    programs = runs.exported_programs(conn, run_id)
    if not programs:
        return None
    return {"issues": export_issue_count(conn, run_id), "programs": programs}


WHOLE_TRACE_UP_TO = 8  # processes: a run of more is offered as its overview and a trace per rank (a 256-rank run's
# whole trace is hundreds of MB, more than a trace viewer opens)


def timelines(sources: list[dict]) -> dict:
    """Which traces of a run its page offers: the whole run (a few processes), its overview (many), each rank's."""
    ranks = sorted({s["rank"] for s in sources if s["rank"] is not None})
    many = len(sources) > WHOLE_TRACE_UP_TO
    return {"whole": not many, "overview": many, "ranks": ranks if len(sources) > 1 else []}


def chromium_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    """A Perfetto trace of the run, as what streams it needs: the run, the ranks chosen (`?rank=`, repeated; None:
    every process) and whether it is the overview (each process's outermost spans); the events themselves are read
    batch by batch (tlindex.formats.chromium)."""
    if not runs.run_exists(conn, run):
        raise NotFound(f"No run {run}")
    from tlindex.formats.chromium import trace_sources

    ranks = args.integers("rank")
    if ranks and not trace_sources(conn, run, ranks):
        raise NotFound(f"Run {run} has no rank {', '.join(map(str, ranks))}")
    return {"run": run, "ranks": ranks or None, "overview": bool(args.get("overview"))}
