"""The pages' templates and assets, and the site the report renders them on instead of Datasette: the same templates,
none of a server's machinery.

The templates (`templates/tlindex/`) and the pages' CSS and scripts (`static/`) live here, below the report and the
plugin: the plugin adds this folder to Datasette's template loader and serves `static/` at Datasette's URL for a
plugin's files; the report reads both from here. A page needs URLs and a template environment: `ReportSite` gives
both, with a Jinja environment over the templates in which `base.html` is the report's own
(`templates/tlindex/_report_base.html`: Datasette's head and layout, without the menu, the crumbs and the hooks a
static page cannot use). Importing Datasette's application (0.4 s) and its request machinery is what this saves.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

import jinja2

from tlindex.render.urls import STATIC_URL, ReportUrls
from tlindex.store.user_cache import cache_folder

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"  # Datasette's loader is given it (the plugin's prepare_jinja2_environment)
STATIC = HERE / "static"  # served at STATIC_URL
REPORT_BASE = "tlindex/_report_base.html"


class ReportSite:
    """The stand-in for a Datasette instance that serves one tlindex database to its owner: its URLs and
    its templates (the pages', on the report's own base)."""

    def __init__(self, database: str):
        self.name = database
        self.urls = ReportUrls()
        self.env = environment()

    def render_template(self, template: str, context: dict) -> str:
        return self.env.get_template(template).render({**context, "urls": self.urls, "in_report": True})


@cache
def environment() -> jinja2.Environment:
    """The report's Jinja environment, one per process: the templates it has loaded are kept for every report the
    process writes, and for the workers forked from it."""
    base = (TEMPLATES / REPORT_BASE).read_text(encoding="utf-8")
    return jinja2.Environment(loader=jinja2.ChoiceLoader([
        jinja2.DictLoader({"base.html": base}), jinja2.FileSystemLoader(str(TEMPLATES))]),
        autoescape=True, auto_reload=False, bytecode_cache=template_cache())


def load_templates() -> None:
    """Every page template loaded now (~13 ms), not at its first page in each process (a report that forks its
    workers calls it while its logs are ingested)."""
    env = environment()
    for name in env.list_templates(filter_func=lambda name: name.startswith("tlindex/")):
        env.get_template(name)


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
    root = cache_folder("templates")
    return TemplateCache(str(root), "tlindex-%s.cache") if root is not None else None


def asset(url_path: str) -> bytes | None:
    """The file behind a static URL of the pages: Datasette's (`/-/static/…`, read from its package, which
    is not imported) or the pages' own (STATIC_URL); None for anything else."""
    if url_path.startswith(STATIC_URL):
        folder, name = STATIC, url_path.rsplit("/", 1)[1]
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
