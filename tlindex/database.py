"""`tlindex.Database`: the library, as sqlite-utils' `Database` is: one object per database file, opened once (checked,
migrated, its views and limits set), passed down, closed on the way out. Every command of the command line opens one,
calls one of its methods and prints what it returns; a Python user gets the same object:

    from tlindex import Database

    with Database("traces.db", create=True) as db:
        summary = db.ingest(["logs/"])          # the ingest's summary: files, envelopes, compiles, runs made
        for run in db.runs():                   # the last 50 runs, oldest first, as `tlindex runs` lists them
            print(run["id"], run["label"], run["worst_finding"])
        db.findings("nightly")                  # what is wrong with a run (stored when the ingest made it)
        db.query("recompile_reasons", run="nightly")   # a canned query (or any SQL): rows as dicts

A Database reads only unless opened with `write=True` (or `create=True`, which makes a missing file): a reader can
never write, so what it reads is what the writer stored.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tlindex.errors import DatabaseError

if TYPE_CHECKING:
    from tlindex.answers.findings.registry import Finding
    from tlindex.answers.search import Hit
    from tlindex.answers.trend import Trend
    from tlindex.ingest.pipeline import IngestSummary
    from tlindex.owned import TemporaryFolder
    from tlindex.report import Outcome

DEFAULT_PATH = "traces.db"


def migration_steps() -> dict[str, Callable[[sqlite3.Connection], str | None]]:
    """What each migration that derives rows beyond SQL runs (tlindex.store.db.STEPS), imported when one runs: every
    open passes them all, whatever the command imported."""

    def derived_by_normalizers(conn: sqlite3.Connection) -> str | None:
        from tlindex.ingest.rederive import derive

        return derive(conn)

    def derived_at_write(conn: sqlite3.Connection) -> str | None:
        from tlindex.answers.derived import derive_every_run

        return derive_every_run(conn)

    return {"derived_by_normalizers": derived_by_normalizers, "derived_at_write": derived_at_write}


class Database:
    """A tlindex database and its one connection (`conn`): read only unless `write` (or `create`)."""

    def __init__(self, path: str | Path = DEFAULT_PATH, *, write: bool = False, create: bool = False) -> None:
        from tlindex.store.db import open_database

        self.path = Path(path)
        self.read_only = not (write or create)
        self.temporary_folder: TemporaryFolder | None = None  # a temporary database's (`temporary`): removed on close
        self.conn = open_database(self.path, migration_steps(), create=create, write=not self.read_only)

    @classmethod
    def temporary(cls) -> Database:
        """A new database in a scratch folder of its own (a report's), removed with the folder when it is closed."""
        from tlindex.owned import TemporaryFolder

        folder = TemporaryFolder("tlindex-report-", kind="scratch")
        try:
            db = cls(folder.path / "traces.db", create=True)
        except BaseException:
            folder.remove()
            raise
        db.temporary_folder = folder
        return db

    # --- the connection ------------------------------------------------------------------------------

    def execute(self, sql: str, parameters: Sequence | dict = ()) -> sqlite3.Cursor:
        """`conn.execute`, as sqlite-utils' Database.execute."""
        return self.conn.execute(sql, parameters)

    def interrupt(self) -> None:
        """Stop the statement running on the connection, from another thread (SQLite's own interrupt; a signal to
        a command interrupts its statements itself: tlindex.stopping)."""
        self.conn.interrupt()

    def close(self) -> None:
        """Close the connection (once; closing again does nothing), and a temporary database's folder."""
        self.conn.close()
        if self.temporary_folder is not None:
            self.temporary_folder.remove()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Database {str(self.path)!r}{' read-only' if self.read_only else ''}>"

    def _writing(self, what: str) -> None:
        if self.read_only:
            raise DatabaseError(f"{self.path}: opened read-only; {what} needs Database(path, write=True)")

    # --- writing -------------------------------------------------------------------------------------

    def ingest(self, paths: Sequence[str | Path], label: str | None = None, *, jobs: int | None = None,
               replace: bool = False, unique_label: bool = False, label_source: str = "given",
               progress: Callable[[int, int], None] | None = None,
               chunk_bytes: int | None = None, search_index: bool = True) -> IngestSummary:
        """Ingest log files, TORCH_TRACE folders, globs and .gz files; the summary (files, envelopes, compiles, the
        runs made or grown). `label`: every file into the run of that label (`unique_label`: a new run, its label
        made unique in the transaction that makes it, as `tlindex run` asks; `label_source`: who chose it, `given` or
        `command`). Each run made is whole when it is
        visible: its processes named, its findings, answers and search text stored in the same transaction."""
        from tlindex.answers.derived import derive_runs
        from tlindex.ingest.pipeline import ingest

        self._writing("an ingest")
        return ingest(self.conn, self.path, [str(path) for path in paths], run_label=label, unique_label=unique_label,
                      label_source=label_source,
                      replace=replace, jobs=jobs, progress=progress, chunk_bytes=chunk_bytes,
                      search_index=search_index, derive=derive_runs)

    def remove_runs(self, names: Sequence[str]) -> dict[str, Any]:
        """Delete runs (named as everywhere) and every row only theirs, in one transaction: {"removed": {id: label},
        "runs", "sources", "files"}. A name that matches several runs deletes nothing, nor does a run that an ingest
        still running is writing (RunBusy names that ingest)."""
        from tlindex.ingest.pipeline import live_ingests
        from tlindex.ingest.runs import remove_runs

        self._writing("removing runs")
        named = {run["id"]: run["label"] for run in (self.run(name) for name in names)}
        return {"removed": dict(sorted(named.items())),
                **remove_runs(self.conn, list(named), lambda: live_ingests(self.path))}

    def rename_run(self, run: str, label: str | None, kept: bool | None = None) -> dict[str, Any]:
        """Give a run a new label (labels are unique; None keeps its label) and, unless `kept` is None, mark it kept
        or not (a run to stay, such as a baseline): {"id", "old", "new", "kept"}."""
        from tlindex.ingest.runs import rename_run

        self._writing("renaming a run")
        found = self.run(run)
        new, marked = rename_run(self.conn, found["id"], label, kept)
        return {"id": found["id"], "old": found["label"], "new": new, "kept": marked}

    def record_facts(self, run_id: int, facts: dict) -> None:
        """Keep on a run's row what `tlindex run` knew of the command that wrote it (tlindex.run.Ran.facts)."""
        from tlindex.ingest.runs import record_facts

        self._writing("recording a run's facts")
        record_facts(self.conn, run_id, facts)

    # --- reading -------------------------------------------------------------------------------------

    def run(self, name: str | int) -> dict[str, Any]:
        """A run named as everywhere (id, label, log folder, unique label prefix): its row (UnknownRun otherwise)."""
        from tlindex.answers.names import resolve_run

        return resolve_run(self.conn, str(name))

    def run_labels(self, ids: Sequence[int]) -> dict[int, str]:
        """The labels of the runs `ids`, by id."""
        from tlindex.answers.names import run_labels

        return run_labels(self.conn, list(ids))

    def run_ids(self, last: int | None = 50, since: str | None = None, label: str | None = None) -> tuple[list[int], int]:
        """The ids of the last `last` runs (every run when None) started on `since` or later, labelled `label…`,
        oldest first; and how many match in all."""
        from tlindex.answers.runs import RunFilter, day, last_runs

        return last_runs(self.conn, RunFilter(label=label, since=day("--since", since)), last)

    def runs(self, ids: Sequence[int] | None = None, **chosen: Any) -> list[dict[str, Any]]:
        """The runs `ids` (else `run_ids(**chosen)`), oldest first, as `tlindex runs` lists them: id, label, start,
        ranks, compiles, failures, worst finding, and what `tlindex run` kept of the command."""
        from tlindex.answers.runs import runs_listing

        return runs_listing(self.conn, list(ids) if ids is not None else self.run_ids(**chosen)[0])

    def runs_of(self, paths: Sequence[str | Path]) -> list[int]:
        """The runs holding the logs `paths` name (as ingest discovers them)."""
        from tlindex.answers.runs import runs_of_paths

        return runs_of_paths(self.conn, [str(path) for path in paths])

    def findings(self, run: str | int) -> list[Finding]:
        """What is wrong with a run, most severe first, as stored when the run was written."""
        run_id = self.run(run)["id"]
        return self.findings_of([run_id])[run_id]

    def findings_of(self, ids: Sequence[int] | None = None) -> dict[int, list[Finding]]:
        """The findings of each run `ids` (else of the last 50), by id."""
        from tlindex.answers.derived import stored_findings

        return stored_findings(self.conn, list(ids) if ids is not None else self.run_ids()[0])

    def query(self, name_or_sql: str, **params: Any) -> list[dict[str, Any]]:
        """A canned query by name (`tlindex queries`) or any SQL, with named parameters (a run or compile by any
        name): its rows as dicts."""
        try:
            cursor = self.cursor(name_or_sql, {key: str(value) for key, value in params.items()})
            names = [d[0] for d in cursor.description or []]
            return [dict(zip(names, row)) for row in cursor]
        finally:
            self.conn.set_authorizer(None)

    def cursor(self, name_or_sql: str, params: dict[str, str]) -> sqlite3.Cursor:
        """`query`'s statement run read-only (no writes, no ATTACH, SQLite's own functions), as a cursor: the
        connection stays read-only until `conn.set_authorizer(None)`."""
        from tlindex.answers.queries import prepared, read_only, run_sql

        sql, values = prepared(self.conn, name_or_sql, params)
        read_only(self.conn)
        return run_sql(self.conn, sql, values)

    def diff(self, run_a: str, run_b: str, graphs: bool = False) -> dict[str, Any]:
        """What changed between two runs: compiles matched, changes ranked (`tlindex diff --json`)."""
        from tlindex.answers.diff import diff

        return diff(self.conn, str(self.run(run_a)["id"]), str(self.run(run_b)["id"]), graphs=graphs)

    def trend(self, runs: Sequence[str] = (), label: str | None = None, baseline: str | None = None,
              fail_on: list | None = None, judged: str | None = None, allow_unjudged: bool = False,
              last: int | None = 100) -> Trend:
        """Compile health run after run, oldest first; with `fail_on` the gate's verdict (`tlindex trend`)."""
        from tlindex.answers.trend import trend

        return trend(self.conn, runs, label, baseline, fail_on, judged, allow_unjudged, last=last)

    def search(self, term: str, run: str | None = None, limit: int = 200) -> tuple[list[Hit], int]:
        """Where `term` occurs, best first (at most `limit`), and how many other places match (at least)."""
        from tlindex.answers.search import search

        more: list[int] = []
        found = search(self.conn, term, self.run(run)["id"] if run is not None else None, limit, more=more)
        return found[:limit], len(found) - min(len(found), limit) + more[0]

    def report(self, out: str | Path, runs: Sequence[str] = (), *, paths: Sequence[str] = (), last: int | None = 50,
               overwrite: bool = False, jobs: int | None = None, run_facts: bool = False, scrub: bool = False,
               ingest_progress: Callable[[int, int], None] | None = None,
               progress: Callable[[int], None] | None = None, say: Callable[[str], None] | None = None) -> Outcome:
        """Write a folder of static pages to `out` (`tlindex report`): of the runs named (else the last `last`), or
        of the logs `paths`, ingested first. What `tlindex run` kept of where and by whom a run was made is left out
        unless `run_facts`; with `scrub`, tokens of known shapes are masked in the logs' own text too."""
        from tlindex.report import report

        paths = [str(p) for p in paths]
        return report(self.conn, self.path, Path(out), paths, list(runs), overwrite, jobs, progress, last, say,
                      run_facts, ingest=lambda: self.ingest(paths, jobs=jobs, progress=ingest_progress,
                                                            search_index=self.temporary_folder is None),
                      runs_of=lambda: self.runs_of(paths), scrub=scrub)

    def export_parquet(self, out: str | Path, tables: Sequence[str] | None = None, replace: bool = False) -> dict:
        """Every table (or `tables`) as a Parquet dataset in `out`/<table>/; the manifest."""
        from tlindex.formats.parquet import export_parquet

        return export_parquet(self.path, out, list(tables) if tables else None, replace)

    def chromium_trace(self, run: str, ranks: list[int] | None = None, overview: bool = False) -> Iterator[bytes]:
        """A run's chromium events as one trace for Perfetto, in chunks: every process's, or `ranks`' only, or
        (`overview`) each process's outermost spans."""
        from tlindex.formats.chromium import trace_chunks

        return trace_chunks(self.conn, self.run(run)["id"], ranks, overview)
