"""The URLs of the tlindex pages of one database, built as Datasette builds its own (`datasette.urls`, or the
report's stand-in for it, `ReportUrls`): what the pages link with, served or in a report. It imports nothing of
Datasette."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

from tlindex import pages
from tlindex.pages import tilde_encode

STATIC_URL = "/-/static-plugins/tlindex/"  # where the pages' own CSS and scripts are: Datasette's URL for a plugin's


class ReportUrls:
    """The part of Datasette's `datasette.urls` the pages use, for a site served from `/` (the report's)."""

    def static(self, path: str) -> str:
        return f"/-/static/{path}"

    def static_plugins(self, plugin: str, path: str) -> str:
        return f"/-/static-plugins/{plugin}/{path}"  # STATIC_URL for tlindex

    def database(self, database: str, format: str | None = None) -> str:
        return "/" + tilde_encode(database)

    def table(self, database: str, table: str, format: str | None = None) -> str:
        return f"{self.database(database)}/{tilde_encode(table)}"

    def query(self, database: str, query: str, format: str | None = None) -> str:
        return f"{self.database(database)}/{tilde_encode(query)}"


class Urls:
    """The URLs of the tlindex pages of one database (and of its Datasette pages).

    `urls.compile(12)`, `urls.trie_node(run, node, rank=0)`, `urls.tree(None, "graph", 3)`: every page of
    tlindex.pages by its name, its path's values and then its query arguments as the page declares them
    (tlindex.pages.link)."""

    def __init__(self, datasette, database: str):
        self.datasette = datasette
        self.database = database
        self.base = datasette.urls.database(database)  # encoded as Datasette encodes it
        self.served = not isinstance(datasette.urls, ReportUrls)  # a live page may refresh itself; a report's never
        for name in pages.BY_NAME:  # a page's link by its name (no page is named as an attribute below)
            setattr(self, name, functools.partial(self.page, name))

    def page(self, name: str, *given, **values) -> str:
        return self.base + pages.link(name, *given, **values)

    def query(self, name: str, **params) -> str:
        return self._with(self.datasette.urls.query(self.database, name), params)

    def table(self, table: str, **params) -> str:
        return self._with(self.datasette.urls.table(self.database, table), params)

    @staticmethod
    def _with(url: str, params: dict) -> str:
        args = urlencode({k: v for k, v in params.items() if v is not None})
        return url + (f"?{args}" if args else "")
