"""Every tlindex page, declared once: its path, its data, its template, its file in a static report.

A page is one `Page` of PAGES. The plugin serves each at its path under a database (and its JSON
twin, `….json`: the page's data as JSON, as Datasette's own pages have), rendering its template with
its data; `tlindex report` writes it to its file; `tlindex show` prints its data; every URL to it is
built from its path. A page's data comes from its data function here, which assembles what tlindex.answers
reads (neither the pages nor the plugin run SQL). A page the report cannot have says why (it needs a server).

A new page is one declaration below, its data function (a module of this package), its template
(tlindex/render/templates/tlindex/) and its test; docs/architecture.md says more.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping

from tlindex.answers.samples import PROVENANCE_MAPPINGS
from tlindex.answers.search import Hit
from tlindex.pages import artifact, bytecode, compile, diff, passes, provenance, run, runs, search, trend, trie, vllm
from tlindex.pages.artifact_diff import artifact_diff_data
from tlindex.pages.declare import PAGE_SUFFIX, PLACEHOLDERS, RAW_TEXT, Arg, Files, Page
from tlindex.pages.glossary import glossary_data
from tlindex.pages.rows import Args
from tlindex.pages.tree import tree_data

__all__ = ["PAGES", "BY_NAME", "PLACEHOLDERS", "QUERY", "RAW_TEXT", "Arg", "Page", "path", "link", "match", "hit_path",
           "read_named"]


def _trie_file(files: Files, values: dict, args: Args) -> str | None:
    rank = args.get("rank")
    suffix = f"-rank-{int(rank)}" if rank and rank.isdigit() else ""
    return files.of_run(values["run"], f"trie{suffix}.html")


def _artifact_file(files: Files, values: dict, args: Args) -> str | None:
    return files.payload_page(values["artifact"]) or files.of_artifact(values["artifact"],
                                                                       f"artifact/{values['artifact']}.html")


def _chromium_file(files: Files, values: dict, args: Args) -> str | None:
    """A run's trace under tlparse's name (chromium_events.json, in DIR, or in DIR/rank_<R>/ for a rank's), its
    overview beside it; a trace of several chosen ranks is the server's."""
    ranks, run = args.getlist("rank"), values["run"]
    if args.get("overview"):
        return None if ranks else files.of_run(run, "chromium_overview.json")
    if len(ranks) == 1 and ranks[0].isdigit():
        return files.of_rank(run, int(ranks[0]), "chromium_events.json")
    return None if ranks else files.of_run(run, "chromium_events.json")


RUNS = Arg("run", many=True)  # ?run=1&run=2: the runs a page over runs shows (every run: none)
PAGES: tuple[Page, ...] = (
    Page("runs", "/-/tlindex", runs.runs_data, "runs.html", lambda f, v, a: f.top("index.html"), args=(RUNS,)),
    Page("search", "/-/tlindex/search", search.search_data, "search.html", None, "a search runs on the server",
         args=(Arg("q", "text"), Arg("run"))),
    Page("diff_pick", "/-/tlindex/diff", diff.diff_pick, None, None, "a form picks the two runs", kind="redirect"),
    Page("diff", "/-/tlindex/diff/{a}/{b}", diff.diff_data, "diff.html", None,
         "any two runs of the database can be compared", without="diff_pick"),
    Page("diff_compiles", "/-/tlindex/diff/compiles/{ca}/{cb}", diff.pair_data, "diff_pair.html", None,
         "any two compiles can be compared"),
    Page("trend", "/-/tlindex/trend", trend.trend_data, "trend.html", lambda f, v, a: f.of_runs(a, "trend.html"),
         args=(RUNS, Arg("label", "text"))),
    Page("graph_breaks", "/-/tlindex/graph-breaks", trend.graph_breaks_data, "graph_breaks.html",
         lambda f, v, a: f.of_runs(a, "graph-breaks.html"), args=(RUNS,)),
    Page("tree", "/-/tlindex/tree", tree_data, "tree.html", lambda f, v, a: f.of_runs(a, "tree.html"),
         args=(RUNS, Arg("q", "text"), Arg("a"))),
    Page("artifact_diff", "/-/tlindex/artifact-diff", artifact_diff_data, "artifact_diff.html", None,
         "any two artifacts of the database can be compared", args=(Arg("a"), Arg("b"), Arg("mask", "flag"))),
    Page("glossary", "/-/tlindex/glossary", glossary_data, "glossary.html", lambda f, v, a: f.top("glossary.html"),
         database=False),
    Page("run", "/-/tlindex/run/{run}", run.run_data, "run.html", lambda f, v, a: f.of_run(v["run"], "index.html"),
         without="runs"),  # a compile not yet grouped into a run (an ingest killed between its merge and grouping)
    Page("chromium", "/-/tlindex/run/{run}/chromium.json", run.chromium_data, None, _chromium_file, kind="json",
         args=(Arg("rank", many=True), Arg("overview", "flag"))),
    Page("trie", "/-/tlindex/trie/{run}", trie.trie_data, "trie.html", _trie_file, args=(Arg("rank"),)),
    Page("trie_node", "/-/tlindex/trie/{run}/node/{node}", trie.trie_node_data, None, None,
         "the report renders each trie whole", kind="fragment", args=(Arg("rank"),)),
    Page("compile", "/-/tlindex/compile/{compile}", compile.compile_data, "compile.html",
         lambda f, v, a: f.of_compile(v["compile"], f"compiles/{v['compile']}.html")),
    Page("bytecode", "/-/tlindex/compile/{compile}/bytecode", bytecode.bytecode_data, "bytecode.html",
         lambda f, v, a: f.of_compile(v["compile"], f"compiles/{v['compile']}-bytecode.html"), within="compile"),
    Page("passes", "/-/tlindex/compile/{compile}/passes", passes.passes_data, "passes.html",
         lambda f, v, a: f.of_compile(v["compile"], f"compiles/{v['compile']}-passes.html"), within="compile"),
    Page("piece_passes", "/-/tlindex/piece/{piece}/passes", passes.piece_passes_data, "passes.html",
         lambda f, v, a: f.of_piece(v["piece"], "compiles/{compile}-piece-{piece}-passes.html"), within="compile"),
    Page("vllm", "/-/tlindex/run/{run}/vllm", vllm.vllm_data, "vllm.html",
         lambda f, v, a: f.of_run(v["run"], "vllm.html")),
    Page("provenance", "/-/tlindex/provenance/{artifact}", provenance.provenance_page_data, "provenance.html",
         lambda f, v, a: f.of_artifact(v["artifact"], f"provenance/{v['artifact']}.html"),
         samples=(("artifact", PROVENANCE_MAPPINGS),)),
    Page("artifact", "/-/tlindex/artifact/{artifact}", artifact.artifact_data, "artifact.html", _artifact_file),
    Page("payload", "/-/tlindex/payload/{hash}{ext}", artifact.payload_data, "payload.html",
         lambda f, v, a: f.top(f"payloads/{v['hash']}{v.get('ext') or '.html'}")),
)



def _query_file(files: Files, values: dict, args: Args) -> str | None:
    """A canned query of one run (`?run=N&…`) as a table of the report; the failures list as tlparse names it."""
    params = dict(args.pairs)
    run = params.pop("run", None)
    if values["query"] == "failures" and not params:
        return files.of_query("failures", run, "failures_and_restarts" + PAGE_SUFFIX)
    extra = "".join(f"--{key}-{re.sub(r'[^A-Za-z0-9_.]', '_', value)}" for key, value in sorted(params.items()))
    return files.of_query(values["query"], run, f"queries/{values['query']}{extra}{PAGE_SUFFIX}")


# A canned query's page: Datasette serves it (so it is no route of the plugin's); the report writes the table of one
# run's (tlindex.report.pages), named here.
QUERY = Page("query", "/{query}", lambda conn, args, query: {}, "report_query.html", _query_file, kind="query")


class _Table:
    """PAGES by name, and its paths' matchers, made again whenever PAGES is another table (a test adds a page by
    giving PAGES one more declaration: everything else follows)."""

    def __init__(self):
        self.pages: tuple[Page, ...] = ()
        self.by_name: dict[str, Page] = {}
        self.matchers: list[tuple[Page, re.Pattern]] = []

    def current(self) -> _Table:
        if self.pages is not PAGES:
            self.by_name = {page.name: page for page in PAGES}
            self.matchers = [(page, re.compile(page.pattern + "$")) for page in PAGES]
            self.pages = PAGES
        return self


class _ByName(Mapping):
    """The pages by name (of PAGES as it is now)."""

    def __getitem__(self, name: str) -> Page:
        return _TABLE.current().by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_TABLE.current().by_name)

    def __len__(self) -> int:
        return len(_TABLE.current().by_name)


