"""The tlindex Datasette plugin: pages, canned queries and links for tlindex databases.

Installed with tlindex (entry point `datasette: tlindex`), so a plain
`datasette traces.db` loads it. It works on Datasette 0.65 (canned_queries
hook) and 1.0a (startup + add_query). The pages live in pages/, one module
each; every one opens its database through database.open_database, which
decodes the name and checks Datasette's permissions. Hooks never raise: a
database that is not a tlindex database, or any surprise, leaves Datasette's
own pages untouched.
"""

from __future__ import annotations

import functools
import json
import logging

from markupsafe import Markup
from pluggy import HookimplMarker

from tlindex.render.cells import cell_link
from tlindex.render.urls import Urls

from .bounded import bound
from .database import denied, denied_to, is_tlindex, known_tlindex

# Datasette's own marker (datasette.hookimpl is HookimplMarker("datasette")). Nothing of Datasette is imported
# here at import: the hooks import it when Datasette calls them.
hookimpl = HookimplMarker("datasette")

log = logging.getLogger(__name__)


def _canned_queries() -> dict[str, dict]:
    """The queries/*.sql files as Datasette canned queries: results first (the SQL folded), the title and
    its one-line summary above them, the rest of the description and the parameters folded."""
    # A copy each time (Datasette adds keys to them), of entries built once: 0.65 asks on every request
    # to a table page, and the gate asks again (reads._canned_sql).
    return {name: dict(query) for name, query in _built_canned_queries().items()}


@functools.lru_cache(maxsize=1)  # the files do not change under a running server (load_queries is cached too)
def _built_canned_queries() -> dict[str, dict]:
    """_canned_queries, built once."""
    from tlindex.answers.queries import load_queries

    def description_html(q) -> str:
        params = Markup("").join(Markup("<li><code>:{}</code> {}</li>").format(p, h) for p, h in q.params)
        return str(Markup('<p class="tlindex-query">{}</p><details class="tlindex-query"><summary>more</summary>'
                          "<p>{}</p><ul>{}</ul></details>").format(q.summary, q.description, params))

    return {name: {"sql": q.body, "title": q.title, "description_html": description_html(q), "hide_sql": True,
                   "params": [p for p, _ in q.params]}
            for name, q in load_queries().items()}


@hookimpl
def prepare_connection(conn):
    """On a tlindex database only (any other is left exactly as Datasette made it): the sqlite3 shell's sqlar
    functions, which the `payloads` view reads compressed payloads with (bounded: tlindex.store.compression); no
    function that hands out native pointers or loads code (tlindex.answers.queries.DENIED_FUNCTIONS); tlindex's limit
    on the length of a value (tlindex.store.limits); on a database an older tlindex wrote, the views of this one
    (tlindex.store.db.current_views)."""
    from tlindex.answers.queries import guard_functions
    from tlindex.store.compression import register
    from tlindex.store.db import current_views, is_tlindex_connection
    from tlindex.store.limits import limit_connection

    if not is_tlindex_connection(conn):
        return
    limit_connection(conn)
    guard_functions(register(conn))
    current_views(conn)


@hookimpl
def register_routes():
    """A route per page of tlindex.pages, and the pages' CSS and scripts (tlindex.render.site.STATIC) at Datasette's
    URL for a plugin's files."""
    from datasette.utils.asgi import asgi_static

    from tlindex.render.site import STATIC
    from tlindex.render.urls import STATIC_URL

    from .pages import _DB, routes
    from .uploads import routes as upload_routes

    return [*routes(), *upload_routes(_DB), (rf"^{STATIC_URL}(?P<path>.*)$", asgi_static(str(STATIC)))]


@hookimpl
def actor_from_request(datasette, request):
    """A tlindex token (`Authorization: Bearer tli_…`, tlindex.tokens) is the request's actor on a server that takes
    uploads (uploads.py)."""
    from .uploads import actor

    return actor(datasette, request)


@hookimpl
def skip_csrf(datasette, scope):
    """A post to a tlindex upload route carries its token in a header, never in a cookie: no CSRF token is asked."""
    return scope.get("type") == "http" and scope.get("path", "").endswith("/-/tlindex/upload")


@hookimpl
def prepare_jinja2_environment(env):
    """Datasette's templates, and after them the pages' (tlindex.render.site.TEMPLATES: `tlindex/<page>.html`)."""
    import jinja2

    from tlindex.render.site import TEMPLATES

    env.loader = jinja2.ChoiceLoader([env.loader, jinja2.FileSystemLoader(str(TEMPLATES))])


@hookimpl
def canned_queries(datasette, database):
    """Datasette 0.65: the queries/*.sql files as canned queries of every tlindex database."""

    async def inner():
        try:
            if await is_tlindex(datasette, database):
                return _canned_queries()
        except Exception:  # a broken hook would break every table page
            log.exception("tlindex: canned queries unavailable")
        return {}

    return inner


