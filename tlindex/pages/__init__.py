"""Every tlindex page, declared once: its path, its data, its template, its file in a static report.

A page is one `Page` of PAGES. The plugin serves each at its path under a database (and its JSON
twin, `….json`: the page's data as JSON, as Datasette's own pages have), rendering its template with
its data; `tlindex report` writes it to its file; `tlindex show` prints its data; every URL to it is
built from its path. A page's data comes from its data function here (SQL lives in the library: the
plugin only renders). A page the report cannot have says why (it needs a server).

A new page is one declaration below, its data function (a module of this package), its template
(datasette_plugins/datasette_tlindex/templates/tlindex/) and its test; docs/architecture.md says more.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tlindex.answers.clip import bound_texts
from tlindex.answers.search import Hit
from tlindex.pages import artifact, bytecode, compile, diff, passes, provenance, run, runs, search, trend, trie, vllm
from tlindex.pages.artifact_diff import artifact_diff_data
from tlindex.pages.glossary import glossary_data
from tlindex.pages.rows import Args, row_id
from tlindex.pages.tree import tree_data

# What each placeholder of a path matches (ids: whole numbers; past 64 bits they name no row: 404).
PLACEHOLDERS = {"hash": r"[0-9a-f]{32}", "ext": r"(?:\.txt)?", "format": r"(?:\.json)?"}
ID = r"-?\d+"
PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


class Files(Protocol):
    """Where the report puts a page (tlindex.report_files): a path under DIR, or None (not reported)."""

    def of_run(self, run: int, name: str) -> str | None: ...
    def of_compile(self, compile: int, name: str) -> str | None: ...
    def of_piece(self, piece: int, name: str) -> str | None: ...
    def of_artifact(self, artifact: int, name: str) -> str | None: ...
    def payload_page(self, artifact: int) -> str | None: ...
    def top(self, name: str) -> str | None: ...
    def of_runs(self, args: Args, name: str) -> str | None: ...


FileRule = Callable[[Files, dict, Args], "str | None"]
Data = Callable[..., dict]


@dataclass(frozen=True)
class Page:
    name: str
    path: str                  # under the database's URL; {name} placeholders (ids, or PLACEHOLDERS)
    data: Data                 # (conn, args, **values) -> the page's data; NotFound / UsageError for 404 / 400
    template: str | None       # what the plugin renders it with (None: it is not HTML)
    file: FileRule | None      # where `tlindex report` writes it (None: server-only, and why)
    server_only: str = ""      # why a static report cannot have it
    kind: str = "html"         # html; json (streamed trace), text (raw payload), redirect, fragment (trie node)
    database: bool = True      # whether its data reads the database (`tlindex show` opens none for a page that does not)

    @property
    def json_twin(self) -> bool:
        """Whether it answers `<path>.json` with its data: every page that is not data itself."""
        return self.kind in ("html", "fragment")

    @property
    def placeholders(self) -> list[str]:
        return PLACEHOLDER_RE.findall(self.path)

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

    def values(self, found: dict[str, str]) -> dict:
        """A matched path's values as the data function takes them: ids as ints (NotFound past 64 bits)."""
        return {name: (row_id(name, text) if name not in PLACEHOLDERS else text)
                for name, text in found.items() if name != "format"}

    def read(self, conn: sqlite3.Connection, args: Args | None = None, **values) -> dict:
        """The page's data, no text in it longer than a page shows (tlindex.answers.clip.bound_texts; a raw payload,
        which is its download, whole)."""
        data = self.data(conn, args or Args(), **values)
        if self.json_twin and isinstance(data, dict) and not data.get("raw"):
            bound_texts(data)
        return data


def _trie_file(files: Files, values: dict, args: Args) -> str | None:
    rank = args.get("rank")
    suffix = f"-rank-{int(rank)}" if rank and rank.isdigit() else ""
    return files.of_run(values["run"], f"trie{suffix}.html")


def _artifact_file(files: Files, values: dict, args: Args) -> str | None:
    return files.payload_page(values["artifact"]) or files.of_artifact(values["artifact"],
                                                                       f"artifact/{values['artifact']}.html")


