"""The search page: where a term appears across every ingested log (tlindex.answers.search)."""

from __future__ import annotations

from pathlib import Path

from tlindex.answers.search import SearchError, marked_html, search
from tlindex.ingest.text_index import has_payload_index

from ..database import int_arg, open_database, render

SHOWN = 300  # hits on one page; `tlindex search --json` gives them all
SCAN_SECONDS = 5.0  # without the payload index, how long the page reads payload text itself (~200 MB/s)


async def search_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    term = (request.args.get("q") or "").strip()
    run = int_arg(request, "run", None)

    notes: list[str] = []

    def data(conn):
        labels = dict(conn.execute("SELECT id, label FROM runs").fetchall())
        indexed = has_payload_index(conn)
        if not term:
            return labels, indexed, [], None
        try:
            hits = search(conn, term, run, scan_seconds=SCAN_SECONDS, notes=notes)
        except SearchError as error:
            return labels, indexed, [], str(error)
        return labels, indexed, hits, None

    labels, indexed, hits, problem = await db.execute_fn(data)
    groups: list[dict] = []
    for hit in hits[:SHOWN]:
        if not groups or (groups[-1]["run"], groups[-1]["compile"]) != (hit.run, hit.compile):
            groups.append({"run": hit.run, "label": labels.get(hit.run), "compile": hit.compile,
                           "compile_id": hit.compile_id, "hits": []})
        groups[-1]["hits"].append({"table": hit.table, "snippet": marked_html(hit), "href": urls.base + hit.path})
    return await render(datasette, request, "search.html", {
        "database": db.name, "u": urls, "q": term, "run": run, "groups": groups, "count": len(hits),
        "shown": min(len(hits), SHOWN), "problem": problem, "indexed": indexed, "notes": notes,
        "db_file": Path(db.path).name if db.path else opened.name})
