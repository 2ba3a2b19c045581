"""Open a tlindex database for a request: the one door every plugin page goes through.

`open_database` decodes the database name as Datasette does (`a~2Eb` is `a.b`),
refuses a database that is not tlindex's (404), and checks the permissions
Datasette checks for its own pages of the same data (403): view-instance,
view-database and view-table of every tlindex table, on 0.65
(`ensure_permissions`, cascading) and on 1.0a (`allowed` with resources). Every
URL is built from `datasette.urls`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode

from datasette.utils import tilde_decode
from datasette.utils.asgi import Forbidden, NotFound

from tlindex.pages import BY_NAME
from tlindex.pages import path as page_path
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


class Urls:
    """The URLs of the tlindex pages of one database (and of its Datasette pages).

    `urls.compile(12)`, `urls.artifact(3)`, `urls.vllm(run)`: every page of tlindex.pages by its name, its
    path's values given in the order the path names them; the few below take more than their path."""

    def __init__(self, datasette, database: str):
        self.datasette = datasette
        self.database = database
        self.base = datasette.urls.database(database)  # encoded as Datasette encodes it

    def page(self, name: str, **values) -> str:
        return self.base + page_path(name, **values)

    def __getattr__(self, name: str):
        page = BY_NAME.get(name)
        if page is None:
            raise AttributeError(name)
        return lambda *given, **values: self.page(name, **dict(zip(page.placeholders, given)), **values)

    def run(self, run_id: int | None) -> str:
        """The run page; the runs page for a compile not yet grouped into a run (an ingest between its
        merge and its run grouping, or killed there: the next ingest groups it)."""
        return self.page("run", run=run_id) if run_id is not None else self.page("runs")

    def trie(self, run_id: int, rank: int | None = None) -> str:
        return self.page("trie", run=run_id) + (f"?rank={int(rank)}" if rank is not None else "")

    def trie_node(self, run_id: int, rank: int | None, node: int) -> str:
        return self.page("trie_node", run=run_id, node=node) + (f"?rank={int(rank)}" if rank is not None else "")

    def payload(self, digest: str, raw: bool = False) -> str:
        return self.page("payload", hash=digest, ext=".txt" if raw else "")

    def diff(self, run_a: int | None = None, run_b: int | None = None) -> str:
        """The diff of two runs; without them, the form's target."""
        if run_a is None or run_b is None:
            return self.page("diff_pick")
        return self.page("diff", a=run_a, b=run_b)

    def trend(self, runs: list[int] | None = None, label: str | None = None) -> str:
        """The trend page, of the runs named (every run when none) or of a label prefix."""
        return self._with_list(self.page("trend"), "run", runs or [], {"label": label})

    def graph_breaks(self, runs: list[int] | int | None = None) -> str:
        """The graph breaks that cost most, of one run, of some, or of every run."""
        return self._with_list(self.page("graph_breaks"), "run", [runs] if isinstance(runs, int) else runs or [], {})

    def tree(self, runs: list[int] | int | None = None, q: str | None = None, a: int | None = None) -> str:
        """The tree of runs, compiles and artifacts: of one run, of some or of every run; filtered by `q`; with
        artifact `a` picked first (every other then offers a diff with it)."""
        runs = [runs] if isinstance(runs, int) else runs or []
        return self._with_list(self.page("tree"), "run", runs, {"q": q or None, "a": a})

    def artifact_diff(self, a: int, b: int, mask: bool = False) -> str:
        """Two artifacts side by side (`mask`: counter-derived names masked)."""
        return self._with(self.page("artifact_diff"), {"a": int(a), "b": int(b), "mask": 1 if mask else None})

    def search(self, term: str | None = None, run: int | None = None) -> str:
        return self._with(self.page("search"), {"q": term or None, "run": run})

    def query(self, name: str, **params) -> str:
        return self._with(self.datasette.urls.query(self.database, name), params)

    def table(self, table: str, **params) -> str:
        return self._with(self.datasette.urls.table(self.database, table), params)

    @classmethod
    def _with_list(cls, url: str, name: str, values: list, params: dict) -> str:
        args = urlencode([(name, value) for value in values] + [(k, v) for k, v in params.items() if v is not None])
        return url + (f"?{args}" if args else "")

    @staticmethod
    def _with(url: str, params: dict) -> str:
        args = urlencode({k: v for k, v in params.items() if v is not None})
        return url + (f"?{args}" if args else "")


@dataclass
class Opened:
    """A tlindex database opened for one request."""

    db: object        # datasette.database.Database
    urls: Urls
    name: str


async def open_database(datasette, request) -> Opened:
    """The request's tlindex database, or 404 (no such tlindex database) / 403 (not for this actor)."""
    name = tilde_decode(request.url_vars["database"])
    if not await is_tlindex(datasette, name):
        raise NotFound(f"No tlindex database named {name}")
    refused = await denied_to(datasette, request, name)
    if refused is not None:
        raise Forbidden(refused)
    return Opened(datasette.get_database(name), Urls(datasette, name), name)