MIGRATIONS_TABLE = "_tlindex_migrations"  # bookkeeping: hidden, so a database page starts with the data


def _hidden_tables(names) -> dict:
    return {"databases": {name: {"tables": {MIGRATIONS_TABLE: {"hidden": True}}} for name in names}}


@hookimpl
def get_metadata(datasette, key, database, table):
    """Datasette 0.65: the migrations table hidden (1.0a reads hidden tables from its config: see startup)."""
    return _hidden_tables([database] if database else list(datasette.databases))


@hookimpl
def startup(datasette):
    """Every tlindex database brought up to date, its requests' SQL run in worker processes (bounded.py); on
    Datasette 1.0a, the canned queries registered with add_query (canned_queries is gone there), and the migrations
    table hidden through the config (get_metadata is gone there)."""

    async def inner():
        if hasattr(datasette, "add_query") and isinstance(getattr(datasette, "config", None), dict):
            for name, entry in _hidden_tables(list(datasette.databases))["databases"].items():
                tables = datasette.config.setdefault("databases", {}).setdefault(name, {}).setdefault("tables", {})
                tables.setdefault(MIGRATIONS_TABLE, {}).setdefault("hidden", True)
        for name in list(datasette.databases):
            if await is_tlindex(datasette, name):
                _bring_up_to_date(datasette.get_database(name))
                bound(datasette, datasette.get_database(name))  # a request's SQL runs in a worker process
            if await is_tlindex(datasette, name) and hasattr(datasette, "add_query"):
                try:
                    for query_name, query in _canned_queries().items():
                        await datasette.add_query(name, query_name, query["sql"], title=query["title"],
                                                  description_html=query["description_html"], hide_sql=True,
                                                  source="tlindex", is_trusted=True)
                except Exception:
                    log.exception("tlindex: could not register canned queries")

    return inner


def _bring_up_to_date(db) -> None:
    """A database an older tlindex made, migrated before it is served (tlindex.Database opens it so); one that cannot
    be is said in one line in the log (its pages then say what they cannot read)."""
    from tlindex.database import Database
    from tlindex.errors import TlindexError

    if getattr(db, "path", None) and not getattr(db, "is_memory", False) and getattr(db, "is_mutable", True):
        try:
            Database(db.path).close()
        except TlindexError as error:
            log.warning("tlindex: %s", error)


def _without_facet_suggestions(datasette, scope: dict) -> dict:
    """A table page of a tlindex database asks Datasette not to suggest facets (`_nosuggest=1`).

    Suggestions run a GROUP BY per column on every view: 3.3 s for `envelopes` of a 1 GB database
    (0.09 s without). Facets a user picks, sorting, filters and the row count stay; the plugin
    setting `suggest_facets: true` brings suggestions back."""
    from datasette.utils import tilde_decode

    parts = scope.get("path", "").strip("/").split("/")
    query = scope.get("query_string", b"")
    if len(parts) != 2 or parts[1].startswith("-") or b"_nosuggest" in query:
        return scope
    if not known_tlindex(datasette, tilde_decode(parts[0])):
        return scope
    if (datasette.plugin_config("tlindex") or {}).get("suggest_facets"):
        return scope
    return dict(scope, query_string=query + (b"&" if query else b"") + b"_nosuggest=1")


async def _refused(datasette, scope) -> str | None:
    """Why the request may not see what it reads, when it reads a table the actor may not view through
    another (a view, a full-text index, a canned query, SQL): see reads.py. Datasette checks the table
    or canned query a request names, not the tables behind it."""
    from .reads import request_reads

    memo: list = []

    async def actor():
        if not memo:
            memo.append(await _actor(datasette, scope))
        return memo[0]

    reading = await request_reads(datasette, scope, actor)
    if reading is None:
        return None
    refused = await denied(datasette, await actor(), reading.database, reading.tables)
    return None if refused is None else f"{reading.what} shows rows of tables this actor may not see ({refused})"


async def _actor(datasette, scope):
    """The request's actor, as Datasette's router works it out (the plugins' actor_from_request)."""
    from datasette.plugins import pm
    from datasette.utils import await_me_maybe
    from datasette.utils.asgi import Request

    request = Request(scope, None)
    for actor in pm.hook.actor_from_request(datasette=datasette, request=request):
        actor = await await_me_maybe(actor)
        if actor:
            return actor
    return scope.get("actor") or None


