"""The tlindex pages served by Datasette: one route per page of tlindex.pages, each answered the same way.

Every page opens its database through database.open_database (name decoded, permissions checked), gets
its data from the library (tlindex.pages: the plugin runs no SQL of its own) and renders it (render.py),
or answers its JSON twin. Every handler is isolated: an error it did not mean (anything but a 400, 403
or 404) gives a page that says what failed and shows what it can (a bytecode listing as plain text),
with status 500 and the error in the `x-tlindex-degraded` header, which the report records. One page
that cannot be rendered never takes another with it.
"""

from __future__ import annotations

import functools
import html
import logging
import sqlite3
import time
from pathlib import Path

from datasette.utils.asgi import BadRequest, Base400, NotFound, Response

from tlindex import pages
from tlindex.errors import NotFound as NoSuchThing
from tlindex.errors import UsageError
from tlindex.pages import BY_NAME, Page
from tlindex.pages.bytecode import listings
from tlindex.pages.rows import Args, as_data
from tlindex.render.page import render_page, trie_children
from tlindex.serve import STOPPING

from .database import open_database
from .uploads import form_of

log = logging.getLogger(__name__)
DEGRADED_HEADER = "x-tlindex-degraded"
_DB = r"(?P<database>[^/]+)"


def request_args(datasette, request, opened) -> Args:
    """The request's query string, and the options the plugin's settings give the pages."""
    config = datasette.plugin_config("tlindex") or {}
    db_path = getattr(opened.db, "path", None)
    pairs = [(key, value) for key in request.args.keys() for value in request.args.getlist(key)]
    return Args(pairs, read_source_files=bool(config.get("read_source_files", True)),
                db_file=Path(db_path).name if db_path else opened.name)


# How long a page's data may take to read: past it, its statement is interrupted and the request thread is free
# again (a 503 says so). Datasette's own sql_time_limit_ms (1 s) bounds the SQL a request sends; a page reads a run
# of a 1 GB database in a second or two, so its limit is the plugin setting `page_time_limit_s`, or this.
PAGE_TIME_LIMIT_S = 30.0


class PageTimeout(Base400):
    status = 503


async def read(opened, page: Page, request, args: Args) -> dict:
    """The page's data, read on the database's connection within the page time limit."""
    values = page.values({k: v for k, v in request.url_vars.items() if k != "database"})
    limit = float((opened.db.ds.plugin_config("tlindex") or {}).get("page_time_limit_s", PAGE_TIME_LIMIT_S))

    def within_time(conn):
        deadline, stopped = time.monotonic() + limit, []

        def over() -> bool:
            if STOPPING.is_set():  # `tlindex serve` is stopping: the read ends now
                return True
            if time.monotonic() > deadline:
                stopped.append(True)
                return True
            return False

        conn.set_progress_handler(over, 1_000)
        try:
            data = page.read(conn, args, **values)
        except sqlite3.OperationalError:
            if not stopped:
                raise
        finally:
            conn.set_progress_handler(None, 0)
        if stopped:  # (also when a part of the page took the interruption for its own failure and went on)
            raise PageTimeout(f"this page took longer than {limit:g} s to read; it was stopped")
        return data

    return await opened.db.execute_fn(within_time)


