"""The plugin's side of `tlindex report`: a page's data (from the library) as the HTML the server shows.

`tlindex.report` writes the report (what to write, where, whole or not at all); it finds this
module by the plugin's entry point (the library never imports the plugin) and asks it for HTML only:
the same renderer (render.py) and templates the server uses, on the report's site (report_site.py).
"""

from __future__ import annotations

from pathlib import Path

from tlindex.answers.queries import CannedQuery
from tlindex.pages import Page
from tlindex.pages.rows import Args

from .cells import cell_link
from .database import Urls
from .highlight import CODE_END, CODE_START  # noqa: F401 (the report leaves a payload's text unlinked)
from .render import page_context
from .report_site import ReportSite, asset


class ReportRenderer:
    """HTML of the pages of one database, as `tlindex report` writes them."""

    code_start, code_end = CODE_START, CODE_END

    def __init__(self, db_path: Path):
        self.site = ReportSite(Path(db_path).stem)
        self.urls = Urls(self.site, self.site.name)

    def page(self, page: Page, data: dict, args: Args) -> str:
        context = page_context(page, data, self.urls, self.site.name, args)
        return self.site.render_template(f"tlindex/{page.template}", context)

    def query(self, query: CannedQuery, params: dict[str, str], columns: list[str], rows: list[tuple],
                    more: bool, limit: int) -> str:
        """A canned query's result as a table, its cells linked as in Datasette."""
        shown = []
        for row in rows:
            record = dict(zip(columns, row))
            shown.append([cell_link(self.urls, record, column, value) or ("" if value is None else value)
                          for column, value in record.items()])
        return self.site.render_template("tlindex/report_query.html", {
            "database": self.site.name, "u": self.urls, "q": query, "params": params, "columns": columns,
            "rows": shown, "more": more, "limit": limit})

    @staticmethod
    def asset(url_path: str) -> bytes | None:
        return asset(url_path)
