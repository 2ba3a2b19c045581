"""The provenance page (tlparse -i): pre-grad graph, post-grad graph and generated code, linked."""

from __future__ import annotations

import json
import sqlite3

from datasette.utils.asgi import NotFound
from markupsafe import Markup

from ..database import int_var, one, open_database, render
from ..provenance import CODE, MAPPINGS, PANES, POST_GRAPHS, PRE_GRAPHS, line_links

PANE_TITLES = {"pre": "pre-grad graph", "post": "post-grad graph", "code": "generated code"}


def _own_artifact(conn: sqlite3.Connection, mapping: dict, names: tuple[str, ...]) -> dict | None:
    """The artifact named `names` (or of that kind) that the mapping describes: of its compile (without one:
    of its process), the last logged before the mapping, else the first after it. A training compile logs
    the forward's graph, code and mapping, then the backward's: each mapping gets its own half's."""
    marks = ", ".join("?" * len(names))
    return one(conn, f"""
        SELECT a.id, a.name, p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload
        JOIN envelopes e ON e.id = a.envelope_id
        WHERE a.compile IS ? AND e.source_id = ? AND (a.name IN ({marks}) OR a.kind IN ({marks}))
        ORDER BY a.id > :mapping, CASE WHEN a.id < :mapping THEN -a.id ELSE a.id END LIMIT 1""".replace(
        ":mapping", str(int(mapping["id"]))), (mapping["compile"], mapping["source_id"], *names, *names))


def provenance_data(conn: sqlite3.Connection, artifact_id: int) -> dict | None:
    """The three panes and their line links for one inductor_provenance_tracking_node_mappings artifact."""
    mapping = one(conn, """
        SELECT a.id, a.compile, e.source_id, p.text, c.compile_id, c.co_name, s.run_id
        FROM artifacts a JOIN payloads p ON p.hash = a.payload JOIN envelopes e ON e.id = a.envelope_id
        JOIN sources s ON s.id = e.source_id LEFT JOIN compiles c ON c.id = a.compile
        WHERE a.id = ? AND a.name = ?""", (artifact_id, MAPPINGS))
    if mapping is None:
        return None
    try:
        parsed = json.loads(mapping["text"])
    except ValueError:
        parsed = None
    panes = {pane: _own_artifact(conn, mapping, names)
             for pane, names in zip(PANES, (PRE_GRAPHS, POST_GRAPHS, CODE))}
    texts = {pane: (artifact or {}).get("text") or "" for pane, artifact in panes.items()}
    links = line_links(parsed, texts["pre"], texts["post"], texts["code"]) if isinstance(parsed, dict) else {}
    return {"mapping": mapping, "valid": isinstance(parsed, dict),
            "panes": [{"key": pane, "title": PANE_TITLES[pane], "artifact": panes[pane],
                       "lines": texts[pane].split("\n") if texts[pane] else [],
                       "linked": set(links.get(pane, {}))} for pane in PANES],
            "links": links}


def script_json(value) -> Markup:
    """JSON safe inside a <script> element."""
    return Markup(json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


async def provenance_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    artifact_id = int_var(request, "artifact")
    data = await db.execute_fn(lambda conn: provenance_data(conn, artifact_id))
    if data is None:
        raise NotFound(f"Artifact {artifact_id} is not an {MAPPINGS} artifact with a payload "
                       "(logged with INDUCTOR_PROVENANCE=1)")
    return await render(datasette, request, "provenance.html", {"database": db.name, "u": urls, **data,
                                                               "links_json": script_json(data["links"])})
