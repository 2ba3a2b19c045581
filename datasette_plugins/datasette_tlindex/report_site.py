"""What the report renders the plugin's pages with instead of Datasette: the same templates, none of a
server's machinery.

A page needs URLs and a template environment: `ReportSite` gives both, with a Jinja environment over
the plugin's templates in which `base.html` is the report's own (`templates/tlindex/_report_base.html`:
Datasette's head and layout, without the menu, the crumbs and the hooks a static page cannot use).
Importing Datasette's application (0.4 s) and its request machinery is what this saves.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import jinja2

PLUGIN = Path(__file__).parent
REPORT_BASE = "tlindex/_report_base.html"
# Datasette's tilde encoding (datasette.utils.tilde_encode, the same on 0.65 and 1.0a; a test holds them equal):
# importing it imports Datasette, 0.05 s of every report
TILDE_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def tilde_encode(text: str) -> str:
    """`text` as Datasette writes a database, table or query name in a URL (`a.b` is `a~2Eb`, a space `+`)."""
    return "".join(chr(b) if b in TILDE_SAFE else "+" if b == 32 else f"~{b:02X}" for b in text.encode("utf-8"))


class ReportUrls:
    """The part of Datasette's `datasette.urls` the pages use, for a site served from `/`."""

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


class ReportSite:
    """The stand-in for a Datasette instance that serves one tlindex database to its owner: its URLs and
    its templates (the plugin's, on the report's own base)."""

    def __init__(self, database: str):
        self.name = database
        self.urls = ReportUrls()
        base = (PLUGIN / "templates" / REPORT_BASE).read_text(encoding="utf-8")
        self.env = jinja2.Environment(loader=jinja2.ChoiceLoader([
            jinja2.DictLoader({"base.html": base}), jinja2.FileSystemLoader(str(PLUGIN / "templates"))]),
            autoescape=True, auto_reload=False, bytecode_cache=template_cache())

    def render_template(self, template: str, context: dict) -> str:
        return self.env.get_template(template).render({**context, "urls": self.urls})


class TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between reports, keyed by each template's source (an edited template is
    compiled again): compiling them is 0.3 s of every report. One that cannot be written is not kept."""

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def template_cache() -> TemplateCache | None:
    """The cache in the user's cache folder; None (compile every time) when that folder cannot be made."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tlindex" / "templates"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return TemplateCache(str(root), "tlindex-%s.cache")


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
