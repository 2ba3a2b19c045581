"""The search page: where a term appears across every ingested log (tlindex.answers.search)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.runs import run_labels
from tlindex.answers.search import search
from tlindex.errors import SearchError
from tlindex.ingest.text_index import has_payload_index
from tlindex.pages.rows import Args

SHOWN = 300  # hits on one page; `tlindex search --json` gives them all
SCAN_SECONDS = 5.0  # without the payload index, how long the page reads payload text itself (~200 MB/s)


def search_data(conn: sqlite3.Connection, args: Args) -> dict:
    term = (args.get("q") or "").strip()
    run = args.run(conn)
    notes: list[str] = []
    hits, problem, more = [], None, [0]
    if term:
        try:
            hits = search(conn, term, run, scan_seconds=SCAN_SECONDS, notes=notes, more=more)
        except SearchError as error:
            problem = str(error)
    shown_runs = sorted({hit.run for hit in hits[:SHOWN] if hit.run is not None})
    labels = run_labels(conn, shown_runs)
    groups: list[dict] = []
    for hit in hits[:SHOWN]:
        if not groups or (groups[-1]["run"], groups[-1]["compile"]) != (hit.run, hit.compile):
            groups.append({"run": hit.run, "label": labels.get(hit.run), "compile": hit.compile,
                           "compile_id": hit.compile_id, "hits": []})
        groups[-1]["hits"].append(hit)
    return {"query": term, "run": run, "groups": groups, "count": len(hits), "shown": min(len(hits), SHOWN),
            "problem": problem, "indexed": has_payload_index(conn), "notes": notes,
            "more": more[-1]}  # places that match beyond those read (at least)

