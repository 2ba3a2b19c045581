"""The diff pages: two runs compared (tlindex.answers.diff), and two compiles' graphs and code side by side."""

from __future__ import annotations

import sqlite3

from datasette.utils.asgi import BadRequest, NotFound, Response

from tlindex.answers.diff import compare, diff, graph_pairs
from tlindex.ingest.runs import UnknownRun

from ..database import int_arg, int_var, open_database, render
from ..highlight import language
from ..sidebyside import hunks

# Run-level rows of the summary table: (label, key of tlindex.answers.diff's run summary).
TOTALS = [("compiles", "compiles"), ("failures", "failures"), ("graph breaks", "graph_breaks"),
          ("recompiles", "recompiles"), ("compile time (s)", "compile_time_s")]
VOLUME_SHOWN = 12  # log kinds whose volume moved most
CHANGED_SHOWN = 500  # compiles that changed, most important first (`tlindex diff --json` has them all)
UNCHANGED_SHOWN = 200


async def diff_pick(datasette, request):
    """The runs page's form: ?a=RUN&b=RUN, redirected to the diff page."""
    opened = await open_database(datasette, request)
    a, b = int_arg(request, "a", None), int_arg(request, "b", None)
    if a is None or b is None:
        raise BadRequest("Pick two runs: ?a=RUN&b=RUN")
    return Response.redirect(opened.urls.diff(a, b))


def diff_data(conn: sqlite3.Connection, run_a: int, run_b: int) -> dict | None:
    try:
        result = diff(conn, str(run_a), str(run_b))
    except UnknownRun:
        return None
    a, b = result["a"], result["b"]
    result["totals"] = [(label, a[key], b[key], round(b[key] - a[key], 3)) for label, key in TOTALS]
    kinds = set(a["log_bytes_by_kind"]) | set(b["log_bytes_by_kind"])
    volume = [(kind, a["log_bytes_by_kind"].get(kind, 0), b["log_bytes_by_kind"].get(kind, 0)) for kind in kinds]
    volume.sort(key=lambda row: (-abs(row[2] - row[1]), row[0]))
    result["volume"] = [(kind, x, y, y - x) for kind, x, y in volume[:VOLUME_SHOWN]]
    result["volume_rest"] = max(len(volume) - VOLUME_SHOWN, 0)
    compiles = result.pop("compiles")
    changed = [c for c in compiles if c["changes"] or not (c["a"] and c["b"])]
    unchanged = [c for c in compiles if not c["changes"] and c["a"] and c["b"]]
    result["changed_count"], result["changed"] = len(changed), changed[:CHANGED_SHOWN]
    result["unchanged_count"], result["unchanged"] = len(unchanged), unchanged[:UNCHANGED_SHOWN]
    result["multi_rank"] = len(set(a["ranks"]) | set(b["ranks"])) > 1
    return result


async def diff_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    run_a, run_b = int_var(request, "a"), int_var(request, "b")
    result = await db.execute_fn(lambda conn: diff_data(conn, run_a, run_b))
    if result is None:
        raise NotFound(f"No run {run_a} or no run {run_b}")
    return await render(datasette, request, "diff.html", {"database": db.name, "u": urls, "d": result})


def pair_data(conn: sqlite3.Connection, compile_a: int, compile_b: int) -> dict | None:
    entry = compare(conn, compile_a, compile_b)
    if entry is None:
        return None
    runs = dict(conn.execute("SELECT c.id, r.label FROM compiles c JOIN runs r ON r.id = c.run_id "
                             "WHERE c.id IN (?, ?)", (compile_a, compile_b)).fetchall())
    entry["a"]["run_label"], entry["b"]["run_label"] = runs[compile_a], runs[compile_b]
    entry["graphs"] = []
    for pair in graph_pairs(conn, compile_a, compile_b):
        lang = language(pair.kind, pair.name, None, pair.a_text)
        entry["graphs"].append({"kind": pair.kind, "name": pair.name, "a_artifact": pair.a_artifact,
                                "b_artifact": pair.b_artifact, "hunks": hunks(pair.a_text, pair.b_text, lang),
                                "a_lines": pair.a_text.count("\n") + 1, "b_lines": pair.b_text.count("\n") + 1})
    return entry


async def pair_page(datasette, request):
    """Two compiles (of any runs): what changed, and each graph and generated code side by side."""
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    compile_a, compile_b = int_var(request, "ca"), int_var(request, "cb")
    entry = await db.execute_fn(lambda conn: pair_data(conn, compile_a, compile_b))
    if entry is None:
        raise NotFound(f"No compile {compile_a} or no compile {compile_b}")
    return await render(datasette, request, "diff_pair.html", {"database": db.name, "u": urls, "e": entry})
