"""The tlindex pages: runs, run, stack trie, compile, artifact and raw payload.

Each page reads SQL only (never the logs) through `Database.execute_fn`, which
hands a plain sqlite3 connection to a function of this module, then renders a
template of templates/tlindex/. Every value reaches HTML through Jinja's
autoescape or markupsafe: payloads and stacks are arbitrary user code.
"""

from __future__ import annotations

import json
import sqlite3
from itertools import zip_longest
from urllib.parse import urlencode

from datasette.utils.asgi import AsgiStream, NotFound, Response
from markupsafe import Markup

from .highlight import language, render_payload
from .provenance import CODE, MAPPINGS, PANES, POST_GRAPHS, PRE_GRAPHS, line_links
from .trie import STATUS_LEGEND, TrieRenderer, build_trie, find, short_path, size

TRIE_BUDGET = 2000  # nodes rendered before the rest of the trie is loaded on demand
TIME_FIRST = ("entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s",
              "code_gen_time_s", "dynamo_time_before_restart_s", "duration_us", "start_time")


def dicts(cursor: sqlite3.Cursor) -> list[dict]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def one(conn: sqlite3.Connection, sql: str, params=()) -> dict | None:
    found = dicts(conn.execute(sql, params))
    return found[0] if found else None


class Urls:
    """The URLs of tlindex pages of one database."""

    def __init__(self, datasette, database: str):
        self.base = datasette.urls.database(database)
        self.database = database

    def runs(self) -> str:
        return f"{self.base}/-/tlindex"

    def run(self, run_id) -> str:
        return f"{self.base}/-/tlindex/run/{run_id}"

    def chromium(self, run_id) -> str:
        return f"{self.base}/-/tlindex/run/{run_id}/chromium.json"

    def provenance(self, artifact_id) -> str:
        return f"{self.base}/-/tlindex/provenance/{artifact_id}"

    def trie(self, run_id, rank=None) -> str:
        return f"{self.base}/-/tlindex/trie/{run_id}" + (f"?rank={rank}" if rank is not None else "")

    def compile(self, compile_row) -> str:
        return f"{self.base}/-/tlindex/compile/{compile_row}"

    def artifact(self, artifact_id) -> str:
        return f"{self.base}/-/tlindex/artifact/{artifact_id}"

    def payload(self, digest, raw: bool = False) -> str:
        return f"{self.base}/-/tlindex/payload/{digest}" + (".txt" if raw else "")

    def query(self, name, **params) -> str:
        args = urlencode({k: v for k, v in params.items() if v is not None})
        return f"{self.base}/{name}" + (f"?{args}" if args else "")

    def table(self, table, **params) -> str:
        args = urlencode({k: v for k, v in params.items() if v is not None})
        return f"{self.base}/{table}" + (f"?{args}" if args else "")


async def _database(datasette, request):
    from . import is_tlindex

    name = request.url_vars["database"]
    if not await is_tlindex(datasette, name):
        raise NotFound(f"No tlindex database named {name}")
    return datasette.get_database(name), Urls(datasette, name)


async def _page(datasette, request, template: str, context: dict) -> Response:
    context.setdefault("status_legend", STATUS_LEGEND)
    return Response.html(await datasette.render_template(f"tlindex/{template}", context, request=request))


def _int(request, name: str) -> int:
    try:
        return int(request.url_vars[name])
    except ValueError:
        raise NotFound(f"Not a number: {request.url_vars[name]}")


# --- runs -------------------------------------------------------------------------------------

def runs_data(conn: sqlite3.Connection) -> list[dict]:
    return dicts(conn.execute("""
        SELECT r.*, (SELECT count(*) FROM compiles c WHERE c.run_id = r.id) AS compiles,
               (SELECT count(*) FROM compiles c WHERE c.run_id = r.id AND c.status = 'error') AS errors,
               (SELECT sum(bytes) FROM sources s WHERE s.run_id = r.id) AS bytes
        FROM runs r ORDER BY r.start_time, r.id"""))


async def runs_page(datasette, request):
    db, urls = await _database(datasette, request)
    runs = await db.execute_fn(runs_data)
    return await _page(datasette, request, "runs.html", {"database": db.name, "runs": runs, "u": urls})


# --- run --------------------------------------------------------------------------------------