@hookimpl
def asgi_wrapper(datasette):
    from datasette.utils.asgi import Response

    from .named_params import named_params_redirect

    def wrap(app):
        async def tlindex_tables(scope, receive, send):
            if scope.get("type") == "http":
                asked, scope = scope, _without_facet_suggestions(datasette, scope)
                refused = await _refused(datasette, scope)
                if refused is not None:
                    await Response.text(f"Forbidden: {refused}", status=403).asgi_send(send)
                    return
                named = await named_params_redirect(datasette, asked, lambda: _actor(datasette, asked))
                if named is not None:
                    await named.asgi_send(send)
                    return
            await app(scope, receive, send)

        return tlindex_tables

    return wrap


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    """Link compile ids, payload hashes, artifacts and runs to the tlindex pages."""
    if not known_tlindex(datasette, database):
        return None
    try:
        return cell_link(Urls(datasette, database), row, column, value, table)
    except Exception:
        log.exception("tlindex: render_cell")
    return None


async def _runs_link(datasette, request, database: str) -> list[dict]:
    """The link to a database's tlindex runs, for those who may follow it."""
    if not await is_tlindex(datasette, database) or await denied_to(datasette, request, database) is not None:
        return []
    return [{"href": Urls(datasette, database).runs(), "label": f"tlindex runs: {database}"}]


@hookimpl
def menu_links(datasette, actor, request):
    async def inner():
        links = []
        for name in list(datasette.databases):
            links += await _runs_link(datasette, request, name)
        return links

    return inner


@hookimpl
def database_actions(datasette, actor, database, request):
    async def inner():
        return await _runs_link(datasette, request, database)

    return inner


@hookimpl
def table_actions(datasette, actor, database, table, request):
    async def inner():
        return await _runs_link(datasette, request, database) if table in ("runs", "compiles", "sources") else []

    return inner


# --- an entry on Datasette's home and database pages --------------------------------------

ENTRY_STYLE = "margin:0.6em 0 1em;padding:0.5em 0.8em;border:1px solid #cfd9e6;border-radius:4px;background:#f3f7fb"


async def _entry_html(datasette, request, databases: list[str]) -> str:
    """A line per database the actor may open leading to its tlindex pages (runs and findings, trend, graph breaks,
    search) with its number of runs; empty if none."""
    from tlindex.answers.runs import run_count

    lines = []
    for name in databases:
        if not await _runs_link(datasette, request, name):
            continue
        urls = Urls(datasette, name)
        try:
            runs = await datasette.get_database(name).execute_fn(run_count)
            counted = Markup(", {:,} run{}").format(runs, "" if runs == 1 else "s")
        except Exception:  # a database being written, or locked: the links without the count
            log.exception("tlindex: run count")
            counted = Markup("")
        links = [("runs", urls.runs(), "runs and findings"), ("trend", urls.trend(), "compile-health trend"),
                 ("graph-breaks", urls.graph_breaks(), "graph breaks that cost most"), ("search", urls.search(), "search")]
        lines.append(Markup('<p class="tlindex-entry" style="{}"><strong>tlindex</strong> on <strong>{}</strong>{}: ')
                     .format(ENTRY_STYLE, name, counted)
                     + Markup(" · ").join(Markup('<a class="tlindex-{}" href="{}">{}</a>').format(kind, href, text)
                                          for kind, href, text in links)
                     + Markup("</p>"))
    return str(Markup('<div class="tlindex-home">{}</div>').format(Markup("").join(lines))) if lines else ""


@hookimpl
def top_homepage(datasette, request):
    """Datasette 1.0a: the tlindex entry at the top of the home page."""
    async def inner():
        return await _entry_html(datasette, request, list(datasette.databases))

    return inner


@hookimpl
def top_database(datasette, request, database):
    """Datasette 1.0a: the tlindex entry at the top of a tlindex database's page."""
    async def inner():
        return await _entry_html(datasette, request, [database])

    return inner


# A canned query page's <title> is its whole SQL in Datasette: name it after its heading instead.
QUERY_TITLE_SCRIPT = ("(function(){var h=document.querySelector('h1');var q=document.querySelector"
                      "('p.tlindex-query');if(h&&q){document.title=h.textContent.trim();}})();")


@hookimpl
def extra_body_script(template, database, view_name, request, datasette):
    """Datasette 0.65 (no top_* hooks): put the same entry under the page heading with a script."""
    if template == "query.html" or (view_name == "database" and template != "database.html"):
        return QUERY_TITLE_SCRIPT
    if hasattr(datasette, "allowed") or view_name not in ("index", "database"):
        return None

    async def inner():
        try:
            html = await _entry_html(datasette, request, [database] if database else list(datasette.databases))
        except Exception:
            log.exception("tlindex: entry link")
            return ""
        if not html:
            return ""
        # JSON of markup already escaped; </ cannot close the script element.
        payload = json.dumps(html).replace("</", "<\\/")
        # After the heading, or after the header row that holds it (a database page's h1 and its menu).
        return ("(function(){var h=document.querySelector('h1');if(!h)return;var p=h.closest('.page-header');"
                "if(p)h=p;var d=document.createElement('div');"
                f"d.innerHTML={payload};h.parentNode.insertBefore(d.firstChild,h.nextSibling);}})();")

    return inner
