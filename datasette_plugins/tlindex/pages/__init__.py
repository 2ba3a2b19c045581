"""The tlindex pages, one module each (as Datasette's own views/), and their routes."""

from __future__ import annotations

from . import artifact, bytecode, compile, diff, provenance, run, runs, search, trie

_DB = r"(?P<database>[^/]+)"
_ID = r"(?P<{}>-?\d+)"  # ids: anything else is not a route (404)

ROUTES = [
    (rf"^/{_DB}/-/tlindex$", runs.runs_page),
    (rf"^/{_DB}/-/tlindex/search$", search.search_page),
    (rf"^/{_DB}/-/tlindex/diff$", diff.diff_pick),
    (rf"^/{_DB}/-/tlindex/diff/{_ID.format('a')}/{_ID.format('b')}$", diff.diff_page),
    (rf"^/{_DB}/-/tlindex/diff/compiles/{_ID.format('ca')}/{_ID.format('cb')}$", diff.pair_page),
    (rf"^/{_DB}/-/tlindex/run/{_ID.format('run')}$", run.run_page),
    (rf"^/{_DB}/-/tlindex/run/{_ID.format('run')}/chromium\.json$", run.chromium_trace),
    (rf"^/{_DB}/-/tlindex/trie/{_ID.format('run')}$", trie.trie_page),
    (rf"^/{_DB}/-/tlindex/trie/{_ID.format('run')}/node/{_ID.format('node')}$", trie.trie_fragment),
    (rf"^/{_DB}/-/tlindex/compile/{_ID.format('compile')}$", compile.compile_page),
    (rf"^/{_DB}/-/tlindex/compile/{_ID.format('compile')}/bytecode$", bytecode.bytecode_page),
    (rf"^/{_DB}/-/tlindex/provenance/{_ID.format('artifact')}$", provenance.provenance_page),
    (rf"^/{_DB}/-/tlindex/artifact/{_ID.format('artifact')}$", artifact.artifact_page),
    (rf"^/{_DB}/-/tlindex/payload/(?P<hash>[0-9a-f]{{32}})(?P<ext>\.txt)?$", artifact.payload_page),
]
