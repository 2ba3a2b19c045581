"""One page table (tlindex.pages): the plugin's routes, its URLs, the report's files, `tlindex show` and the search
links all come from it; every page is either written by the report or says why it is server-only; and a page's
JSON twin, `tlindex show --json` and what its template is given are one data."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette_tlindex.pages import routes

from tlindex import pages
from tlindex.cli import cli
from tlindex.render.page import PRESENTERS

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "tlindex" / "render" / "templates" / "tlindex"


def test_every_page_is_written_by_the_report_or_says_why_not():
    for page in pages.PAGES:
        assert bool(page.server_only) != (page.file is not None), page.name


def test_the_plugin_serves_exactly_the_table_and_renders_each_page_with_its_template():
    assert len(routes()) == len(pages.PAGES)
    for page in pages.PAGES:
        assert (page.template is not None) == (page.kind == "html"), page.name
        if page.template:
            assert (TEMPLATES / page.template).is_file(), page.template
    assert set(PRESENTERS) <= set(pages.BY_NAME)  # a presenter for a page that does not exist


EXECUTES = {"execute", "executemany", "executescript"}
SQL_RE = re.compile(r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\b.*\bSET|DELETE\s+FROM|CREATE\s+\w+|DROP\s+\w+)\b",
                    re.I | re.S)


def sql_in(path: Path, given: bool = True) -> list[str]:
    """Where a module runs SQL of its own: a call of `execute*` with anything but a statement the library gives
    (a name imported from tlindex) or `PRAGMA schema_version` (with `given` False: any `execute*` at all); a string
    of SQL not handed to the library's `reads` (what a request reads, asked of SQLite's authorizer)."""
    tree = ast.parse(path.read_text())
    library = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               and (node.module or "").startswith("tlindex") for alias in node.names}
    # SQL handed to the library's `reads`, the parts of an f-string (read whole), docstrings: not statements run
    passed = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "reads" for arg in node.args for inner in ast.walk(arg)}
    passed |= {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    passed |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if not given and isinstance(node, ast.Attribute) and node.attr in EXECUTES:
            found.append(f"{path.name}:{node.lineno} {node.attr}")
        elif given and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTES:
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Name) and first.id in library or isinstance(first, ast.Constant)
                    and str(first.value).startswith("PRAGMA schema_version")):
                found.append(f"{path.name}:{node.lineno} {node.func.attr}")
        elif isinstance(node, (ast.Constant, ast.JoinedStr)) and id(node) not in passed:
            text = node.value if isinstance(node, ast.Constant) else "".join(
                str(part.value) if isinstance(part, ast.Constant) else "x" for part in node.values)
            if isinstance(text, str) and SQL_RE.search(text):
                found.append(f"{path.name}:{node.lineno} {text[:40]!r}")
    return found


# What assembles answers and runs none: every module of these folders (a new one is held the day it lands) and these
# modules. SQL lives in schema/, tlindex/ingest/ (writes), tlindex/answers/ (reads) and queries/*.sql.
ASSEMBLERS = ("tlindex/pages", "tlindex/render", "tlindex/report", "tlindex/run.py", "tlindex/serve.py",
              "tlindex/cli.py")


def test_no_sql_in_the_plugin_the_pages_the_renderer_the_report_or_the_commands():
    """The plugin only serves (it runs no statement but those the library gives it), and the pages, the renderer,
    the report, `tlindex run`, `tlindex serve` and the command line assemble answers and run none: no `execute*` at
    all, every page's data and every fact from tlindex.answers (read from the AST: a statement split over lines, or
    run through a variable, is found as well)."""
    plugin = sorted((ROOT / "datasette_plugins").rglob("*.py"))
    library = sorted(path for name in ASSEMBLERS for path in
                     ((ROOT / name).rglob("*.py") if (ROOT / name).is_dir() else [ROOT / name]))
    assert len(plugin) > 5 and len(library) > 30
    assert [place for path in plugin for place in sql_in(path)] == []
    assert [place for path in library for place in sql_in(path, given=False)] == []


def test_the_no_sql_check_finds_sql(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('from tlindex.store.reads import SCHEMA_SQL\n\nasync def f(db, conn, name):\n'
                      '    await db.execute(SCHEMA_SQL)\n    await db.execute("PRAGMA schema_version")\n'
                      '    sql = (f"SELECT id FROM {name} "\n           "WHERE 1")\n    conn.execute(sql)\n'
                      '    db.execute_fn(lambda c: c.executescript("DROP TABLE x"))\n')
    assert [place.split()[0] for place in sql_in(module)] == ["m.py:6", "m.py:8", "m.py:9", "m.py:9"]
    assert sorted(place.split()[0] for place in sql_in(module, given=False)) == [
        "m.py:4", "m.py:5", "m.py:6", "m.py:8", "m.py:9", "m.py:9"]


def examples(page: pages.Page) -> dict:
    """A value of each of a page's placeholders, as its type writes and matches it."""
    made = {"hash": "0123456789abcdef0123456789abcdef", "ext": ".txt"}
    return {name: made.get(name, 10 + i) for i, name in enumerate(page.placeholders)}