def run_data(conn: sqlite3.Connection, run_id: int) -> dict | None:
    run = one(conn, "SELECT * FROM runs WHERE id = ?", (run_id,))
    if run is None:
        return None
    run["sources"] = dicts(conn.execute("""
        SELECT s.*, f.name AS file, f.path, f.id AS file_id,
               (SELECT count(*) FROM ingest_errors e WHERE e.source_id = s.id) AS errors
        FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = ? ORDER BY s.rank, s.first_time""",
        (run_id,)))
    run["ranks"] = sorted({s["rank"] for s in run["sources"]}, key=lambda r: (r is None, r))
    run["by_rank"] = dicts(conn.execute("""
        SELECT rank, sum(compile_id != '-/-') AS compiles, sum(status = 'ok') AS ok, sum(status = 'break') AS break,
               sum(status = 'empty') AS empty, sum(status = 'error') AS error, sum(status = 'missing') AS missing,
               sum(frame_compile_id > 0) AS recompiles, sum(graph_breaks) AS graph_breaks,
               round(sum(duration_s), 3) AS compile_time_s, sum(envelope_bytes + payload_bytes) AS bytes
        FROM compiles WHERE run_id = ? GROUP BY rank ORDER BY rank""", (run_id,)))
    run["totals"] = one(conn, """
        SELECT sum(compile_id != '-/-') AS compiles, sum(status = 'error') AS failures,
               sum(frame_compile_id > 0) AS recompiles,
               sum(graph_breaks) AS graph_breaks, round(sum(duration_s), 3) AS compile_time_s
        FROM compiles WHERE run_id = ?""", (run_id,))
    run["bytes"] = sum(s["bytes"] or 0 for s in run["sources"])
    run["ingest_errors"] = sum(s["errors"] for s in run["sources"])
    run["compiles"] = dicts(conn.execute("""
        SELECT id, rank, compile_id, co_name, status, fail_type, recompile_reason, graph_breaks, duration_s,
               envelope_bytes + payload_bytes AS bytes
        FROM compiles WHERE run_id = ? ORDER BY id LIMIT 500""", (run_id,)))
    return run


async def run_page(datasette, request):
    db, urls = await _database(datasette, request)
    run_id = _int(request, "run")
    run = await db.execute_fn(lambda conn: run_data(conn, run_id))
    if run is None:
        raise NotFound(f"No run {run_id}")
    from tlindex.queries import load_queries

    # Every canned query that takes a run, so a new one appears here without editing this page.
    queries = [name for name, query in load_queries().items() if any(p == "run" for p, _ in query.params)]
    return await _page(datasette, request, "run.html", {"database": db.name, "run": run, "u": urls,
                                                         "queries": queries})


async def chromium_trace(datasette, request):
    """The run's chromium events as one Perfetto trace (tlindex.chromium), streamed batch by batch."""
    from tlindex.chromium import HEAD, TAIL, encode, event_batch, metadata_events, process_ids

    db, _ = await _database(datasette, request)
    run_id = _int(request, "run")
    if not (await db.execute("SELECT 1 FROM runs WHERE id = ?", [run_id])).rows:
        raise NotFound(f"No run {run_id}")
    pids = await db.execute_fn(lambda conn: process_ids(conn, run_id))

    async def stream(writer) -> None:
        await writer.write((HEAD + encode(metadata_events(pids), first=True)).decode())
        written, after = bool(pids), 0
        while after is not None:
            events, after = await db.execute_fn(lambda conn: event_batch(conn, run_id, pids, after))
            await writer.write(encode(events, first=not written).decode())
            written = written or bool(events)
        await writer.write(TAIL.decode())

    return AsgiStream(stream, content_type="application/json", headers={
        "content-disposition": f'attachment; filename="run-{run_id}-chromium.json"'})


# --- stack trie -------------------------------------------------------------------------------

def _rank_param(request) -> int | None:
    value = request.args.get("rank")
    if value in (None, "", "all"):
        return None
    try:
        return int(value)
    except ValueError:
        raise NotFound(f"Not a rank: {value}")


