"""The glossary: every word the pages use explained once, each page's "?" leading to an entry that exists, on the
served pages, in a static report and in `tlindex show glossary`."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from click.testing import CliRunner
from conftest import connect, scenario_run, write_report
from crawl import route_seeds

from tlindex import pages
from tlindex.answers.findings import kinds
from tlindex.answers.glossary import SECTIONS, terms
from tlindex.cli import cli
from tlindex.render.trie_html import STATUS_LEGEND

# The words issue 38 asks for, each by its anchor.
ASKED = ("compile-id", "compiled-autograd-id", "rank", "run", "frame", "recompile", "restart", "graph-break", "guard",
         "guard-failure", "dynamo", "aotautograd", "inductor", "backward-compile", "fx-graph-cache",
         "aotautograd-cache", "cache-hit", "cache-miss", "cache-bypass", "no-compile-id", "piece", "attempt",
         "abandoned-call", "ingest-error", "payload", "envelope")
PER_ROUTE = 40  # pages of each route the crawl follows (every template, with the fixtures' varied data)


def test_every_word_is_explained_once_in_a_sentence_or_two():
    words = terms()
    anchors = Counter(t.anchor for t in words)
    assert [a for a, n in anchors.items() if n > 1] == [] and not set(anchors) & set(SECTIONS)
    assert set(ASKED) <= set(anchors)
    assert {f"status-{status}" for status, _ in STATUS_LEGEND} <= set(anchors)  # every colour of the pages
    assert {c.anchor for c in kinds()} <= set(anchors)  # every kind of finding, from its check
    for word in words:
        assert word.section in SECTIONS and word.name and re.fullmatch(r"[a-z0-9-]+", word.anchor), word
        assert 20 <= len(word.text) <= 420 and word.text.count("`") % 2 == 0, word.anchor


def test_every_status_a_compile_has_is_a_word(db):
    statuses = {row[0] for row in db.execute("SELECT DISTINCT status FROM compiles")}
    assert statuses and {f"status-{s}" for s in statuses} <= {t.anchor for t in terms()}


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("href"):
            self.links.append(attrs["href"])
        if attrs.get("id"):
            self.ids.add(attrs["id"])


def _parsed(text: str) -> _Page:
    parser = _Page()
    parser.feed(text)
    return parser


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
@pytest.mark.asyncio
async def test_every_glossary_link_of_every_page_leads_to_its_entry(ds, traces_db):
    """A crawl of the fixtures' pages from every route's seeds: each `glossary#word` a page links is an entry of the
    glossary page, and the words the pages must explain where they first appear are linked."""
    conn = connect(traces_db)
    base = "/traces"
    glossary = pages.path("glossary")
    queue = [base + pages.path("runs")] + route_seeds(conn, base)
    seen, per_route, linked = set(queue), Counter(), Counter()
    while queue:
        url = queue.pop(0)
        found = pages.match(urlsplit(url).path[len(base):])
        if found is None or not found[0].template or per_route[found[0].name] >= PER_ROUTE:
            continue
        per_route[found[0].name] += 1
        response = await ds.client.get(url)
        assert response.status_code < 500, url  # a page linking a word the glossary lacks fails to render
        if "text/html" not in response.headers.get("content-type", ""):
            continue
        for link in _parsed(response.text).links:
            target = urlsplit(urljoin(url, link))
            if target.path == base + glossary and target.fragment:
                linked[target.fragment] += 1
            elif target.path.startswith(base + "/-/tlindex") and link not in seen and not target.fragment:
                seen.add(link)
                queue.append(target.path + (f"?{target.query}" if target.query else ""))
    entries = _parsed((await ds.client.get(base + glossary)).text).ids
    assert set(linked) - entries == set()
    assert {"compile-id", "status-ok", "status-error", "recompile", "restart", "graph-break", "attempt",
            "finding-graph-breaks", "finding-divergence-missing-compile", "piece", "abandoned-call"} <= set(linked)
    assert {name for name, page in pages.BY_NAME.items() if page.kind == "html"} - set(per_route) <= {"search", "diff"}


def test_the_report_has_the_glossary_at_its_top(fixtures_db, tmp_path):

    runs = scenario_run(connect(fixtures_db), "cache")  # two runs: a folder each, the glossary above them
    assert len(runs) == 2
    write_report(fixtures_db, tmp_path / "report", runs, overwrite=False)
    page = (tmp_path / "report" / f"run-{runs[0]}" / "index.html").read_text()
    assert 'href="../glossary.html#finding-cache"' in page
    ids = _parsed((tmp_path / "report" / "glossary.html").read_text()).ids
    assert "finding-cache" in ids and "status-ok" in ids


def test_tlindex_show_glossary_needs_no_database(tmp_path):
    result = CliRunner().invoke(cli, ["show", "glossary", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 0, result.output
    for word in terms():
        assert f"{word.name}" in result.output, word.anchor
    assert "next: " in result.output and "`" not in result.output
    assert not (tmp_path / "none.db").exists()
