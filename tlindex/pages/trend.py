"""The trend page: compile health run after run (tlindex.answers.health), each metric over the runs, and the
graph breaks that cost most across runs (tlindex.answers.top_breaks)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.health import METRICS, count_runs, health, select_runs
from tlindex.answers.runs import run_label
from tlindex.answers.top_breaks import break_type, site_url, top_graph_breaks
from tlindex.answers.trend import mark_torch_changes
from tlindex.errors import UsageError
from tlindex.pages.rows import Args

BREAKS_SHOWN = 50
LAST_SHOWN = 100  # runs the trend page shows by default (the newest; ?all=1 for every run)


def trend_data(conn: sqlite3.Connection, args: Args) -> dict:
    """The runs named (?run=, any name), else the last 100 (?last=N, ?all=1 for every run), oldest first
    (?label=PREFIX keeps those whose label starts with it), with their health, and one series per metric that any
    of them logged."""
    label, named = args.get("label") or None, [name for name in args.getlist("run") if name]
    last = None if named or args.get("all", "") not in ("", "0") else args.integer("last", LAST_SHOWN)
    if last is not None and last < 1:
        raise UsageError(f"last must be a whole number of runs, 1 or more, not {last}")
    runs = select_runs(conn, named, label, last)
    rows = mark_torch_changes(health(conn, runs))
    series = []
    for metric in METRICS:
        points = [{"run": row["run_id"], "label": row["label"], "start": row.get("start_time"),
                   "value": row[metric.column], "torch": row["torch_version"],
                   "torch_changed_from": row["torch_changed_from"]} for row in rows]
        if any(point["value"] is not None for point in points):
            series.append({"metric": metric.name, "column": metric.column, "unit": metric.unit, "what": metric.what,
                           "points": points})
    return {"rows": rows, "series": series, "label": args.get("label") or "", "named": args.getlist("run"),
            "last": last, "matching": len(runs) if last is None else count_runs(conn, label)}


def graph_breaks_data(conn: sqlite3.Connection, args: Args) -> dict:
    """The graph-break groups that cost most, across every run or of one (?run=, any name), costliest first."""
    run = args.run(conn)
    groups = top_graph_breaks(conn, run)
    for group in groups:
        group["type"], group["site"] = break_type(group), site_url(group["gb"])
    label = run_label(conn, run) if run is not None else None
    return {"run": run, "label": label, "groups": groups[:BREAKS_SHOWN], "count": len(groups)}