async def trie_page(datasette, request):
    db, urls = await _database(datasette, request)
    run_id = _int(request, "run")
    rank = _rank_param(request)
    budget = int(request.args.get("max_nodes") or TRIE_BUDGET)

    def data(conn):
        run = one(conn, "SELECT * FROM runs WHERE id = ?", (run_id,))
        if run is None:
            return None
        ranks = [r[0] for r in conn.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? ORDER BY rank",
                                            (run_id,))]
        unknown = dicts(conn.execute("""
            SELECT e.kind, count(*) AS n FROM envelopes e JOIN sources s ON s.id = e.source_id
            WHERE s.run_id = ? AND (? IS NULL OR s.rank = ?) AND e.compile_id = '-/-'
              AND EXISTS (SELECT 1 FROM frames f WHERE f.envelope_id = e.id AND f.stack = 'context')
            GROUP BY e.kind ORDER BY n DESC""", (run_id, rank, rank)))
        anonymous = dicts(conn.execute("""
            SELECT id, rank, status, fail_type, envelope_count FROM compiles
            WHERE run_id = ? AND (? IS NULL OR rank = ?) AND compile_id = '-/-' ORDER BY rank, id""",
            (run_id, rank, rank)))
        return run, ranks, build_trie(conn, run_id, rank), unknown, anonymous

    found = await db.execute_fn(data)
    if found is None:
        raise NotFound(f"No run {run_id}")
    run, ranks, trie, unknown, anonymous = found
    nodes = size(trie) - 1
    renderer = TrieRenderer(urls.compile, lambda node: _fragment_url(urls, run_id, rank, node), budget,
                            open_all=nodes <= 200)
    return await _page(datasette, request, "trie.html", {
        "database": db.name, "run": run, "rank": rank, "ranks": ranks, "u": urls, "nodes": nodes,
        "trie": renderer.render(trie), "unknown": unknown, "anonymous": anonymous})


def _fragment_url(urls: Urls, run_id: int, rank, node: int) -> str:
    return f"{urls.base}/-/tlindex/trie/{run_id}/node/{node}" + (f"?rank={rank}" if rank is not None else "")


async def trie_fragment(datasette, request):
    """The children of one trie node, as an HTML fragment (loaded when a lazy node opens)."""
    db, urls = await _database(datasette, request)
    run_id, node_id = _int(request, "run"), _int(request, "node")
    rank = _rank_param(request)
    trie = await db.execute_fn(lambda conn: build_trie(conn, run_id, rank))
    node = find(trie, node_id)
    if node is None:
        raise NotFound("No such trie node")
    renderer = TrieRenderer(urls.compile, lambda n: _fragment_url(urls, run_id, rank, n), TRIE_BUDGET,
                            open_all=False)
    return Response.html(str(renderer.children(node)))


# --- compile ----------------------------------------------------------------------------------

