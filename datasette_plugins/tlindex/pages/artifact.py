"""The artifact page (a payload highlighted, with line anchors) and the payload page (by hash, or raw)."""

from __future__ import annotations

import json
import sqlite3

from datasette.utils.asgi import NotFound, Response

from ..database import dicts, int_var, one, open_database, render
from ..highlight import language, render_payload, shown_lines


def artifact_data(conn: sqlite3.Connection, artifact_id: int) -> dict | None:
    return one(conn, """
        SELECT a.*, p.text, e.line, e.time, e.source_id, f.name AS file, c.compile_id, c.co_name, c.run_id
        FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id JOIN sources s ON s.id = e.source_id
        JOIN files f ON f.id = s.file_id LEFT JOIN payloads p ON p.hash = a.payload
        LEFT JOIN compiles c ON c.id = a.compile WHERE a.id = ?""", (artifact_id,))


async def artifact_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    artifact_id = int_var(request, "artifact")
    artifact = await db.execute_fn(lambda conn: artifact_data(conn, artifact_id))
    if artifact is None:
        raise NotFound(f"No artifact {artifact_id}")
    text = artifact.pop("text")
    lang = language(artifact["kind"], artifact["name"], artifact["encoding"], text or "")
    body = render_payload(text, lang) if text is not None else None
    return await render(datasette, request, "artifact.html", {
        "database": db.name, "a": artifact, "u": urls, "body": body, "lang": lang,
        "lines": shown_lines(text or "", lang), "stack_traces": kernel_stack_traces(artifact, text)})


def kernel_stack_traces(artifact: dict, text: str | None) -> list[tuple[str, list[str]]]:
    """inductor_provenance_tracking_kernel_stack_traces as (kernel, [user stack traces]) (tlparse's _readable)."""
    if artifact["name"] != "inductor_provenance_tracking_kernel_stack_traces" or not text:
        return []
    try:
        traces = json.loads(text)
    except ValueError:
        return []
    if not isinstance(traces, dict):
        return []
    return [(str(kernel), [str(t) for t in (value if isinstance(value, list) else [value])])
            for kernel, value in traces.items()]


async def payload_page(datasette, request):
    """A payload by hash: highlighted, or raw text for download with a .txt suffix."""
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    digest = request.url_vars["hash"]
    raw = request.url_vars.get("ext") == ".txt"

    def data(conn):
        payload = one(conn, "SELECT hash, size, text FROM payloads WHERE hash = ?", (digest,))
        if payload:
            payload["artifacts"] = dicts(conn.execute("""
                SELECT a.id, a.kind, a.name, c.compile_id, c.id AS compile, c.rank FROM artifacts a
                LEFT JOIN compiles c ON c.id = a.compile WHERE a.payload = ? ORDER BY a.id LIMIT 50""", (digest,)))
        return payload

    payload = await db.execute_fn(data)
    if payload is None:
        raise NotFound(f"No payload {digest}")
    if raw:
        return Response.text(payload["text"], headers={
            "content-disposition": f'attachment; filename="{digest}.txt"'})
    first = payload["artifacts"][0] if payload["artifacts"] else {}
    lang = language(first.get("kind"), first.get("name"), None, payload["text"])
    return await render(datasette, request, "payload.html", {
        "database": db.name, "p": payload, "u": urls, "lang": lang,
        "body": render_payload(payload["text"], lang), "lines": shown_lines(payload["text"], lang)})
