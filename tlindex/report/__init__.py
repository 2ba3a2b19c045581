"""`tlindex report`: which runs, which database, which folder; the pages' HTML comes from tlindex.render.

The package, by job: build.py (what to write, tasks and workers, the crawl), pages.py (a URL rendered
to its file, links made relative), files.py (where each file goes), output.py (files written whole,
counted; what failed said), tlparse.py (each log's tlparse files), workers.py (the worker processes).

The report is written into a fresh folder beside DIR and moved into place when complete, so an
interrupted report leaves no half-written DIR. An existing DIR is replaced only with
`overwrite`, and only when tlindex wrote it (its marker, tlindex.owned): `-o ~ --overwrite` must not
delete a home directory, nor `-o tlparse_output --overwrite` what tlparse wrote.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tlindex import owned
from tlindex.answers.names import resolve_run
from tlindex.errors import ReportError  # noqa: F401 (raised here, imported from here by callers)
from tlindex.ingest.discover import discover
from tlindex.report.build import SUMMARY, Report
from tlindex.report.files import INDEX
from tlindex.report.output import ReportSummary
from tlindex.store.db import connect_read_only

if TYPE_CHECKING:
    from tlindex.ingest.beside import Beside
    from tlindex.ingest.pipeline import IngestSummary


def check_out_dir(out: Path, overwrite: bool) -> None:
    """Refuse a non-empty DIR unless overwrite is given and DIR holds a report; refuse a link."""
    if out.is_symlink():
        raise ReportError(f"{out}: a symbolic link (to {os.readlink(out)}); give -o the folder itself")
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out}: exists and is not a directory")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise ReportError(f"{out}: not empty (give --overwrite to replace it)")
    if not owned.owns(out, "report"):
        raise ReportError(f"{out}: refusing to replace a folder tlindex did not write as a report (no {owned.MARKER} "
                          f"marker of one in it: tlparse's output, and reports of older tlindex, are not replaced "
                          f"either); remove it yourself, or choose another folder")


def runs_of_paths(conn: sqlite3.Connection, paths: list[str]) -> list[int]:
    """The runs holding the logs PATHs name (as discovered by ingest)."""
    files, _ = discover(paths)
    wanted = {str(path.resolve()) for path in files}
    return sorted({run for (path, run) in conn.execute(
        "SELECT f.path, s.run_id FROM files f JOIN sources s ON s.file_id = f.id") if path in wanted})


def runs_by_name(conn: sqlite3.Connection, names: list[str], last: int | None = None) -> list[int]:
    """Runs by id or label prefix; when none are named, the last `last` runs (every run when None)."""
    if not names:
        return sorted(row[0] for row in conn.execute("SELECT id FROM runs ORDER BY start_time DESC, id DESC LIMIT ?",
                                                     (-1 if last is None else last,)))
    return sorted({resolve_run(conn, name)["id"] for name in names})


def size_of_report(conn: sqlite3.Connection, runs: list[int]) -> str:
    """What a report of the runs will hold, said before it is written: runs, compiles and artifacts (a page each)."""
    total = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    marks = ",".join("?" * len(runs))
    compiles, artifacts = conn.execute(
        f"SELECT count(DISTINCT c.id), count(a.id) FROM compiles c LEFT JOIN artifacts a ON a.compile = c.id "
        f"WHERE c.run_id IN ({marks})", runs).fetchone()
    left = f" (of {total:,}: --last N, --run RUN or --all)" if len(runs) < total else ""
    return (f"report of {len(runs):,} run{'s' * (len(runs) != 1)}{left}: {compiles:,} compiles and {artifacts:,} "
            f"artifacts, a page each or more")


EMPTY_INDEX = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>tlindex report: no trace records</title></head>
<body><h1>No trace records</h1><p>{why}</p><p>A TORCH_TRACE log holds records only once torch.compile (or
torch.export, or another traced part of torch) ran with <code>TORCH_TRACE</code> set.</p></body></html>
"""


def write_empty_report(out: Path, overwrite: bool, why: str) -> None:
    """The report of logs without any trace record (tlparse writes one too): an index that says so."""
    import html
    import json

    out = absolute(out)
    check_out_dir(out, overwrite)
    partial = owned.new_partial(out, "report")
    try:
        (partial / INDEX).write_text(EMPTY_INDEX.format(why=html.escape(why)), encoding="utf-8")
        (partial / SUMMARY).write_text(json.dumps({"runs": [], "pages": 1, "database": None, "degraded": []}) + "\n")
        swap(partial, out)
    finally:
        owned.discard(partial)  # still there only when it was not swapped in


def write_report(db_path: Path, out: Path, runs: list[int], overwrite: bool, progress=None, jobs: int | None = None,
                 run_facts: bool = False, conn: sqlite3.Connection | None = None):
    """Write the report of `runs` to `out` (checked with check_out_dir first), with `jobs` processes; its summary.
    Where and by whom the runs were made (`tlindex run`'s command line, user, host, directory) is left out unless
    `run_facts` (a report is made to be shared). `conn`: the database's connection, read-only, that the caller
    opened (its `runs` is then the report's, without those facts); else one is opened here."""
    renderer_class = renderer()
    if not runs:
        raise ReportError(f"{db_path}: no run to report")
    if conn is None:
        with closing(connect_read_only(db_path)) as conn:
            return write_report(db_path, out, runs, overwrite, progress, jobs, run_facts, conn)
    out = absolute(out)
    check_out_dir(out, overwrite)
    partial = owned.new_partial(out, "report")
    try:
        summary = Report(conn, db_path, partial, runs, renderer_class, progress, run_facts).write(jobs or os.cpu_count()
                                                                                                   or 1)
        swap(partial, out)
    finally:
        owned.discard(partial)  # still there only when it was not swapped in
    return summary