PAGES: tuple[Page, ...] = (
    Page("runs", "/-/tlindex", runs.runs_data, "runs.html", lambda f, v, a: f.top("index.html")),
    Page("search", "/-/tlindex/search", search.search_data, "search.html", None, "a search runs on the server"),
    Page("diff_pick", "/-/tlindex/diff", diff.diff_pick, None, None, "a form picks the two runs", kind="redirect"),
    Page("diff", "/-/tlindex/diff/{a}/{b}", diff.diff_data, "diff.html", None,
         "any two runs of the database can be compared"),
    Page("diff_compiles", "/-/tlindex/diff/compiles/{ca}/{cb}", diff.pair_data, "diff_pair.html", None,
         "any two compiles can be compared"),
    Page("trend", "/-/tlindex/trend", trend.trend_data, "trend.html", lambda f, v, a: f.of_runs(a, "trend.html")),
    Page("graph_breaks", "/-/tlindex/graph-breaks", trend.graph_breaks_data, "graph_breaks.html",
         lambda f, v, a: f.of_runs(a, "graph-breaks.html")),
    Page("tree", "/-/tlindex/tree", tree_data, "tree.html", lambda f, v, a: f.of_runs(a, "tree.html")),
    Page("artifact_diff", "/-/tlindex/artifact-diff", artifact_diff_data, "artifact_diff.html", None,
         "any two artifacts of the database can be compared"),
    Page("glossary", "/-/tlindex/glossary", glossary_data, "glossary.html", lambda f, v, a: f.top("glossary.html"),
         database=False),
    Page("run", "/-/tlindex/run/{run}", run.run_data, "run.html", lambda f, v, a: f.of_run(v["run"], "index.html")),
    Page("chromium", "/-/tlindex/run/{run}/chromium.json", run.chromium_data, None,
         lambda f, v, a: f.of_run(v["run"], "chromium.json"), kind="json"),
    Page("trie", "/-/tlindex/trie/{run}", trie.trie_data, "trie.html", _trie_file),
    Page("trie_node", "/-/tlindex/trie/{run}/node/{node}", trie.trie_node_data, None, None,
         "the report renders each trie whole", kind="fragment"),
    Page("compile", "/-/tlindex/compile/{compile}", compile.compile_data, "compile.html",
         lambda f, v, a: f.of_compile(v["compile"], f"compiles/{v['compile']}.html")),
    Page("bytecode", "/-/tlindex/compile/{compile}/bytecode", bytecode.bytecode_data, "bytecode.html",
         lambda f, v, a: f.of_compile(v["compile"], f"compiles/{v['compile']}-bytecode.html")),
    Page("passes", "/-/tlindex/compile/{compile}/passes", passes.passes_data, "passes.html",
         lambda f, v, a: f.of_compile(v["compile"], f"compiles/{v['compile']}-passes.html")),
    Page("piece_passes", "/-/tlindex/piece/{piece}/passes", passes.piece_passes_data, "passes.html",
         lambda f, v, a: f.of_piece(v["piece"], "compiles/{compile}-piece-{piece}-passes.html")),
    Page("vllm", "/-/tlindex/run/{run}/vllm", vllm.vllm_data, "vllm.html",
         lambda f, v, a: f.of_run(v["run"], "vllm.html")),
    Page("provenance", "/-/tlindex/provenance/{artifact}", provenance.provenance_page_data, "provenance.html",
         lambda f, v, a: f.of_artifact(v["artifact"], f"provenance/{v['artifact']}.html")),
    Page("artifact", "/-/tlindex/artifact/{artifact}", artifact.artifact_data, "artifact.html", _artifact_file),
    Page("payload", "/-/tlindex/payload/{hash}{ext}", artifact.payload_data, "payload.html",
         lambda f, v, a: f.top(f"payloads/{v['hash']}{v.get('ext') or '.html'}")),
)
BY_NAME = {page.name: page for page in PAGES}
_MATCHERS = [(page, re.compile(page.pattern + "$")) for page in PAGES]


def path(name: str, json: bool = False, **values) -> str:
    """The path of a page under its database's URL, e.g. path("compile", compile=12); its JSON twin with json."""
    page = BY_NAME[name]

    def value(match: re.Match) -> str:
        given = values.get(match.group(1), "")
        return str(int(given)) if match.group(1) not in PLACEHOLDERS else str(given)

    if json and not page.json_twin:
        raise ValueError(f"the {name} page has no JSON twin")
    return PLACEHOLDER_RE.sub(value, page.path) + (".json" if json else "")


def match(rest: str) -> tuple[Page, dict[str, str]] | None:
    """The page of a path under a database's URL, with its values as text; None when it is no tlindex page."""
    for page, regex in _MATCHERS:
        found = regex.match(rest)
        if found:
            return page, found.groupdict()
    return None


def hit_path(hit: Hit) -> str:
    """Where a search hit is shown, under its database's URL: its tlindex page (at its line), or Datasette's
    row page."""
    where = f"/{hit.table}/{int(hit.page_id)}" if hit.page is None else path(hit.page, **{hit.page: hit.page_id})
    return where + (f"#{hit.anchor}" if hit.anchor else "")


_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def database_path(name: str) -> str:
    """A database's URL path as Datasette makes it, its name tilde-encoded (`a.b` is `/a~2Eb`), without importing
    Datasette (the command line prints URLs; it does not serve them)."""
    return "/" + "".join(chr(b) if b in _SAFE else "+" if b == 0x20 else f"~{b:02X}" for b in name.encode("utf-8"))


def read_named(conn: sqlite3.Connection, name: str, names: list[str], args: Args | None = None) -> dict:
    """A page's data with its path's values named as users name them (`tlindex show compile 0/1`): runs by
    id, label, directory or label prefix, compiles as torch prints them (`RUN:0/1@RANK`), other ids as numbers."""
    from tlindex.answers.names import resolve_compile, resolve_run
    from tlindex.errors import UsageError

    page = BY_NAME.get(name)
    if page is None or not page.json_twin:
        shown = ", ".join(p.name for p in PAGES if p.json_twin)
        raise UsageError(f"no page named {name!r} has data to show: one of {shown}")
    wanted = [p for p in page.placeholders if p != "ext"]
    if len(names) != len(wanted):
        raise UsageError(f"the {name} page takes {len(wanted)} name{'s' * (len(wanted) != 1)} "
                         f"({' '.join(w.upper() for w in wanted) or 'none'}), not {len(names)}")
    values, run = {}, None
    for placeholder, given in zip(wanted, names):
        if placeholder in ("run", "a", "b"):
            values[placeholder] = run = resolve_run(conn, given)["id"]
        elif placeholder in ("compile", "ca", "cb"):
            values[placeholder] = resolve_compile(conn, given, run)
        elif placeholder == "hash":
            values[placeholder] = given
        else:
            values[placeholder] = row_id(placeholder, given)
    return page.read(conn, args or Args(), **values)
