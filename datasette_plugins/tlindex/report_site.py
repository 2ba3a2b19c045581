"""What the report renders the plugin's pages with instead of Datasette: the same handlers and templates,
none of a server's per-request machinery.

A page handler asks Datasette for little: a database to run a function on (`execute_fn`), its table
names, URLs, permission checks (the report is the database owner's: nothing is refused) and
`render_template`. `ReportSite` answers exactly that, on one read-only connection guarded as the
plugin guards Datasette's (`prepare_connection`), with a Jinja environment over the plugin's templates
in which `base.html` is the report's own (`templates/tlindex/_report_base.html`: Datasette's head and
layout, without the menu, the crumbs and the hooks a static page cannot use). Importing Datasette's
application (0.4 s) and its request machinery (about half of each page's time) is what this saves.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from datasette.utils import tilde_encode

from tlindex.answers.queries import guard_functions
from tlindex.store.compression import register
from tlindex.store.db import connect_read_only

PLUGIN = Path(__file__).parent
REPORT_BASE = "tlindex/_report_base.html"


class ReportUrls:
    """The part of Datasette's `datasette.urls` the pages use, for a site served from `/`."""

    def __init__(self, site: ReportSite):
        self.site = site

    def static(self, path: str) -> str:
        return f"/-/static/{path}"

    def static_plugins(self, plugin: str, path: str) -> str:
        return f"/-/static-plugins/{plugin}/{path}"

    def database(self, database: str, format: str | None = None) -> str:
        return "/" + tilde_encode(database)

    def table(self, database: str, table: str, format: str | None = None) -> str:
        return f"{self.database(database)}/{tilde_encode(table)}"

    def query(self, database: str, query: str, format: str | None = None) -> str:
        return f"{self.database(database)}/{tilde_encode(query)}"


class Rows:
    """A query's answer as Datasette's `Database.execute` gives it (`.rows`)."""

    def __init__(self, rows: list[tuple]):
        self.rows = rows


class ReportDatabase:
    """One tlindex database, read on one connection (a report is one thread's sequence of pages)."""

    def __init__(self, path: Path):
        self.path = path
        self.name = path.stem
        self.conn = guard_functions(register(connect_read_only(path)))

    async def execute_fn(self, fn: Callable[[Any], Any]) -> Any:
        return fn(self.conn)

    async def execute(self, sql: str, params=()) -> Rows:
        return Rows(self.conn.execute(sql, params).fetchall())

    async def table_names(self) -> list[str]:
        return [row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

    def close(self) -> None:
        self.conn.close()


class ReportSite:
    """The stand-in for a Datasette instance that serves one tlindex database to its owner."""

    def __init__(self, db_path: Path):
        db = ReportDatabase(Path(db_path))
        self.databases = {db.name: db}
        self.urls = ReportUrls(self)
        base = (PLUGIN / "templates" / REPORT_BASE).read_text(encoding="utf-8")
        self.env = jinja2.Environment(loader=jinja2.ChoiceLoader([
            jinja2.DictLoader({"base.html": base}), jinja2.FileSystemLoader(str(PLUGIN / "templates"))]),
            autoescape=True, auto_reload=False, bytecode_cache=TemplateCache())

    def get_database(self, name: str) -> ReportDatabase:
        return self.databases[name]

    def plugin_config(self, name: str) -> None:
        return None  # a report has no Datasette configuration: every setting at its default

    async def ensure_permissions(self, actor, permissions) -> None:
        return None  # the report is written by the database's owner, for them

    async def render_template(self, template: str, context: dict, request=None) -> str:
        return self.env.get_template(template).render({**context, "urls": self.urls, "request": request})

    def close(self) -> None:
        for db in self.databases.values():
            db.close()


class TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between reports (in the user's cache folder, keyed by each template's
    source, so an edited template is compiled again): compiling them is 0.3 s of every report. A cache
    that cannot be written is not used."""

    def __init__(self):
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tlindex" / "templates"
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError:
            root = None
        super().__init__(str(root) if root else tempfile.gettempdir(), "tlindex-%s.cache")
        self.usable = root is not None

    def load_bytecode(self, bucket) -> None:
        if self.usable:
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket) -> None:
        if self.usable:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                self.usable = False


def asset(url_path: str) -> bytes | None:
    """The file behind a static URL of the pages: Datasette's (`/-/static/…`, read from its package, which
    is not imported) or the plugin's (`/-/static-plugins/tlindex/…`); None for anything else."""
    if url_path.startswith("/-/static-plugins/tlindex/"):
        folder, name = PLUGIN / "static", url_path.rsplit("/", 1)[1]
    elif url_path.startswith("/-/static/"):
        spec = importlib.util.find_spec("datasette")
        if spec is None or not spec.submodule_search_locations:
            return None
        folder, name = Path(next(iter(spec.submodule_search_locations))) / "static", url_path.rsplit("/", 1)[1]
    else:
        return None
    file = folder / name
    if name in ("", ".", "..") or not file.is_file():
        return None
    return file.read_bytes()
