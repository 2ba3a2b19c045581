"""Request every tlindex page of a database, its cases generated from the page table (tlindex.pages).

`route_seeds` fills each page's placeholders with real values of the database (each placeholder's type
declares its sample: tlindex.pages.declare.PLACEHOLDERS, so a new page is crawled the day it is declared);
`crawl` follows every tlindex link of every page from those seeds, asks each page's JSON twin too,
and returns what answered 5xx and which pages were reached (answered 2xx), so a test can require all of them.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import quote, urljoin, urlsplit

from tlindex import pages as routes

QUERY_STRINGS = {"search": ["q=aten", "q=0", "q=%5B", "q=x&run=1"], "diff_pick": ["a=1&b=2"],
                 "tree": ["", "q=rank+0", "q=%5B0%2F0%5D+output", "q=%3Cscript%3E", "a=1&q=graph", "run=1&q=x"],
                 "artifact_diff": ["a=1&b=2", "artifact=1&artifact=2", "a=2&b=1&mask=1", "a=1", "a=x&b=1"]}
PER_ROUTE = 3  # seeds per route (each placeholder's first values)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.found += [value for name, value in attrs if name in ("href", "data-src") and value]


def route_seeds(conn: sqlite3.Connection, base: str) -> list[str]:
    """A few URLs of every route of the table, with the database's own values (and odd query strings)."""
    seeds = []
    for route in routes.PAGES:
        names = route.placeholders
        columns = [[row[0] for row in conn.execute(route.sample(name)).fetchmany(PER_ROUTE)]
                   for name in names]
        if any(not values for values in columns):
            continue  # the database has nothing of the kind (no vLLM piece): the crawl says so
        for i in range(max((len(values) for values in columns), default=1)):
            values = {name: values[min(i, len(values) - 1)] for name, values in zip(names, columns)}
            path = base + routes.path(route.name, **values)
            for query in QUERY_STRINGS.get(route.name, [""]):
                seeds.append(path + (f"?{query}" if query else ""))
    return seeds


@dataclass
class Crawl:
    pages: int = 0
    errors: list[tuple[str, int, str]] = field(default_factory=list)  # (url, status, start of the body)
    reached: Counter = field(default_factory=Counter)  # page name: pages that answered 2xx
    refused: Counter = field(default_factory=Counter)  # page name: pages that answered 4xx (an odd value's 400, a 404)


async def crawl(client, conn: sqlite3.Connection, database: str, per_route: int | None = None) -> Crawl:
    """Every tlindex page reachable from the runs page and the route seeds (at most `per_route` pages of each
    route), each page's JSON twin too; 5xx answers are collected, never raised."""
    base = "/" + quote(database)
    seeds = [base + routes.path("runs")] + route_seeds(conn, base)
    queue, seen, result = list(seeds), set(seeds), Crawl()
    while queue:
        url = queue.pop(0)
        found = routes.match(urlsplit(url).path[len(base):])
        name = found[0].name if found else "?"
        if per_route is not None and result.reached[name] >= per_route and url not in seeds:
            continue
        response = await client.get(url)
        result.pages += 1
        twins = []
        if found and found[0].json_twin and response.status_code == 200 and not found[1].get("format"):
            parts = urlsplit(url)
            twins.append(parts.path + ".json" + (f"?{parts.query}" if parts.query else ""))
        for twin in twins:
            answer = await client.get(twin)
            result.pages += 1
            if answer.status_code >= 500:
                result.errors.append((twin, answer.status_code, answer.text[:300]))
        if response.status_code >= 500:
            result.errors.append((url, response.status_code, response.text[:300]))
            continue
        redirect = found is not None and found[0].kind == "redirect" and 300 <= response.status_code < 400
        if not (200 <= response.status_code < 300 or redirect):  # a redirect page reached is its redirect
            result.refused[name] += 1
            continue
        result.reached[name] += 1
        if "text/html" not in response.headers.get("content-type", ""):
            continue
        parser = _Links()
        parser.feed(response.text)
        if twins and found[0].kind != "fragment" and not any(urljoin(url, link) == urljoin(url, twins[0])
                                                             for link in parser.found):
            result.errors.append((url, response.status_code, "the page does not link its JSON twin"))
        for link in parser.found:
            target = urlsplit(urljoin(url, link))
            path = target.path + (f"?{target.query}" if target.query else "")
            if target.path.startswith(base + "/-/tlindex") and path not in seen:
                seen.add(path)
                queue.append(path)
    return result
