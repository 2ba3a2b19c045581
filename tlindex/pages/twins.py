"""What each page's JSON twin holds (`<page>.json`, `tlindex show PAGE --json`): its top-level keys, in words.

Declared beside the pages (tlindex.pages.PAGES), one entry per page with a twin (a page may declare its keys
itself: `Page(..., keys=...)`); docs/json.md is written from them (`python -m tlindex.pages.twins > docs/json.md`)
and tests/test_json_twins.py holds every entry to the keys the page's data really has, so the document cannot
fall behind a page.
"""

from __future__ import annotations

TWINS: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": (("runs", "the runs listed, oldest first: id, label, times, ranks, compiles, failures, worst finding"),
             ("only", "the run ids named by ?run=, or null for a screen of runs"),
             ("paging", "where the screen is (null with ?run=): its ids, number of pages (page 1: the newest), runs "
                        "matching and in all, the first shown counted from the oldest, the filter as arguments"),
             ("filter", "the filter asked for: label prefix, since, until, failing")),
    "search": (("query", "the term searched"), ("run", "the run searched, or null"),
               ("groups", "hits grouped by run and compile: where the term stands, with a snippet and a link"),
               ("count", "hits found"), ("shown", "hits listed"),
               ("problem", "why the term could not be searched, or null"),
               ("indexed", "whether payload text is indexed"), ("notes", "what the search could not finish"),
               ("more", "places that match beyond those read, at least")),
    "diff": (("diff", "the torch each run ran and what changed (torch), the two runs (a, b), their config changes "
                      "with why each key differs, the summary counts and every compile paired, its changes and their "
                      "detail"),),
    "diff_compiles": (("entry", "two compiles compared: their key, each side, the changes and their detail"),),
    "trend": (("rows", "run_health's rows of the runs, oldest first, each with torch_changed_from: the torch version of "
                       "the run before it when its own is another"), ("series", "each number as a chart's points"),
              ("label", "the label prefix asked for, or null"), ("named", "the runs named, or null"),
              ("last", "how many of the newest runs are shown (100 by default, 500 at most), or null for the runs "
                       "named"),
              ("offset", "how many of the newest runs this page skips (0: the newest)"),
              ("matching", "runs the label and names keep, shown or not"),
              ("pages", "the query strings of the older and newer pages (null where there is none), or null")),
    "graph_breaks": (("run", "the runs asked for, or null"), ("label", "their label prefix, or null"),
                     ("groups", "the graph-break groups (top_graph_breaks' rows), costliest first"),
                     ("count", "groups in all")),
    "tree": (("query", "the filter"), ("words", "its words, as matched"), ("only", "the runs named, or null"),
             ("runs", "each run with its compiles and their artifacts, as listed"),
             ("kept", "runs, compiles and artifacts the filter keeps"), ("listed", "compiles and artifacts listed"),
             ("runs_hidden", "runs kept but not listed"), ("open", "whether the tree opens folded"),
             ("complete", "whether everything kept is listed"), ("picked", "the artifact picked to diff, or null"),
             ("ungrouped", "compiles not yet grouped into a run"),
             ("older", "runs older than those read (without ?run=, the newest 50 are)")),
    "artifact_diff": (("artifact_a", "artifact A"), ("artifact_b", "artifact B"),
                      ("mask", "whether process-wide counters are masked"),
                      ("same_payload", "whether both have the same payload"), ("lang", "the language highlighted"),
                      ("hunks", "the diff's hunks"), ("changed", "lines changed"),
                      ("no_payload", "a side that has no payload, or null")),
    "glossary": (("sections", "the glossary's sections, each with its terms and what they mean"),),
    "run": (("run", "the run: its row, sources, ranks, compile totals (run_totals), restarts, findings, "
                    "the timelines it offers (whole, overview, ranks), compiles; its groups of ranks that compiled "
                    "the same (groups), what was compiling at its last record (compiling), and refresh_s: the seconds "
                    "between two refreshes while its logs are being ingested (else null)"),
            ("queries", "the canned queries that take a run")),
    "trie": (("run", "the run"), ("rank", "the rank shown, or null"), ("ranks", "the run's ranks"),
             ("groups", "a run of more than 8 processes: its rank groups (like: the first rank, count), linked "
                        "instead of every rank"), ("rank_apart", "whether the rank shown is no group's first"),
             ("trie", "the stack trie's top nodes"), ("nodes", "nodes in all"),
             ("unknown", "compiles whose stack is unknown"), ("anonymous", "[-/-] records listed"),
             ("more_anonymous", "[-/-] records not listed"), ("with_bytecode", "compiles with a bytecode listing")),
    "trie_node": (("run", "the run"), ("rank", "the rank, or null"), ("node", "the node with its children"),
                  ("with_bytecode", "compiles with a bytecode listing")),
    "compile": (("compile", "the compile: its row, process, metrics, guards, spans, artifacts, graph breaks, "
                            "failed guards, symbols, configs and siblings; alike: the same compile on each process "
                            "of its rank group (said, count, first, spread of compile times, rows), or null"),),
    "bytecode": (("view", "the resume function's bytecode, original and modified, with the source it came from"),
                 ("compile", "the compile"), ("read_files", "whether source files may be read")),
    "passes": (("compile", "the compile"), ("piece", "the vLLM piece, or null"), ("pieces", "the compile's pieces"),
               ("ways", "each way through the passes: its graph snapshots in order")),
    "piece_passes": (("compile", "the compile"), ("piece", "the vLLM piece"), ("pieces", "the compile's pieces"),
                     ("ways", "the piece's way through the passes")),
    "vllm": (("run_id", "the run"), ("calls", "vLLM's compile calls: config, split graph, pieces"),
             ("shared", "the settings every call's config shares"), ("slowest", "the slowest compile range"),
             ("lone_misses", "pieces that missed the cache where the rest of their range hit"),
             ("pass_compiles", "compiles that logged vLLM's pass dumps only")),
    "provenance": (("mapping", "the node mappings artifact, its compile and run"),
                   ("valid", "whether its payload is the JSON object Inductor writes"),
                   ("panes", "pre-grad graph, post-grad graph and generated code: each artifact and its lines"),
                   ("links", "line to lines, pane to pane")),
    "artifact": (("artifact", "the artifact: kind, name, size, compile, run"), ("text", "its payload text"),
                 ("lang", "the language highlighted"), ("stack_traces", "kernel stack traces, when logged"),
                 ("cut", "what the page leaves out of a long payload (its raw download has it whole), or null")),
    "payload": (("payload", "the payload: hash, size, text"), ("raw", "whether the text alone is asked for"),
                ("lang", "the language highlighted"),
                ("cut", "what the page leaves out of a long payload (its raw text has it whole), or null")),
}


def twins() -> dict[str, tuple[tuple[str, str], ...]]:
    """Each page's twin's keys: TWINS, and those a page declares itself."""
    from tlindex.pages import PAGES

    return {**TWINS, **{page.name: page.keys for page in PAGES if page.keys}}


def render() -> str:
    """docs/json.md: each page's twin, its URL and its keys."""
    from tlindex.pages import BY_NAME

    lines = ["# JSON twins", "",
             "Every page answers `<its URL>.json` with the data it shows, and `tlindex show PAGE NAME… --json` prints",
             "the same. Keys are words (`compile`, `artifact`). Written by `python -m tlindex.pages.twins >",
             "docs/json.md` from tlindex/pages/twins.py; a test keeps both in step with the pages.", ""]
    for name, keys in twins().items():
        lines += [f"## {name}", "", f"`{BY_NAME[name].path}.json`", ""]
        lines += [f"- `{key}`: {what}" for key, what in keys] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