def compile_data(conn: sqlite3.Connection, compile_row: int) -> dict | None:
    compile = one(conn, """
        SELECT c.*, r.label AS run_label, f.name AS file, s.pid
        FROM compiles c JOIN sources s ON s.id = c.source_id JOIN files f ON f.id = s.file_id
        LEFT JOIN runs r ON r.id = c.run_id WHERE c.id = ?""", (compile_row,))
    if compile is None:
        return None
    compile["stack"] = dicts(conn.execute(
        "SELECT filename, line, name, loc FROM frames WHERE envelope_id = ? AND stack = 'stack' ORDER BY depth",
        (compile["dynamo_start"],))) if compile["dynamo_start"] else []
    for frame in compile["stack"]:
        frame["short"] = short_path(frame["filename"])
    compile["restarts"] = json.loads(compile["restart_reasons"]) if compile["restart_reasons"] else []
    compile["recompile_reasons"] = dicts(conn.execute(
        "SELECT position, previous_compile_id, reason FROM failed_guards WHERE compile = ? ORDER BY id",
        (compile_row,)))
    compile["metrics"] = [_metrics_fields(m) for m in dicts(conn.execute(
        "SELECT * FROM metrics WHERE compile = ? ORDER BY id", (compile_row,)))]
    compile["guards"] = dicts(conn.execute(
        "SELECT origin, depth, guard_type, text, source, user_code, symbol, value, reason FROM guards "
        "WHERE compile = ? ORDER BY envelope_id, position", (compile_row,)))
    compile["graph_breaks_list"] = dicts(conn.execute(
        "SELECT reason, user_file, user_line FROM graph_break_events WHERE compile = ? ORDER BY id", (compile_row,)))
    compile["cache_events"] = dicts(conn.execute(
        "SELECT cache, result, key, reason FROM cache_events WHERE compile = ? ORDER BY id", (compile_row,)))
    compile["symbols"] = dicts(conn.execute(
        "SELECT symbol, unbacked, value, value_range, source FROM symbols WHERE compile = ? ORDER BY id",
        (compile_row,)))
    spans = dicts(conn.execute(
        "SELECT name, ts_us, duration_us FROM chromium_events WHERE compile = ? AND ph = 'X' ORDER BY ts_us",
        (compile_row,)))
    if spans:
        start = min(s["ts_us"] for s in spans)
        end = max(s["ts_us"] + s["duration_us"] for s in spans)
        width = max(end - start, 1)
        for span in spans:
            span["left"] = round(100 * (span["ts_us"] - start) / width, 2)
            span["width"] = max(round(100 * span["duration_us"] / width, 2), 0.2)
            span["ms"] = round(span["duration_us"] / 1000, 1)
    compile["spans"] = spans
    compile["artifacts"] = dicts(conn.execute("""
        SELECT a.id, a.kind, a.name, a.size, a.payload, e.time, e.line, e.attempt, e.subgraph_name,
               CASE WHEN a.kind = 'link' THEN json_extract(e.metadata, '$.url') END AS url
        FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id WHERE a.compile = ? ORDER BY a.envelope_id""",
        (compile_row,)))
    for artifact in compile["artifacts"]:
        url = artifact["url"]  # a link record: followed only when it is a web address
        artifact["href"] = url if isinstance(url, str) and url.startswith(("https://", "http://")) else None
    compile["artifact_groups"] = _by_subgraph(compile["artifacts"])
    compile.update(collectives_data(conn, compile))
    compile["provenance"] = [a["id"] for a in compile["artifacts"] if a["name"] == MAPPINGS and a["payload"]]
    compile["siblings"] = dicts(conn.execute("""
        SELECT id, compile_id, status FROM compiles WHERE source_id = ? AND generation = ?
        AND compiled_autograd_id IS ? AND frame_id IS ? AND id != ? ORDER BY frame_compile_id""",
        (compile["source_id"], compile["generation"], compile["compiled_autograd_id"], compile["frame_id"],
         compile_row)))
    return compile


def _by_subgraph(artifacts: list[dict]) -> list[tuple[str | None, list[dict]]]:
    """Artifacts grouped by subgraph_name (regional inductor), groups in first-seen order."""
    groups: dict[str | None, list[dict]] = {}
    for artifact in artifacts:
        groups.setdefault(artifact["subgraph_name"], []).append(artifact)
    return list(groups.items())


def collectives_data(conn: sqlite3.Connection, compile: dict) -> dict:
    """The compile's scheduled collectives beside its code's, and the same compile id on the other ranks."""
    ops = {"schedule": [], "code": []}
    for origin, op, collective in conn.execute(
            "SELECT origin, op, collective FROM collective_ops WHERE compile = ? ORDER BY envelope_id, position",
            (compile["id"],)):
        ops[origin].append({"op": op, "collective": collective})
    if not (ops["schedule"] or ops["code"]):
        return {"collectives": [], "collective_ranks": [], "estimate": None}
    rows = [{"position": i, "schedule": s, "code": k, "same": bool(s and k and s["op"] == k["op"])}
            for i, (s, k) in enumerate(zip_longest(ops["schedule"], ops["code"]))]
    mine = " ".join(op["op"] for op in ops["schedule"])
    ranks = dicts(conn.execute("""
        SELECT c.id, c.rank, coalesce((SELECT group_concat(op, ' ') FROM (SELECT op FROM collective_ops
            WHERE compile = c.id AND origin = 'schedule' ORDER BY envelope_id, position)), '') AS ops,
            (SELECT group_concat(collective, ' ') FROM (SELECT collective FROM collective_ops
            WHERE compile = c.id AND origin = 'schedule' ORDER BY envelope_id, position)) AS shown
        FROM compiles c WHERE c.run_id = ? AND c.compile_id = ? AND c.id != ? ORDER BY c.rank""",
        (compile["run_id"], compile["compile_id"], compile["id"])))
    for rank in ranks:
        rank["same"] = rank["ops"] == mine
    estimate = one(conn, "SELECT count(*) AS ops, sum(estimated_runtime_ns) / 1e6 AS ms FROM op_estimates "
                         "WHERE compile = ?", (compile["id"],))
    return {"collectives": rows, "collective_ranks": ranks, "estimate": estimate if estimate["ops"] else None}