def test_paths_and_matching_agree():
    for page in pages.PAGES:
        values = examples(page)
        built = pages.path(page.name, **values)
        found = pages.match(built)
        assert found is not None and found[0] == page, (page.name, built)
        assert {k: v for k, v in found[1].items() if k != "format"} == {k: str(v) for k, v in values.items()}
        assert page.values(found[1]) == values  # parsed back as the data function takes them
        if page.json_twin:  # and its JSON twin
            twin = pages.match(pages.path(page.name, json=True, **values))
            assert twin is not None and twin[0] == page and twin[1]["format"] == ".json"
    assert pages.match("/-/tlindex/compile/abc") is None  # ids only
    assert pages.path("payload", hash="0" * 32, ext="") == "/-/tlindex/payload/" + "0" * 32


def test_links_carry_the_declared_arguments_in_order():
    """A link takes its path's values, then its query arguments, by position or by name, as the page declares."""
    assert pages.link("compile", 12) == "/-/tlindex/compile/12"
    assert pages.link("trie_node", 3, 7, rank=0) == pages.link("trie_node", 3, 7, 0) == "/-/tlindex/trie/3/node/7?rank=0"
    assert pages.link("tree", [1, 2], "graph", 5) == "/-/tlindex/tree?run=1&run=2&q=graph&a=5"
    assert pages.link("tree", None, "") == pages.link("tree") == "/-/tlindex/tree"
    assert pages.link("graph_breaks", 4) == "/-/tlindex/graph-breaks?run=4"
    assert pages.link("artifact_diff", "3", 4, True) == "/-/tlindex/artifact-diff?a=3&b=4&mask=1"
    assert pages.link("artifact_diff", 3, 4, False) == "/-/tlindex/artifact-diff?a=3&b=4"
    assert pages.link("payload", "0" * 32, ".txt") == f"/-/tlindex/payload/{'0' * 32}.txt"
    assert pages.link("run", None) == pages.link("runs") == "/-/tlindex"  # a compile not yet in a run
    assert pages.link("diff") == pages.link("diff_pick")
    with pytest.raises(ValueError):  # an id left out names no page
        pages.link("compile")
    for page in pages.PAGES:  # every page's placeholders and arguments are distinct
        assert len(set(page.parameters)) == len(page.parameters), page.name


def test_every_placeholder_has_a_type_and_a_sample(traces_db):
    """The samples the tests and benchmarks fill paths with are real values of a real database."""
    import sqlite3

    conn = sqlite3.connect(traces_db)
    used = {name for page in (*pages.PAGES, pages.QUERY) for name in page.placeholders}
    assert used == set(pages.PLACEHOLDERS)
    for name, kind in pages.PLACEHOLDERS.items():
        rows = conn.execute(kind.sample).fetchmany(3)
        assert rows, name
        kind.parse(name, str(rows[0][0]))
    try:
        pages.Page("odd", "/-/tlindex/odd/{thing}", lambda conn, args: {}, None, None, "")
    except ValueError as error:
        assert "thing" in str(error)
    else:
        raise AssertionError("a placeholder without a type was declared")


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
        names = [values[p] for p in pages.BY_NAME[name].placeholders if pages.PLACEHOLDERS[p].shown]
        result = CliRunner().invoke(cli, ["show", name, *names, "--db", str(traces_db), "--json"])
        assert result.exit_code == 0, (name, result.output[-300:])
        assert steady(name, json.loads(result.output)) == steady(name, twin), name


def steady(name: str, data: dict) -> dict:
    """A twin without what depends on the clock alone: the run page's refresh period (2 s while its logs are under a
    minute old, then null: a fixture's ingest can turn a minute old between the served page and `tlindex show`)."""
    if name == "run":
        data["run"].pop("refresh_s", None)
    return data


