"""The graph breaks that cost most, across runs: the canned query `top_graph_breaks`, with its hints as a list.

Graph breaks are grouped by type (torch's graph-break id and title, else the reason's first informative line)
and user code location; each group says how often it broke, in which runs (the first and last, in time order),
the compile time its restarts threw away and torch's own Explanation and Hints, each cut to what a page shows
(tlindex.answers.clip: the whole reason is on the group's compile page). The query is the definition:
`tlindex query top_graph_breaks`, Datasette, the findings and the pages to come read the same rows.
"""

from __future__ import annotations

import re
import sqlite3

from tlindex.answers.clip import clip
from tlindex.answers.queries import load_queries, run_sql

HINTS_SHOWN = 20  # hints of a group, at most (torch logs 1-4)


def top_graph_breaks(conn: sqlite3.Connection, run_id: int | None = None, limit: int | None = None) -> list[dict]:
    """The costliest graph-break groups of one run (or every run), costliest first; `hints` is a list of lines."""
    params = {"run": "" if run_id is None else str(run_id), "limit": "" if limit is None else str(limit)}
    cursor = run_sql(conn, load_queries()["top_graph_breaks"].sql, params)
    columns = [d[0] for d in cursor.description]
    groups = []
    for row in cursor:
        group = dict(zip(columns, row))
        group["hints"] = [clip(line.strip()) for line in (group["hints"] or "").splitlines() if line.strip()][:HINTS_SHOWN]
        for key in ("title", "explanation", "location", "functions"):
            group[key] = clip(group[key])
        groups.append(group)
    return groups


GB_SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{}.html"  # where torch's reasons link


def site_url(gb: str | None) -> str | None:
    """The Graph Break Site's page of a graph-break id (gb0025), None for anything else."""
    return GB_SITE.format(gb) if gb and re.fullmatch(r"gb\d{4}", gb) else None


def break_type(group: dict) -> str:
    """A group's type as people say it: `gb0025 “Call to torch._dynamo.graph_break()”`, or the title alone."""
    title = f"“{group['title']}”" if group["title"] else "(no reason logged)"
    return f"{group['gb']} {title}" if group["gb"] else title