def handler(page: Page):
    """The route's handler: the page (or its JSON twin), as its kind answers; a NotFound or UsageError of the
    library, met reading or presenting, is a 404 or 400."""

    async def serve(datasette, request):
        try:
            return await answer(datasette, request)
        except NoSuchThing as error:
            raise NotFound(str(error)) from None
        except UsageError as error:
            raise BadRequest(str(error)) from None

    async def answer(datasette, request):
        opened = await open_database(datasette, request)
        args = request_args(datasette, request, opened)
        if page.kind == "json":
            return await _chromium(opened, page, request, args)
        data = await read(opened, page, request, args)
        if request.url_vars.get("format") == ".json":
            return Response.json(as_data(data), default=str)
        if page.kind == "redirect":
            return Response.redirect(opened.urls.diff(data["a"], data["b"]))
        if page.kind == "fragment":
            return Response.html(str(trie_children(data, opened.urls, args)))
        if data.get("raw"):  # a payload's text, for download
            digest = data["payload"]["hash"]
            return Response.text(data["payload"]["text"], headers={
                "content-disposition": f'attachment; filename="{digest}.txt"'})

        async def render_template(template: str, context: dict) -> str:
            if page.json_twin:  # (linked beside the crumbs)
                context = {**context, "json_url": request.path + ".json" + (
                    f"?{request.query_string}" if request.query_string else "")}
            return await datasette.render_template(template, context, request=request)

        if page.name == "runs":  # a server that takes uploads: a form to drop a log on (uploads.py)
            data = {**data, "upload": form_of(opened)}
        return Response.html(await render_page(render_template, page, data, opened.urls, opened.name, args))

    return serve


async def _chromium(opened, page: Page, request, args: Args):
    """A Perfetto trace of the run (tlindex.formats.chromium: the whole run, some ranks, or its overview), streamed
    batch by batch, gzip-encoded when the client accepts it (a trace's JSON is a tenth of its size so)."""
    from tlindex.formats.chromium import trace_parts

    data = await read(opened, page, request, args)
    run, db = data["run"], opened.db
    encoder, reader = await db.execute_fn(lambda conn: trace_parts(conn, run, data["ranks"], data["overview"]))
    gzipped = "gzip" in request.headers.get("accept-encoding", "")

    async def pieces():
        yield encoder.head()
        while (events := await db.execute_fn(reader.batch)) is not None:
            yield encoder.batch(events)
        yield encoder.tail

    name = f"run-{run}" + "".join(f"-rank-{rank}" for rank in data["ranks"] or ()) + \
        ("-overview" if data["overview"] else "")
    headers = {"content-disposition": f'attachment; filename="{name}-chromium.json"', "vary": "accept-encoding"}
    if gzipped:
        headers["content-encoding"] = "gzip"
    return _BytesStream(pieces(), gzipped, headers)


class _BytesStream:
    """An ASGI response of bytes as they come, gzip-encoded or not (Datasette's AsgiStream writes text)."""

    def __init__(self, pieces, gzipped: bool, headers: dict[str, str]):
        self.pieces, self.gzipped, self.headers = pieces, gzipped, headers

    async def asgi_send(self, send) -> None:
        import zlib

        headers = [[k.encode(), v.encode()] for k, v in {**self.headers, "content-type": "application/json"}.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        packer = zlib.compressobj(6, zlib.DEFLATED, 31) if self.gzipped else None  # 31: the gzip format
        async for piece in self.pieces:
            body = packer.compress(piece) if packer else piece
            if body:
                await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": packer.flush() if packer else b""})


async def _bytecode_listings(datasette, request) -> list[tuple[str, str]]:
    """What the bytecode page shows when it cannot analyse the listings: each listing as the trace logged it."""
    opened = await open_database(datasette, request)
    compile_row = BY_NAME["bytecode"].values({"compile": request.url_vars["compile"]})["compile"]
    return await opened.db.execute_fn(lambda conn: listings(conn, compile_row))


def isolated(serve, fallback=None):
    """The handler, with any unexpected error turned into a page that says what failed (and the fallback's text)."""

    @functools.wraps(serve)
    async def page(datasette, request):
        try:
            return await serve(datasette, request)
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


# What a page shows when it fails (see isolated): the bytecode page, its listings as the trace logged them.
FALLBACKS = {"bytecode": _bytecode_listings}


def routes() -> list[tuple[str, object]]:
    """One route per page of tlindex.pages (as PAGES is when Datasette asks)."""
    return [(rf"^/{_DB}{page.pattern}$", isolated(handler(page), FALLBACKS.get(page.name))) for page in pages.PAGES]