_TABLE = _Table()
BY_NAME: Mapping[str, Page] = _ByName()


def path(name: str, json: bool = False, **values) -> str:
    """The path of a page under its database's URL, e.g. path("compile", compile=12); its JSON twin with json."""
    page = BY_NAME[name]
    if json and not page.json_twin:
        raise ValueError(f"the {name} page has no JSON twin")
    return page.written(values) + (".json" if json else "")


def link(name: str, *given, **named) -> str:
    """A link to a page under its database's URL, its path's values and then its query arguments given in order
    (`link("trie_node", 3, 12, rank=0)`); a page whose path value is None links the page it names instead (`run`:
    the runs page)."""
    page = BY_NAME[name]
    values = dict(zip(page.parameters, given))
    if named:
        values.update(named)
    if page.without is not None and any(values.get(p) is None for p in page.placeholders):
        return path(page.without)
    return page.written(values) + page.query(values)


def match(rest: str) -> tuple[Page, dict[str, str]] | None:
    """The page of a path under a database's URL, with its values as text; None when it is no tlindex page."""
    for page, regex in _TABLE.current().matchers:
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


def tilde_encode(text: str) -> str:
    """`text` as Datasette writes a database, table or query name in a URL (`a.b` is `a~2Eb`, a space `+`), without
    importing Datasette (datasette.utils.tilde_encode, the same on 0.65 and 1.0a; a test holds them equal)."""
    return "".join(chr(b) if b in _SAFE else "+" if b == 0x20 else f"~{b:02X}" for b in text.encode("utf-8"))


