"""One route table (tlindex.routes): the plugin's routes, its URLs, the report's files and the search
links all come from it, and every route is either written by the report or says why it is server-only."""

from __future__ import annotations

import re

from datasette_plugins.tlindex.pages import HANDLERS, ROUTES
from datasette_plugins.tlindex.report_pages import FILES
from tlindex import routes


def test_every_route_is_written_by_the_report_or_listed_as_server_only():
    for route in routes.ROUTES:
        assert bool(route.server_only) != (route.name in FILES), route.name
    assert set(FILES) <= set(routes.BY_NAME)  # no report file for a page that does not exist


def test_the_plugin_serves_exactly_the_table():
    assert set(HANDLERS) == set(routes.BY_NAME)
    assert len(ROUTES) == len(routes.ROUTES)


def test_paths_and_matching_agree():
    examples = {"a": 1, "b": 2, "ca": 3, "cb": 4, "run": 5, "node": 6, "compile": 7, "artifact": 8, "piece": 9,
                "hash": "0123456789abcdef0123456789abcdef", "ext": ".txt"}
    for route in routes.ROUTES:
        names = re.findall(r"\{(\w+)\}", route.path)
        built = routes.path(route.name, **{name: examples[name] for name in names})
        found = routes.match(built)
        assert found is not None and found[0] == route, (route.name, built)
        assert {k: v for k, v in found[1].items() if k != "format"} == {name: str(examples[name]) for name in names}
        if route.json_twin:  # and its JSON twin
            twin = routes.match(routes.path(route.name, json=True, **{name: examples[name] for name in names}))
            assert twin is not None and twin[0] == route and twin[1]["format"] == ".json"
    assert routes.match("/-/tlindex/compile/abc") is None  # ids only
    assert routes.path("payload", hash="0" * 32, ext="") == "/-/tlindex/payload/" + "0" * 32


def test_every_page_has_a_json_twin_with_its_data(traces_db):
    import asyncio
    import json

    from conftest import connect
    from datasette.app import Datasette
    from test_plugin_security import _pages

    async def fetch():
        ds = Datasette([str(traces_db)])
        await ds.invoke_startup()
        found = {}
        for page in _pages(connect(traces_db)):
            match = routes.match(page.removeprefix("/traces"))
            route = match[0]
            if not route.json_twin:
                continue
            path = page.split("?")[0] + ".json" + (("?" + page.split("?")[1]) if "?" in page else "")
            response = await ds.client.get(path)
            assert response.status_code == 200, path
            found[route.name] = json.loads(response.text)
        search = await ds.client.get("/traces/-/tlindex/search.json?q=aten.mm")
        assert search.status_code == 200 and "groups" in json.loads(search.text)
        return found

    found = asyncio.run(fetch())
    assert set(found) == {route.name for route in routes.ROUTES if route.json_twin} - {"search"}
    assert found["compile"]["c"]["compile_id"] and found["run"]["run"]["label"]
    assert "u" not in found["compile"] and isinstance(found["diff"], dict)
