"""Open a tlindex database for a request: the one door every plugin page goes through.

`open_database` decodes the database name as Datasette does (`a~2Eb` is `a.b`),
refuses a database that is not tlindex's (404), and checks the permissions
Datasette checks for its own pages of the same data (403): view-instance,
view-database and view-table of every tlindex table, on 0.65
(`ensure_permissions`, cascading) and on 1.0a (`allowed` with resources). Every
URL is built from `datasette.urls` (urls.py). Datasette is imported by the functions that need it: the report
imports this package without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tlindex.render.urls import Urls
from tlindex.store.tables import COLUMNS

# The tables the tlindex pages read: the schema's own.
TLINDEX_TABLES = frozenset({*COLUMNS, "runs", "payloads"})  # payloads: the view of payload_data
DETECTED_BY = {"runs", "sources", "envelopes", "compiles", "artifacts"}
# Up to this many tables, 1.0a answers faster asked one table at a time (0.7 ms each) than asked for
# every table it allows (5 ms): the tables behind a view or a canned query are a few.
FEW_TABLES = 6


async def is_tlindex(datasette, name: str) -> bool:
    """Whether the database `name` (decoded) holds tlindex's tables (a positive answer is remembered)."""
    known = datasette.__dict__.setdefault("_tlindex_databases", set())
    if name in known:
        return True
    if name.startswith("_") or name not in datasette.databases:
        return False
    try:
        tables = set(await datasette.get_database(name).table_names())
    except Exception:
        return False
    if DETECTED_BY <= tables:
        known.add(name)
        return True
    return False


def known_tlindex(datasette, name: str) -> bool:
    """Whether `name` was seen to be a tlindex database (for synchronous hooks)."""
    return name in datasette.__dict__.get("_tlindex_databases", ())


async def denied(datasette, actor, database: str, tables=TLINDEX_TABLES) -> str | None:
    """None when `actor` may see the database and all `tables` (default: every tlindex table); else the
    permission refused."""
    if hasattr(datasette, "allowed"):  # Datasette 1.0a: resources
        from datasette.resources import DatabaseResource, TableResource

        if not await datasette.allowed(action="view-instance", actor=actor):
            return "view-instance"
        if not await datasette.allowed(action="view-database", resource=DatabaseResource(database), actor=actor):
            return "view-database"
        if hasattr(datasette, "allowed_resources") and len(tables) > FEW_TABLES:  # one query for them all
            visible = set()
            async for resource in (await datasette.allowed_resources(
                    "view-table", actor, parent=database, limit=1000)).all():
                visible.add(resource.child)
            missing = sorted(set(tables) - visible)
            return f"view-table {missing[0]}" if missing else None
        for table in sorted(tables):
            if not await datasette.allowed(action="view-table", resource=TableResource(database, table), actor=actor):
                return f"view-table {table}"
        return None
    from datasette.utils.asgi import Forbidden

    for table in sorted(tables):  # Datasette 0.65: the table page's own cascade
        try:
            await datasette.ensure_permissions(actor, [("view-table", (database, table)),
                                                       ("view-database", database), "view-instance"])
        except Forbidden:
            return f"view-table {table}"
    return None


async def denied_to(datasette, request, database: str) -> str | None:
    """denied() for the request's actor, remembered in the request (the menu asks again for every page)."""
    actor = request.actor if request is not None else None
    if request is None:
        return await denied(datasette, actor, database)
    memo = request.scope.setdefault("tlindex_denied", {})
    key = (json.dumps(actor, sort_keys=True, default=str), database)
    if key not in memo:
        memo[key] = await denied(datasette, actor, database)
    return memo[key]


@dataclass
class Opened:
    """A tlindex database opened for one request."""

    db: object        # datasette.database.Database
    urls: Urls
    name: str


async def open_database(datasette, request) -> Opened:
    """The request's tlindex database, or 404 (no such tlindex database) / 403 (not for this actor)."""
    from datasette.utils import tilde_decode
    from datasette.utils.asgi import Forbidden, NotFound

    name = tilde_decode(request.url_vars["database"])
    if not await is_tlindex(datasette, name):
        raise NotFound(f"No tlindex database named {name}")
    refused = await denied_to(datasette, request, name)
    if refused is not None:
        raise Forbidden(refused)
    return Opened(datasette.get_database(name), Urls(datasette, name), name)
