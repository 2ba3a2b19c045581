"""The stack trie page of a run (and rank), and the lazily loaded children of a node."""

from __future__ import annotations

from datasette.utils.asgi import NotFound, Response

from tlindex.answers.resume_functions import run_compiles_with_bytecode
from tlindex.answers.trie import build_trie, find, size

from ..database import as_data, dicts, int_arg, int_var, one, open_database, render
from ..trie_html import TrieRenderer

TRIE_BUDGET = 2000  # nodes rendered before the rest of the trie is loaded on demand
ANONYMOUS_SHOWN = 50  # [-/-] compiles listed (one per process and reset); the rest in the compiles table

def _bytecode_urls(urls, compiles: set[int]):
    """compile row -> URL of its bytecode page, for the compiles that have one."""
    return lambda row: urls.bytecode(row) if row in compiles else None


def _rank_param(request) -> int | None:
    if request.args.get("rank") == "all":
        return None
    return int_arg(request, "rank", None)


async def trie_page(datasette, request):
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    run_id = int_var(request, "run")
    rank = _rank_param(request)
    budget = int_arg(request, "max_nodes", TRIE_BUDGET)

    def data(conn):
        run = one(conn, "SELECT * FROM runs WHERE id = ?", (run_id,))
        if run is None:
            return None
        ranks = [r[0] for r in conn.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? ORDER BY rank",
                                            (run_id,))]
        # records without a compile id are those of the [-/-] compiles: found through them, not every envelope
        unknown = dicts(conn.execute("""
            SELECT e.kind, count(*) AS n FROM compiles c CROSS JOIN envelopes e
            WHERE c.run_id = ? AND (? IS NULL OR c.rank = ?) AND c.compile_id = '-/-' AND e.compile = c.id
              AND e.compile_id = '-/-'
              AND EXISTS (SELECT 1 FROM frames f WHERE f.envelope_id = e.id AND f.stack = 'context')
            GROUP BY e.kind ORDER BY n DESC, e.kind""", (run_id, rank, rank)))
        anonymous = dicts(conn.execute("""
            SELECT id, rank, status, fail_type, envelope_count FROM compiles
            WHERE run_id = ? AND (? IS NULL OR rank = ?) AND compile_id = '-/-' ORDER BY rank, id LIMIT ?""",
            (run_id, rank, rank, ANONYMOUS_SHOWN + 1)))
        return run, ranks, build_trie(conn, run_id, rank), unknown, anonymous, run_compiles_with_bytecode(conn, run_id)

    found = await db.execute_fn(data)
    if found is None:
        raise NotFound(f"No run {run_id}")
    run, ranks, trie, unknown, anonymous, with_bytecode = found
    nodes = size(trie) - 1
    more_anonymous = len(anonymous) > ANONYMOUS_SHOWN
    anonymous = anonymous[:ANONYMOUS_SHOWN]
    renderer = TrieRenderer(urls.compile, lambda node: urls.trie_node(run_id, rank, node), budget,
                            open_all=nodes <= 200, bytecode_url=_bytecode_urls(urls, with_bytecode))
    return await render(datasette, request, "trie.html", {
        "database": db.name, "run": run, "rank": rank, "ranks": ranks, "u": urls, "nodes": nodes,
        "trie": renderer.render(trie), "unknown": unknown, "anonymous": anonymous,
        "more_anonymous": more_anonymous})


async def trie_fragment(datasette, request):
    """The children of one trie node, as an HTML fragment (loaded when a lazy node opens)."""
    opened = await open_database(datasette, request)
    db, urls = opened.db, opened.urls
    run_id, node_id = int_var(request, "run"), int_var(request, "node")
    rank = _rank_param(request)
    trie, with_bytecode = await db.execute_fn(
        lambda conn: (build_trie(conn, run_id, rank), run_compiles_with_bytecode(conn, run_id)))
    node = find(trie, node_id)
    if node is None:
        raise NotFound("No such trie node")
    if request.url_vars.get("format") == ".json":
        return Response.json(as_data({"run": run_id, "rank": rank, "node": node}), default=str)
    renderer = TrieRenderer(urls.compile, lambda n: urls.trie_node(run_id, rank, n), TRIE_BUDGET,
                            open_all=False, bytecode_url=_bytecode_urls(urls, with_bytecode))
    return Response.html(str(renderer.children(node)))
