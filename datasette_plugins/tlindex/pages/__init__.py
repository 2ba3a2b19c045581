"""The tlindex pages, one module each (as Datasette's own views/), and their routes.

Every handler is isolated: an error it did not mean (anything but Datasette's 400/403/404) gives
a page that says what failed and shows what it can (the handler's `fallback`, e.g. a bytecode
listing as plain text), with status 500 and the error in the `x-tlindex-degraded` header, which
the report records. One page that cannot be rendered never takes another with it.
"""

from __future__ import annotations

import functools
import html
import logging

from datasette.utils.asgi import Base400, Response

from tlindex.routes import BY_NAME
from tlindex.routes import ROUTES as TABLE

from . import artifact, bytecode, compile, diff, passes, provenance, run, runs, search, trie, vllm

log = logging.getLogger(__name__)
DEGRADED_HEADER = "x-tlindex-degraded"


def isolated(handler, fallback=None):
    """The handler, with any unexpected error turned into a page that says what failed (and the fallback's text)."""

    @functools.wraps(handler)
    async def page(datasette, request):
        try:
            return await handler(datasette, request)
        except Base400:
            raise
        except Exception as error:
            what = f"{type(error).__name__}: {error}"
            log.exception("tlindex page %s failed", request.path)
            shown = []
            if fallback is not None:
                try:
                    shown = await fallback(datasette, request)
                except Exception as second:  # the fallback's own failure is said, not raised
                    what += f" (and showing the raw data failed too: {type(second).__name__}: {second})"
            blocks = "".join(f"<h2>{html.escape(title)}</h2><pre>{html.escape(text)}</pre>" for title, text in shown)
            body = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tlindex: page not rendered</title>"
                    f"</head><body><h1>This page could not be rendered</h1><p class=\"degraded\">"
                    f"{html.escape(request.path)}: {html.escape(what)}</p>{blocks}</body></html>")
            return Response.html(body, status=500, headers={DEGRADED_HEADER: what.replace("\n", " ")[:500]})

    return page

_DB = r"(?P<database>[^/]+)"

# Each route of tlindex.routes: its handler (and what it shows when it fails: see isolated).
HANDLERS = {
    "runs": (runs.runs_page,),
    "search": (search.search_page,),
    "diff_pick": (diff.diff_pick,),
    "diff": (diff.diff_page,),
    "diff_compiles": (diff.pair_page,),
    "run": (run.run_page,),
    "chromium": (run.chromium_trace,),
    "trie": (trie.trie_page,),
    "trie_node": (trie.trie_fragment,),
    "compile": (compile.compile_page,),
    "bytecode": (bytecode.bytecode_page, bytecode.listings_as_text),
    "passes": (passes.passes_page,),
    "piece_passes": (passes.piece_passes_page,),
    "vllm": (vllm.vllm_page,),
    "provenance": (provenance.provenance_page,),
    "artifact": (artifact.artifact_page,),
    "payload": (artifact.payload_page,),
}
assert set(HANDLERS) == set(BY_NAME), "every route of tlindex.routes has a handler here, and only those"

ROUTES = [(rf"^/{_DB}{route.pattern}$", isolated(*HANDLERS[route.name])) for route in TABLE]