def test_a_new_page_is_one_declaration(tmp_path, traces_db, monkeypatch):
    """docs/architecture.md says how a page is added; this follows it: one declaration (with its data function),
    its template, and the page is served with its JSON twin, linked, in the report's file table, and shown by
    `tlindex show`."""
    import asyncio
    import sqlite3

    from conftest import scenario_run
    from datasette.app import Datasette

    from tlindex.pages.twins import render as render_twins
    from tlindex.pages.twins import twins
    from tlindex.render.site import ReportSite
    from tlindex.render.urls import Urls
    from tlindex.report.files import ReportFiles

    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert "**A new page**" in doc and "tlindex/pages/__init__.py" in doc

    def hello_data(conn, args, run: int) -> dict:
        return {"run_id": run, "compiles": conn.execute("SELECT count(*) FROM compiles WHERE run_id = ?",
                                                        (run,)).fetchone()[0]}

    page = pages.Page("hello", "/-/tlindex/run/{run}/hello", hello_data, "hello.html",
                      lambda f, v, a: f.of_run(v["run"], "hello.html"), args=(pages.Arg("rank"),),
                      keys=(("run_id", "the run"), ("compiles", "how many compiles it has")))
    monkeypatch.setattr(pages, "PAGES", (*pages.PAGES, page))  # the declaration: nothing else is told of it
    template = TEMPLATES / "hello.html"
    template.write_text('{% extends "tlindex/_base.html" %}{% block body %}<h1>{{ compiles }} compiles of run '
                        '{{ run_id }}</h1>{% endblock %}')
    try:
        conn = sqlite3.connect(traces_db)
        (run,) = scenario_run(conn, "graph_breaks")
        urls = Urls(ReportSite("traces"), "traces")
        assert urls.hello(run, 1) == f"/traces/-/tlindex/run/{run}/hello?rank=1"
        files = ReportFiles(conn, [run], urls.base, set())
        assert files.target(urls.hello(run)) == "hello.html"

        async def fetch():
            ds = Datasette([str(traces_db)])
            await ds.invoke_startup()
            return (await ds.client.get(urls.hello(run))), (await ds.client.get(f"{urls.hello(run)}.json"))

        html, twin = asyncio.run(fetch())
        assert html.status_code == 200 and "compiles of run" in html.text
        result = CliRunner().invoke(cli, ["show", "hello", str(run), "--db", str(traces_db), "--json"])
        assert json.loads(result.output) == twin.json()
        assert [key for key, _ in twins()["hello"]] == list(twin.json())  # its twin documented (docs/json.md)
        assert "## hello" in render_twins()
    finally:
        template.unlink()


def test_the_crawl_counts_only_pages_that_answered():
    """A page that answers 404 (or 400) wherever the crawl asks is not reached: a test requiring every page fails."""
    import asyncio
    import sqlite3

    from crawl import crawl

    class Answer:
        def __init__(self, status: int, text: str = ""):
            self.status_code, self.text, self.headers = status, text, {"content-type": "text/html"}

    class Client:
        async def get(self, url: str) -> Answer:
            if url.endswith("/-/tlindex/glossary"):  # (a page links its JSON twin)
                return Answer(200, '<a href="/traces/-/tlindex/glossary.json">json</a>')
            return Answer(404)

    conn = sqlite3.connect(":memory:")
    conn.executescript("CREATE TABLE runs (id); CREATE TABLE compiles (id); CREATE TABLE piece_compiles (id);"
                       "CREATE TABLE artifacts (id, name, payload); CREATE TABLE payload_data (hash);")
    result = asyncio.run(crawl(Client(), conn, "traces"))
    assert set(result.reached) == {"glossary"} and result.refused["runs"] >= 1 and result.errors == []


def test_the_report_names_no_file_itself():
    """Every file name of a report comes from the page declarations (a payload's page and text, a compile's page, a
    query's table, the index): no `.html` (or `.txt`, `chromium.json`) in the code of tlindex/report/ (docstrings and
    comments may say where files go)."""
    found = []
    for path in sorted((ROOT / "tlindex" / "report").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        found += [f"{path.name}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and id(node) not in docstrings
                  and any(name in node.value for name in (".html", ".txt", "chromium.json"))]
    assert found == []


def test_the_server_serves_the_renderer_s_templates_and_assets(traces_db):
    """The templates and assets live in tlindex/render/ (below the plugin and the report): Datasette finds the
    templates through the plugin's loader and serves the assets at its URL for a plugin's files."""
    import asyncio

    from datasette.app import Datasette

    from tlindex.render.site import STATIC

    async def fetch():
        ds = Datasette([str(traces_db)])
        await ds.invoke_startup()
        return [await ds.client.get(url) for url in ("/traces/-/tlindex/glossary", "/-/static-plugins/tlindex/tlindex.css",
                                                      "/-/static-plugins/tlindex/nothing.css")]

    page, css, missing = asyncio.run(fetch())
    assert page.status_code == 200 and "/-/static-plugins/tlindex/tlindex.css" in page.text
    assert css.status_code == 200 and css.content == (STATIC / "tlindex.css").read_bytes()
    assert missing.status_code == 404


def test_no_page_is_named_as_a_url_builder_s_own_method():
    """`urls.compile(12)`: every page is a method of Urls by its name, so none may be named as Urls' own."""
    from tlindex.render.urls import Urls

    assert set(pages.BY_NAME) & set(dir(Urls)) == set()
