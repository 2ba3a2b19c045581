"""The trend page: compile health run after run (tlindex.answers.health), each metric over the runs, and the
graph breaks that cost most across runs (tlindex.answers.top_breaks)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.health import METRICS, health, select_runs
from tlindex.answers.top_breaks import break_type, site_url, top_graph_breaks
from tlindex.pages.rows import Args

BREAKS_SHOWN = 50


def trend_data(conn: sqlite3.Connection, args: Args) -> dict:
    """The runs named (?run=, any name) or every run, oldest first (?label=PREFIX keeps those whose label starts
    with it), with their health, and one series per metric that any of them logged."""
    runs = select_runs(conn, args.getlist("run"), args.get("label") or None)
    rows = health(conn, runs)
    series = []
    for metric in METRICS:
        points = [{"run": row["run_id"], "label": row["label"], "value": row[metric.column]} for row in rows]
        if any(point["value"] is not None for point in points):
            series.append({"metric": metric.name, "column": metric.column, "unit": metric.unit, "what": metric.what,
                           "points": points})
    return {"rows": rows, "series": series, "label": args.get("label") or "", "named": args.getlist("run")}


def graph_breaks_data(conn: sqlite3.Connection, args: Args) -> dict:
    """The graph-break groups that cost most, across every run or of one (?run=, any name), costliest first."""
    run = args.run(conn)
    groups = top_graph_breaks(conn, run)
    for group in groups:
        group["type"], group["site"] = break_type(group), site_url(group["gb"])
    label = conn.execute("SELECT label FROM runs WHERE id = ?", (run,)).fetchone() if run is not None else None
    return {"run": run, "label": label[0] if label else None, "groups": groups[:BREAKS_SHOWN], "count": len(groups)}
