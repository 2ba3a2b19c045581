"""The renderer of `tlindex report`: a page's data (tlindex.pages) as the HTML the server shows.

`tlindex.report` writes the report (what to write, where, whole or not at all) and asks this module for HTML
only: the same renderer (page.py) and templates the server uses, on the report's site (site.py).
"""

from __future__ import annotations

import html
from pathlib import Path

from markupsafe import Markup

from tlindex.answers.queries import CannedQuery
from tlindex.pages import Page
from tlindex.pages.rows import Args
from tlindex.render.cells import cell_link
from tlindex.render.highlight import CODE_END, CODE_START, escape_text  # the report leaves a payload's text unlinked
from tlindex.render.page import Terms, page_context
from tlindex.render.site import ReportSite, asset
from tlindex.render.urls import Urls


class ReportRenderer:
    """HTML of the pages of one database, as `tlindex report` writes them."""

    # Blocks of escaped text that hold no link, which the report need not relink: a payload's, a config's table
    unlinked = [(CODE_START, CODE_END)]

    def __init__(self, db_path: Path):
        self.site = ReportSite(Path(db_path).stem)
        self.urls = Urls(self.site, self.site.name)
        self.payloads: PayloadPages | None = None  # made at the first payload page

    def page(self, page: Page, data: dict, args: Args) -> str:
        if page.name == "payload":  # the most numerous page: written without a template, coloured in the browser
            if self.payloads is None:
                self.payloads = PayloadPages(self.site, self.urls)
            return self.payloads.page(data)
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


TITLE, BODY = "\x00tlindex-title\x00", "\x00tlindex-body\x00"  # where each payload page fills in the layout


class PayloadPages:
    """A payload page of the report: the payload's text escaped, once, in the layout of the served pages (rendered
    once per process), coloured, line-numbered and pretty-printed by payload.js in the browser. Each distinct payload
    has one, so this is most of a report's pages: no template, no highlighting in Python, a few links to relink."""

    def __init__(self, site: ReportSite, urls: Urls):
        self.urls = urls
        shell = site.render_template("tlindex/payload_report.html", {
            "database": site.name, "u": urls, "term": Terms(urls), "title": Markup(TITLE), "body": Markup(BODY)})
        self.head, self.middle, self.crumb, self.tail = _split(shell)
        self.term = str(Terms(urls)("payload"))

    def page(self, data: dict) -> str:
        """The page of one payload (tlindex.pages.artifact.payload_data)."""
        p, lang = data["payload"], data["lang"] or "text"
        text = p["text"] or ""
        lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
        title = f"payload {p['hash'][:10]}"
        body = (f'<h1>Payload <code>{html.escape(p["hash"])}</code>{self.term}</h1>\n'
                f'<p class="facts-line">{p["size"] or 0:,} bytes · <span class="payload-lines">{lines}</span> lines · '
                f'{html.escape(lang)} · <a href="{self.href(self.urls.payload(p["hash"], ".txt"))}" download>'
                f'download raw</a></p>\n{self.carriers(p["artifacts"])}{self.cut(data.get("cut"), p["hash"])}'
                f'<div class="payload" data-lang="{html.escape(lang)}">{CODE_START}{escape_text(text)}{CODE_END}</div>')
        return "".join((self.head, title, self.middle, title, self.crumb, body, self.tail))

    def cut(self, cut: str | None, hash: str) -> str:
        """What the page leaves out of a long payload, and the link to the whole (as payload.html says it)."""
        if not cut:
            return ""
        return (f'<p class="help">Shown here: {html.escape(cut)}. <a href="{self.href(self.urls.payload(hash, ".txt"))}"'
                f' download>The whole payload</a> (raw).</p>\n')

    def carriers(self, artifacts: list[dict]) -> str:
        """The artifacts that carry the payload, each with its compile (as payload.html lists them)."""
        if not artifacts:
            return ""
        shown = []
        for a in artifacts:
            item = f'<a href="{self.href(self.urls.artifact(a["id"]))}">{html.escape(str(a["name"]))}</a>'
            if a["compile"]:
                rank = f" rank {html.escape(str(a['rank']))}" if a["rank"] is not None else ""
                item += (f' (<a href="{self.href(self.urls.compile(a["compile"]))}">'
                         f'[{html.escape(str(a["compile_id"]))}]</a>{rank})')
            shown.append(item)
        return f"<p>Carried by: {', '.join(shown)}</p>\n"

    @staticmethod
    def href(url: str) -> str:
        return html.escape(url)


def _split(shell: str) -> list[str]:
    """The layout cut at its marks: before the title, up to the crumbs' title, up to the body, after the body."""
    head, rest = shell.split(TITLE, 1)
    middle, rest = rest.split(TITLE, 1)
    crumb, tail = rest.split(BODY, 1)
    return [head, middle, crumb, tail]