def _metrics_fields(row: dict) -> dict:
    """A metrics row as (key, value) pairs: times first, then the rest, then configs."""
    other = json.loads(row.pop("other") or "{}")
    configs = {k: row.pop(k) for k in ("dynamo_config", "inductor_config", "functorch_config", "compiler_config")}
    kind = row["kind"]
    fields = {k: v for k, v in {**row, **other}.items()
              if k not in ("id", "envelope_id", "compile", "kind") and v is not None}
    ordered = [(k, fields.pop(k)) for k in TIME_FIRST if k in fields]
    ordered += [(k, fields[k]) for k in sorted(fields) if k.endswith(("_s", "_us", "_ms"))]
    ordered += [(k, v) for k, v in sorted(fields.items()) if not k.endswith(("_s", "_us", "_ms"))]
    return {"kind": kind, "fields": [(k, v if isinstance(v, (str, int, float)) else json.dumps(v))
                                     for k, v in ordered],
            "configs": {k: v for k, v in configs.items() if v}}


async def compile_page(datasette, request):
    db, urls = await _database(datasette, request)
    compile_row = _int(request, "compile")
    compile = await db.execute_fn(lambda conn: compile_data(conn, compile_row))
    if compile is None:
        raise NotFound(f"No compile {compile_row}")
    return await _page(datasette, request, "compile.html", {"database": db.name, "c": compile, "u": urls})


# --- provenance -------------------------------------------------------------------------------

PANE_TITLES = {"pre": "pre-grad graph", "post": "post-grad graph", "code": "generated code"}


def _last_artifact(conn: sqlite3.Connection, mapping: dict, names: tuple[str, ...]) -> dict | None:
    """The last artifact named `names` (or of that kind) of the mapping's compile (without one: of its process)."""
    marks = ", ".join("?" * len(names))
    return one(conn, f"""
        SELECT a.id, a.name, p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload
        JOIN envelopes e ON e.id = a.envelope_id
        WHERE a.compile IS ? AND e.source_id = ? AND (a.name IN ({marks}) OR a.kind IN ({marks}))
        ORDER BY a.id DESC LIMIT 1""", (mapping["compile"], mapping["source_id"], *names, *names))


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
    panes = {pane: _last_artifact(conn, mapping, names)
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
    db, urls = await _database(datasette, request)
    artifact_id = _int(request, "artifact")
    data = await db.execute_fn(lambda conn: provenance_data(conn, artifact_id))
    if data is None:
        raise NotFound(f"Artifact {artifact_id} is not a {MAPPINGS} artifact with a payload (logged with INDUCTOR_PROVENANCE=1)")
    return await _page(datasette, request, "provenance.html", {"database": db.name, "u": urls, **data,
                                                               "links_json": script_json(data["links"])})


# --- artifact and payload ---------------------------------------------------------------------

def artifact_data(conn: sqlite3.Connection, artifact_id: int) -> dict | None:
    return one(conn, """
        SELECT a.*, p.text, e.line, e.time, e.source_id, f.name AS file, c.compile_id, c.co_name, c.run_id
        FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id JOIN sources s ON s.id = e.source_id
        JOIN files f ON f.id = s.file_id LEFT JOIN payloads p ON p.hash = a.payload
        LEFT JOIN compiles c ON c.id = a.compile WHERE a.id = ?""", (artifact_id,))


async def artifact_page(datasette, request):
    db, urls = await _database(datasette, request)
    artifact_id = _int(request, "artifact")
    artifact = await db.execute_fn(lambda conn: artifact_data(conn, artifact_id))
    if artifact is None:
        raise NotFound(f"No artifact {artifact_id}")
    text = artifact.pop("text")
    lang = language(artifact["kind"], artifact["name"], artifact["encoding"], text or "")
    body = render_payload(text, lang) if text is not None else None
    return await _page(datasette, request, "artifact.html", {
        "database": db.name, "a": artifact, "u": urls, "body": body, "lang": lang,
        "lines": (text or "").count("\n") + 1 if text else 0, "stack_traces": kernel_stack_traces(artifact, text)})


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
    db, urls = await _database(datasette, request)
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
    return await _page(datasette, request, "payload.html", {
        "database": db.name, "p": payload, "u": urls, "lang": lang,
        "body": render_payload(payload["text"], lang), "lines": payload["text"].count("\n") + 1})