def renderer():
    """The pages' renderer (tlindex.render: the server's pages are rendered by the same), imported when a report is
    written."""
    from tlindex.render.report import ReportRenderer

    return ReportRenderer


WORKERS_LIKELY_FROM = 1 << 20  # bytes of logs from which a report likely has pages for workers (build.PARALLEL_FROM:
# the 3.6 MB vLLM log of tests/data has 184; tlparse's 0.75 MB cache_hit_miss.log 52): their pool is imported ahead


def prepare(still_time: Callable[[], bool], size: int) -> None:
    """What a report needs before its database exists, done now (while its logs, `size` bytes, are ingested
    elsewhere): the renderer imported; while `still_time()`, its templates loaded and, for logs of
    WORKERS_LIKELY_FROM bytes or more, the workers' pool imported, which the workers forked later then have (a small
    report imports none: whether it would hung on how fast the ingest went)."""
    renderer()
    if still_time():
        from tlindex.render.site import load_templates

        load_templates()
    if size >= WORKERS_LIKELY_FROM and still_time():
        import tlindex.worker_pool  # noqa: F401


def absolute(out: Path) -> Path:
    """DIR as an absolute path, `.` and `..` resolved as the shell would (`-o .` inside the old report,
    `-o r2/sub/..`), so that its parent, where the new report is written first, is never inside it."""
    return Path(os.path.abspath(out))


def swap(partial: Path, out: Path) -> None:
    """The complete report becomes DIR (an old report of tlindex's is replaced; anything else, refused)."""
    try:
        owned.swap_into_place(partial, out, "report")
    except owned.NotOwned as error:
        raise ReportError(str(error))


@dataclass
class Outcome:
    """What `tlindex report` did: the runs reported and the summary, or why the report says no record."""

    runs: list[int]
    summary: ReportSummary | None          # None: the logs held no trace record (the index says so)
    problems: list[str]                    # paths that could not be read (the rest is reported)


def make_report(out: Path, paths: list[str], db_path: str | None, run_names: list[str], overwrite: bool,
                jobs: int | None, ingest_progress=None, page_progress=None, last: int | None = None,
                say=None, run_facts: bool = False, beside: Beside | None = None) -> Outcome:
    """The whole of `tlindex report`: logs (PATHs) ingested first, into `db_path` or a temporary database that
    is gone afterwards, or the runs of `db_path` (default traces.db: the last `last` runs when none are named);
    their report written to `out`. `say` is told how much it will write before it starts. `beside`: the PATHs'
    ingest into a temporary database, started by the caller in a child process (tlindex.ingest.beside)."""
    from tlindex.ingest.pipeline import ingest
    from tlindex.owned import scratch
    from tlindex.store.database import Database

    check_out_dir(out, overwrite)  # before any work
    if not paths:
        with Database(db_path or "traces.db", served=True) as handle:
            runs = runs_by_name(handle.conn, run_names, last)
            if say is not None:
                say(size_of_report(handle.conn, runs))
            return Outcome(runs, write_report(handle.path, out, runs, overwrite, page_progress, jobs, run_facts,
                                              handle.conn), [])
    if beside is not None:
        prepare(beside.running, beside.size)  # while the child ingests
        return _report_of_logs(beside.db, beside.wait(), out, paths, run_names, overwrite, jobs, page_progress,
                               run_facts)
    with scratch("tlindex-report-") as temporary:
        db = Path(db_path) if db_path else temporary / "traces.db"
        ingested = ingest(db, paths, jobs=jobs, progress=ingest_progress, search_index=bool(db_path),
                          scratch=not db_path)  # a temporary database is never searched
        return _report_of_logs(db, ingested, out, paths, run_names, overwrite, jobs, page_progress, run_facts)


def _report_of_logs(db: Path, ingested: IngestSummary, out: Path, paths: list[str], run_names: list[str],
                    overwrite: bool, jobs: int | None, page_progress, run_facts: bool) -> Outcome:
    """The report of the runs holding the logs `paths`, once they are ingested into `db`."""
    with closing(connect_read_only(db)) if db.exists() else nullcontext() as conn:
        runs = runs_of_paths(conn, paths) if conn is not None else []
        if not runs and ingested.problems and not ingested.files:  # not one log could be read: say why, not "no run"
            raise ReportError("nothing to report: " + "; ".join(ingested.problems))
        if not runs and not run_names and not ingested.problems:  # logs read, no record in them: the report says so
            write_empty_report(out, overwrite, f"{ingested.files + ingested.skipped} log file(s) read "
                                               f"({', '.join(paths)}): none holds a trace record.")
            return Outcome([], None, [])
        if run_names and conn is not None:
            runs = sorted(set(runs) & set(runs_by_name(conn, run_names)))
        return Outcome(runs, write_report(db, out, runs, overwrite, page_progress, jobs, run_facts, conn),
                       ingested.problems)
