"""Every tlindex page, once: its name, its path under a database, and whether `tlindex report` writes it.

The plugin's routes (`datasette_plugins/tlindex/pages`), its `Urls`, the report's file for each
page and the links of search hits are all derived from this table, so a new page is added here
once. Every page but a raw one has a JSON twin (`…/compile/12.json`): the data its template is
given, from the same data function. A page the report does not write says why (it needs a server); `tests/test_routes.py` fails
for a route that is neither written by the report nor listed as server-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What each placeholder of a path matches (ids past 64 bits are the handlers' 404).
PLACEHOLDERS = {"hash": r"[0-9a-f]{32}", "ext": r"(?:\.txt)?", "format": r"(?:\.json)?"}
ID = r"-?\d+"
PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Route:
    name: str
    path: str                  # under the database's URL; {name} placeholders
    server_only: str = ""      # why a static report cannot have this page ("" when the report writes it)
    json_twin: bool = True     # the page answers `<path>.json` with its data, as Datasette's own pages do

    @property
    def pattern(self) -> str:
        """The path as a regular expression with named groups (no anchors, no database)."""
        out, last = "", 0
        for match in PLACEHOLDER_RE.finditer(self.path):
            out += re.escape(self.path[last:match.start()])
            name = match.group(1)
            out += f"(?P<{name}>{PLACEHOLDERS.get(name, ID)})"
            last = match.end()
        out += re.escape(self.path[last:])
        return out + (f"(?P<format>{PLACEHOLDERS['format']})" if self.json_twin else "")


ROUTES: tuple[Route, ...] = (
    Route("runs", "/-/tlindex"),
    Route("search", "/-/tlindex/search", "a search runs on the server"),
    Route("diff_pick", "/-/tlindex/diff", "a form picks the two runs", json_twin=False),  # a redirect
    Route("diff", "/-/tlindex/diff/{a}/{b}", "any two runs of the database can be compared"),
    Route("diff_compiles", "/-/tlindex/diff/compiles/{ca}/{cb}", "any two compiles can be compared"),
    Route("run", "/-/tlindex/run/{run}"),
    Route("chromium", "/-/tlindex/run/{run}/chromium.json", json_twin=False),  # JSON itself
    Route("trie", "/-/tlindex/trie/{run}"),
    Route("trie_node", "/-/tlindex/trie/{run}/node/{node}", "the report renders each trie whole"),
    Route("compile", "/-/tlindex/compile/{compile}"),
    Route("bytecode", "/-/tlindex/compile/{compile}/bytecode"),
    Route("passes", "/-/tlindex/compile/{compile}/passes"),
    Route("piece_passes", "/-/tlindex/piece/{piece}/passes"),
    Route("vllm", "/-/tlindex/run/{run}/vllm"),
    Route("provenance", "/-/tlindex/provenance/{artifact}"),
    Route("artifact", "/-/tlindex/artifact/{artifact}"),
    Route("payload", "/-/tlindex/payload/{hash}{ext}", json_twin=False),  # its text is the data
)
BY_NAME = {route.name: route for route in ROUTES}
_MATCHERS = [(route, re.compile(route.pattern + "$")) for route in ROUTES]


def path(name: str, json: bool = False, **values) -> str:
    """The path of a page under its database's URL, e.g. path("compile", compile=12); its JSON twin with json."""
    route = BY_NAME[name]

    def value(match: re.Match) -> str:
        given = values.get(match.group(1), "")
        return str(int(given)) if match.group(1) not in PLACEHOLDERS else str(given)

    if json and not route.json_twin:
        raise ValueError(f"the {name} page has no JSON twin")
    return PLACEHOLDER_RE.sub(value, route.path) + (".json" if json else "")


def match(rest: str) -> tuple[Route, dict[str, str]] | None:
    """The route of a path under a database's URL, with its values; None when it is no tlindex page."""
    for route, regex in _MATCHERS:
        found = regex.match(rest)
        if found:
            return route, found.groupdict()
    return None
