"""Canned queries take runs and compiles as users name them (a label, a unique label prefix, the log directory,
`0/1`, `[0/1]`, `RUN:0/1@RANK`), as `tlindex query` does. Datasette binds `:run` as typed, so the SQL would
compare an id with a label and answer nothing: the request is redirected to the same query with the ids
(tlindex.answers.queries.named_params), or answered 404 with what the name matches."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from datasette.utils import tilde_decode
from datasette.utils.asgi import Request, Response

from .database import denied, is_tlindex

NAMED = ("run", "compile")  # the parameters that name a row


async def named_params_redirect(datasette, scope, actor) -> Response | None:
    """The redirect (or the 404) for a canned query asked with a run or compile by name; None for any other
    request, and for an actor who may not read the runs and compiles the names are looked up in."""
    from tlindex.answers.queries import load_queries, named_params
    from tlindex.errors import TlindexError

    parts = scope.get("path", "").strip("/").split("/")
    if len(parts) != 2 or parts[1].startswith("-"):
        return None
    database, query = tilde_decode(parts[0]), tilde_decode(parts[1].partition(".")[0])
    canned = load_queries().get(query)
    if canned is None or not {name for name, _ in canned.params} & set(NAMED):
        return None
    args = Request(scope, None).args
    given = {name: args.get(name).strip() for name in NAMED if args.get(name) and args.get(name).strip()}
    if not given or not await is_tlindex(datasette, database):
        return None
    if await denied(datasette, await actor(), database, ("runs", "compiles")) is not None:
        return None  # Datasette answers as it would (its own permission check comes next)
    try:
        ids = await datasette.get_database(database).execute_fn(lambda conn: named_params(conn, given))
    except TlindexError as error:
        return Response.text(f"{error}\n", status=404)
    if all(ids[key] == value for key, value in given.items()):
        return None  # named by their ids already (an id that is also another run's folder name was refused above)
    query_string = scope.get("query_string", b"").decode("utf-8", "replace")
    pairs = [(key, ids[key] if key in given else value) for key, value in parse_qsl(query_string, keep_blank_values=True)]
    return Response.redirect(scope["path"] + "?" + urlencode(pairs))
