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

from . import artifact, bytecode, compile, diff, provenance, run, runs, search, trie

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
_ID = r"(?P<{}>-?\d+)"  # ids: anything else is not a route (404)

_PAGES = [
    (rf"^/{_DB}/-/tlindex$", runs.runs_page),
    (rf"^/{_DB}/-/tlindex/search$", search.search_page),
    (rf"^/{_DB}/-/tlindex/diff$", diff.diff_pick),
    (rf"^/{_DB}/-/tlindex/diff/{_ID.format('a')}/{_ID.format('b')}$", diff.diff_page),
    (rf"^/{_DB}/-/tlindex/diff/compiles/{_ID.format('ca')}/{_ID.format('cb')}$", diff.pair_page),
    (rf"^/{_DB}/-/tlindex/run/{_ID.format('run')}$", run.run_page),
    (rf"^/{_DB}/-/tlindex/run/{_ID.format('run')}/chromium\.json$", run.chromium_trace),
    (rf"^/{_DB}/-/tlindex/trie/{_ID.format('run')}$", trie.trie_page),
    (rf"^/{_DB}/-/tlindex/trie/{_ID.format('run')}/node/{_ID.format('node')}$", trie.trie_fragment),
    (rf"^/{_DB}/-/tlindex/compile/{_ID.format('compile')}$", compile.compile_page),
    (rf"^/{_DB}/-/tlindex/compile/{_ID.format('compile')}/bytecode$", bytecode.bytecode_page, bytecode.listings_as_text),
    (rf"^/{_DB}/-/tlindex/provenance/{_ID.format('artifact')}$", provenance.provenance_page),
    (rf"^/{_DB}/-/tlindex/artifact/{_ID.format('artifact')}$", artifact.artifact_page),
    (rf"^/{_DB}/-/tlindex/payload/(?P<hash>[0-9a-f]{{32}})(?P<ext>\.txt)?$", artifact.payload_page),
]

ROUTES = [(pattern, isolated(*handlers)) for pattern, *handlers in _PAGES]
