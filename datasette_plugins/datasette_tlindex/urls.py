"""The URLs of the tlindex pages of one database, built as Datasette builds its own (`datasette.urls`, or the
report's stand-in for it): what the pages link with, served or in a report. It imports nothing of Datasette."""

from __future__ import annotations

from urllib.parse import urlencode

from tlindex.pages import BY_NAME
from tlindex.pages import path as page_path


class Urls:
    """The URLs of the tlindex pages of one database (and of its Datasette pages).

    `urls.compile(12)`, `urls.artifact(3)`, `urls.vllm(run)`: every page of tlindex.pages by its name, its
    path's values given in the order the path names them; the few below take more than their path."""

    def __init__(self, datasette, database: str):
        self.datasette = datasette
        self.database = database
        self.base = datasette.urls.database(database)  # encoded as Datasette encodes it

    def page(self, name: str, **values) -> str:
        return self.base + page_path(name, **values)

    def __getattr__(self, name: str):
        page = BY_NAME.get(name)
        if page is None:
            raise AttributeError(name)
        return lambda *given, **values: self.page(name, **dict(zip(page.placeholders, given)), **values)

    def run(self, run_id: int | None) -> str:
        """The run page; the runs page for a compile not yet grouped into a run (an ingest between its
        merge and its run grouping, or killed there: the next ingest groups it)."""
        return self.page("run", run=run_id) if run_id is not None else self.page("runs")

    def trie(self, run_id: int, rank: int | None = None) -> str:
        return self.page("trie", run=run_id) + (f"?rank={int(rank)}" if rank is not None else "")

    def trie_node(self, run_id: int, rank: int | None, node: int) -> str:
        return self.page("trie_node", run=run_id, node=node) + (f"?rank={int(rank)}" if rank is not None else "")

    def payload(self, digest: str, raw: bool = False) -> str:
        return self.page("payload", hash=digest, ext=".txt" if raw else "")

    def diff(self, run_a: int | None = None, run_b: int | None = None) -> str:
        """The diff of two runs; without them, the form's target."""
        if run_a is None or run_b is None:
            return self.page("diff_pick")
        return self.page("diff", a=run_a, b=run_b)

    def trend(self, runs: list[int] | None = None, label: str | None = None) -> str:
        """The trend page, of the runs named (every run when none) or of a label prefix."""
        return self._with_list(self.page("trend"), "run", runs or [], {"label": label})

    def graph_breaks(self, runs: list[int] | int | None = None) -> str:
        """The graph breaks that cost most, of one run, of some, or of every run."""
        return self._with_list(self.page("graph_breaks"), "run", [runs] if isinstance(runs, int) else runs or [], {})

    def tree(self, runs: list[int] | int | None = None, q: str | None = None, a: int | None = None) -> str:
        """The tree of runs, compiles and artifacts: of one run, of some or of every run; filtered by `q`; with
        artifact `a` picked first (every other then offers a diff with it)."""
        runs = [runs] if isinstance(runs, int) else runs or []
        return self._with_list(self.page("tree"), "run", runs, {"q": q or None, "a": a})

    def artifact_diff(self, a: int, b: int, mask: bool = False) -> str:
        """Two artifacts side by side (`mask`: counter-derived names masked)."""
        return self._with(self.page("artifact_diff"), {"a": int(a), "b": int(b), "mask": 1 if mask else None})

    def search(self, term: str | None = None, run: int | None = None) -> str:
        return self._with(self.page("search"), {"q": term or None, "run": run})

    def query(self, name: str, **params) -> str:
        return self._with(self.datasette.urls.query(self.database, name), params)

    def table(self, table: str, **params) -> str:
        return self._with(self.datasette.urls.table(self.database, table), params)

    @classmethod
    def _with_list(cls, url: str, name: str, values: list, params: dict) -> str:
        args = urlencode([(name, value) for value in values] + [(k, v) for k, v in params.items() if v is not None])
        return url + (f"?{args}" if args else "")

    @staticmethod
    def _with(url: str, params: dict) -> str:
        args = urlencode({k: v for k, v in params.items() if v is not None})
        return url + (f"?{args}" if args else "")
