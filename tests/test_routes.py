"""One page table (tlindex.pages): the plugin's routes, its URLs, the report's files, `tlindex show` and the search
links all come from it; every page is either written by the report or says why it is server-only; and a page's
JSON twin, `tlindex show --json` and what its template is given are one data."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from datasette_tlindex.pages import ROUTES
from datasette_tlindex.render import PRESENTERS

from tlindex import pages
from tlindex.cli import cli

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "datasette_plugins" / "datasette_tlindex" / "templates" / "tlindex"


def test_every_page_is_written_by_the_report_or_says_why_not():
    for page in pages.PAGES:
        assert bool(page.server_only) != (page.file is not None), page.name


def test_the_plugin_serves_exactly_the_table_and_renders_each_page_with_its_template():
    assert len(ROUTES) == len(pages.PAGES)
    for page in pages.PAGES:
        assert (page.template is not None) == (page.kind == "html"), page.name
        if page.template:
            assert (TEMPLATES / page.template).is_file(), page.template
    assert set(PRESENTERS) <= set(pages.BY_NAME)  # a presenter for a page that does not exist


def test_no_sql_in_the_plugin():
    """The plugin only renders: every page's data, and every fact, comes from the library."""
    sql = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b\s+[\w*(]", re.I)
    found = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "datasette_plugins").rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if sql.search(line) and "execute" in line or "conn.execute(" in line]
    assert found == []


def test_paths_and_matching_agree():
    examples = {"a": 1, "b": 2, "ca": 3, "cb": 4, "run": 5, "node": 6, "compile": 7, "artifact": 8, "piece": 9,
                "hash": "0123456789abcdef0123456789abcdef", "ext": ".txt"}
    for page in pages.PAGES:
        names = page.placeholders
        built = pages.path(page.name, **{name: examples[name] for name in names})
        found = pages.match(built)
        assert found is not None and found[0] == page, (page.name, built)
        assert {k: v for k, v in found[1].items() if k != "format"} == {name: str(examples[name]) for name in names}
        if page.json_twin:  # and its JSON twin
            twin = pages.match(pages.path(page.name, json=True, **{name: examples[name] for name in names}))
            assert twin is not None and twin[0] == page and twin[1]["format"] == ".json"
    assert pages.match("/-/tlindex/compile/abc") is None  # ids only
    assert pages.path("payload", hash="0" * 32, ext="") == "/-/tlindex/payload/" + "0" * 32


def test_every_page_has_a_json_twin_and_tlindex_show_prints_it(traces_db):
    """The served `….json` of every page is its data, and `tlindex show PAGE NAMES --json` prints the same."""
    import asyncio

    from conftest import connect
    from datasette.app import Datasette
    from test_plugin_security import _pages

    async def fetch():
        ds = Datasette([str(traces_db)])
        await ds.invoke_startup()
        found = {}
        for url in _pages(connect(traces_db)):
            page, values = pages.match(url.removeprefix("/traces").split("?")[0])
            if not page.json_twin:
                continue
            path = url.split("?")[0] + ".json" + (("?" + url.split("?")[1]) if "?" in url else "")
            response = await ds.client.get(path)
            assert response.status_code == 200, path
            found.setdefault(page.name, (json.loads(response.text), values, url))
        search = await ds.client.get("/traces/-/tlindex/search.json?q=aten.mm")
        assert search.status_code == 200 and "groups" in json.loads(search.text)
        return found

    found = asyncio.run(fetch())
    assert set(found) == {page.name for page in pages.PAGES if page.json_twin} - {"search"}
    assert found["compile"][0]["compile"]["compile_id"] and found["run"][0]["run"]["label"]
    for name, (twin, values, url) in found.items():
        if "?" in url or values.get("ext"):  # an argument besides the path's values; a payload's raw text
            continue
        names = [values[p] for p in pages.BY_NAME[name].placeholders if p != "ext"]
        result = CliRunner().invoke(cli, ["show", name, *names, "--db", str(traces_db), "--json"])
        assert result.exit_code == 0, (name, result.output[-300:])
        assert json.loads(result.output) == twin, name


def test_a_new_page_is_one_declaration(tmp_path, traces_db):
    """docs/architecture.md says how a page is added; this follows it: one declaration (with its data function),
    its template, and the page is served, in the report's file table, and shown by `tlindex show`."""
    import asyncio
    import sqlite3

    from conftest import scenario_run
    from datasette.app import Datasette

    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert "**A new page**" in doc and "tlindex/pages/__init__.py" in doc

    def hello_data(conn, args, run: int) -> dict:
        return {"run_id": run, "compiles": conn.execute("SELECT count(*) FROM compiles WHERE run_id = ?",
                                                        (run,)).fetchone()[0]}

    page = pages.Page("hello", "/-/tlindex/run/{run}/hello", hello_data, "hello.html",
                      lambda f, v, a: f.of_run(v["run"], "hello.html"))
    template = TEMPLATES / "hello.html"
    template.write_text('{% extends "tlindex/_base.html" %}{% block body %}<h1>{{ compiles }} compiles of run '
                        '{{ run_id }}</h1>{% endblock %}')
    import datasette_tlindex.pages as served

    saved = (pages.PAGES, dict(pages.BY_NAME), list(pages._MATCHERS), list(served.ROUTES))
    try:
        pages.PAGES = (*pages.PAGES, page)
        pages.BY_NAME[page.name] = page
        pages._MATCHERS.append((page, re.compile(page.pattern + "$")))
        served.ROUTES.append((rf"^/(?P<database>[^/]+){page.pattern}$", served.isolated(served.handler(page))))
        (run,) = scenario_run(sqlite3.connect(traces_db), "graph_breaks")

        async def fetch():
            ds = Datasette([str(traces_db)])
            await ds.invoke_startup()
            return (await ds.client.get(f"/traces/-/tlindex/run/{run}/hello")), \
                (await ds.client.get(f"/traces/-/tlindex/run/{run}/hello.json"))

        html, twin = asyncio.run(fetch())
        assert html.status_code == 200 and "compiles of run" in html.text
        result = CliRunner().invoke(cli, ["show", "hello", str(run), "--db", str(traces_db), "--json"])
        assert json.loads(result.output) == twin.json()
    finally:
        pages.PAGES, by_name, pages._MATCHERS[:], served.ROUTES[:] = saved[0], saved[1], saved[2], saved[3]
        pages.BY_NAME.clear()
        pages.BY_NAME.update(by_name)
        template.unlink()
