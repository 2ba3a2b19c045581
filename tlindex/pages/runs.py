"""The runs page: a screen of the database's runs (or those named), with their counts and worst finding."""

from __future__ import annotations

import sqlite3

from tlindex.answers.derived import stored_findings
from tlindex.answers.findings import problems
from tlindex.answers.runs import RunFilter, biggest_compile, command_facts, day, listed_runs, run_rows
from tlindex.ingest.runs import rank_decisions, ranks_text
from tlindex.pages.rows import Args


def runs_data(conn: sqlite3.Connection, args: Args) -> dict:
    """A screen of runs (the newest by default; `?page=2` the 50 before them, `?label=`, `?since=`, `?until=`,
    `?failing=1`), or those of `?run=`, oldest first, with their counts, worst finding and biggest compile."""
    only = args.runs(conn) or None
    chosen = run_filter(args)
    paging = None if only else listed_runs(conn, chosen, args.integer("page"))
    ids = only if only else paging["ids"]
    runs = run_rows(conn, ids)
    found = stored_findings(conn, ids)
    for run in runs:
        run["ran"] = command_facts(run)
        run["ranks_text"] = ranks_text(run["world_size"], run["source_count"] or 0, rank_decisions(conn, run["id"]))
        run["worst"] = (problems(found[run["id"]]) or [None])[0]
        run["problem_count"] = len(problems(found[run["id"]]))
        run["biggest"] = biggest_compile(conn, run["id"])
    return {"runs": runs, "only": only, "paging": paging, "filter": dict(chosen.as_args())}


def run_filter(args: Args) -> RunFilter:
    """The runs `?label=`, `?since=`, `?until=` and `?failing=1` keep."""
    return RunFilter(args.get("label") or None, day("since", args.get("since")), day("until", args.get("until")),
                     args.get("failing", "") not in ("", "0"))
