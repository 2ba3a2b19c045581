"""What a request to a tlindex database reads, for the gate in front of Datasette (__init__._refused).

Datasette checks the permission of the table or canned query a request names, never of the tables
behind it: a view of a denied table, a full-text index of it, a canned query or SQL that reads it would
serve its rows. Here SQLite says what a request reads (tlindex.store.reads, on a private copy of the
served database's schema, made again when `PRAGMA schema_version` moves), and database.denied asks
Datasette about every table of it. What a request reads is what its path names (a table, view or
canned query; a whole database downloaded) and what its arguments hand Datasette to run or join: SQL
(`sql`, `_where`) and tables (`_fts_table`, `_through`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

from datasette.utils import tilde_decode
from datasette.utils.asgi import Request

from tlindex.store.reads import SCHEMA_SQL, Reads, SchemaCopy, quote

from .database import is_tlindex

log = logging.getLogger(__name__)


@dataclass
class Reading:
    """What one request reads beyond the table it names (which Datasette checks itself)."""

    database: str
    what: str           # what the request names, for the refusal's message
    tables: Reads       # the tables and views behind it


async def schema_of(datasette, database: str) -> SchemaCopy:
    """The database's schema copy, remembered until its schema version moves (a migration, an index
    `tlindex search` built, a view someone created)."""
    db = datasette.get_database(database)
    version = (await db.execute("PRAGMA schema_version")).rows[0][0]
    cache = datasette.__dict__.setdefault("_tlindex_schemas", {})
    cached = cache.get(database)
    if cached is not None and cached[0] == version:
        return cached[1]
    # Read after the version: a change in between is kept under the older version, made again next time.
    rows = [tuple(row) for row in (await db.execute(SCHEMA_SQL)).rows]
    copy = SchemaCopy(rows, prepare=lambda conn: _prepare(datasette, database, conn))
    cache[database] = (version, copy)
    if cached is not None:  # (used only between two awaits of the event loop's thread: no request is in it now)
        cached[1].close()
    return copy


def _prepare(datasette, database: str, conn) -> None:
    """The copy's connection prepared as Datasette prepares its own: extensions and every plugin's
    functions, which views and SQL may call (without them such SQL cannot be prepared: see reads)."""
    try:
        if hasattr(datasette, "_prepare_connection"):  # 0.65 and 1.0a alike
            datasette._prepare_connection(conn, database)
        else:
            from datasette.plugins import pm

            pm.hook.prepare_connection(conn=conn, database=database, datasette=datasette)
    except Exception:
        log.exception("tlindex: the schema copy of %s lacks some functions", database)


async def request_reads(datasette, scope, actor: Callable[[], Awaitable[dict | None]]) -> Reading | None:
    """What the request reads beyond the table or canned query it names, if it is to a tlindex database
    and reads anything more; None when Datasette's own check is the whole check.

    The copy is used from the event loop's thread alone, between two awaits: its authorizer is never
    set by two requests at once, and Datasette's shared connections are only asked two plain reads."""
    parts = scope.get("path", "").strip("/").split("/")
    head, _, suffix = parts[0].partition(".")
    database = tilde_decode(head)
    if not head or not await is_tlindex(datasette, database):
        return None
    schema = await schema_of(datasette, database)
    args = Request(scope, None).args
    found: list[Reads | None] = [schema.reads(sql) for sql in args.getlist("sql")]
    named, what = None, "SQL"
    if len(parts) == 1 and suffix == "db":  # the database file itself
        found.append(schema.everything())
        what = "the database download"
    elif len(parts) > 1 and not parts[1].startswith("-"):
        named = tilde_decode(parts[1].partition(".")[0] if len(parts) == 2 else parts[1])
        what = f"table {named}"
        query = await _canned_sql(datasette, database, named, actor)
        if query is not None:
            found.append(schema.reads(query))
            what = f"canned query {named}"
        if schema.knows(named):
            found.append(schema.behind(named))
            if args.getlist("_where"):  # joined as Datasette joins them: a comment may span two
                found.append(schema.reads(f"SELECT * FROM {quote(named)} WHERE " + " and ".join(args.getlist("_where"))))
            found += [schema.behind(table) for table in args.getlist("_fts_table") + _through_tables(args)]
    if not found:
        return None
    # SQL SQLite cannot prepare here (a syntax error, a function only the real connections have):
    # only who may see every table may run it.
    tables = schema.everything() if None in found else frozenset().union(*found)
    if what.startswith("table "):  # Datasette checks the table a table page names (a canned query's name, not a table)
        tables -= {named}
    return Reading(database, what, tables) if tables else None


def _through_tables(args) -> list[str]:
    """The tables `?_through={"table": ...}` joins a table page through."""
    tables = []
    for text in args.getlist("_through"):
        try:
            table = json.loads(text).get("table")
        except (ValueError, AttributeError):
            continue  # Datasette refuses it itself
        if isinstance(table, str):
            tables.append(table)
    return tables


async def _canned_sql(datasette, database: str, name: str, actor: Callable[[], Awaitable[dict | None]]) -> str | None:
    """The SQL of the database's canned query `name`, whoever made it (1.0a: stored queries; 0.65: the
    metadata's and every plugin's canned_queries, which may depend on the actor)."""
    if hasattr(datasette, "get_query"):
        query = await datasette.get_query(database, name)
        return query.sql if query is not None else None
    query = await datasette.get_canned_query(database, name, await actor())
    return query.get("sql") if query else None