def database_path(name: str) -> str:
    """A database's URL path as Datasette makes it, its name tilde-encoded (`a.b` is `/a~2Eb`)."""
    return "/" + tilde_encode(name)


def read_named(conn: sqlite3.Connection, name: str, names: list[str], args: Args | None = None) -> dict:
    """A page's data with its path's values named as users name them (`tlindex show compile 0/1`): runs by
    id, label, directory or label prefix, compiles as torch prints them (`RUN:0/1@RANK`), other ids as numbers."""
    from tlindex.errors import UsageError

    page = BY_NAME.get(name)
    if page is None or not page.json_twin:
        shown = ", ".join(p.name for p in PAGES if p.json_twin)
        raise UsageError(f"no page named {name!r} has data to show: one of {shown}")
    wanted = [p for p in page.placeholders if PLACEHOLDERS[p].shown]
    if len(names) != len(wanted):
        raise UsageError(f"the {name} page takes {len(wanted)} name{'s' * (len(wanted) != 1)} "
                         f"({' '.join(w.upper() for w in wanted) or 'none'}), not {len(names)}")
    values, run = {}, None
    for placeholder, given in zip(wanted, names):
        kind = PLACEHOLDERS[placeholder]
        values[placeholder] = kind.resolve(conn, placeholder, given, run)
        if kind.run:
            run = values[placeholder]
    return page.read(conn, args or Args(), **values)
