"""`tlindex report`: which runs, which database, which folder; the pages' HTML comes from tlindex.render.

The package, by job: build.py (what to write, tasks and workers, the crawl), pages.py (a URL rendered
to its file, links made relative), files.py (where each file goes), output.py (files written whole,
counted; what failed said), tlparse.py (each log's tlparse files), workers.py (the worker processes).

The report is written into a fresh folder beside DIR and moved into place when complete (tlindex.owned.atomic_dir),
so an interrupted report leaves no half-written DIR. An existing DIR is replaced only with `overwrite`, and only when
tlindex wrote it (its marker): `-o ~ --overwrite` must not delete a home directory, nor `-o tlparse_output
--overwrite` what tlparse wrote.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tlindex import owned
from tlindex.answers.runs import report_size, runs_by_name
from tlindex.errors import ReportError  # noqa: F401 (raised here, imported from here by callers)
from tlindex.report.build import SUMMARY, Report
from tlindex.report.files import INDEX
from tlindex.report.output import ReportSummary


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


def size_of_report(conn: sqlite3.Connection, runs: list[int]) -> str:
    """What a report of the runs will hold, said before it is written: runs, compiles and artifacts (a page each)."""
    total, compiles, artifacts = report_size(conn, runs)
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
    with _written(out) as partial:
        (partial / INDEX).write_text(EMPTY_INDEX.format(why=html.escape(why)), encoding="utf-8")
        (partial / SUMMARY).write_text(json.dumps({"runs": [], "pages": 1, "database": None, "degraded": []}) + "\n")


def write_report(conn: sqlite3.Connection, db_path: Path, out: Path, runs: list[int], overwrite: bool, progress=None,
                 jobs: int | None = None, run_facts: bool = False, scrub: bool = False) -> ReportSummary:
    """Write the report of `runs` to `out` (checked with check_out_dir first), with `jobs` processes; its summary.
    Where and by whom the runs were made (`tlindex run`'s command line, user, host, directory) is left out unless
    `run_facts` (a report is made to be shared); with `scrub`, tokens of known shapes are masked in every file, the
    logs' own text included, before the report is moved into place."""
    from tlindex.render.report import ReportRenderer
    from tlindex.report.output import scrub_folder

    if not runs:
        raise ReportError(f"{db_path}: no run to report")
    out = absolute(out)
    check_out_dir(out, overwrite)
    with _written(out) as partial:
        summary = Report(conn, db_path, partial, runs, ReportRenderer, progress, run_facts).write(jobs or os.cpu_count() or 1)
        if scrub:
            summary.scrubbed = scrub_folder(partial)
        return summary


def _written(out: Path):
    """The report's folder beside `out`, moved into place when whole (a ReportError when `out` changed meanwhile)."""
    from contextlib import contextmanager

    @contextmanager
    def written():
        try:
            with owned.atomic_dir(out, "report") as partial:
                yield partial
        except owned.NotOwned as error:
            raise ReportError(str(error)) from None

    return written()


def absolute(out: Path) -> Path:
    """DIR as an absolute path, `.` and `..` resolved as the shell would (`-o .` inside the old report,
    `-o r2/sub/..`), so that its parent, where the new report is written first, is never inside it."""
    return Path(os.path.abspath(out))


@dataclass
class Outcome:
    """What `tlindex report` did: the runs reported and the summary, or why the report says no record."""

    runs: list[int]
    summary: ReportSummary | None          # None: the logs held no trace record (the index says so)
    problems: list[str]                    # paths that could not be read (the rest is reported)


def report(conn: sqlite3.Connection, db_path: Path, out: Path, paths: list[str], run_names: list[str], overwrite: bool,
           jobs: int | None, page_progress=None, last: int | None = None, say: Callable[[str], None] | None = None,
           run_facts: bool = False, ingest: Callable[[], object] | None = None,
           runs_of: Callable[[], list[int]] | None = None, scrub: bool = False) -> Outcome:
    """The whole of `tlindex report` on a database: its runs (`run_names`, else the last `last`), or the logs `paths`
    ingested into it first (`ingest()`: the ingest's summary) and the runs holding them (`runs_of()`). `say` is told
    how much it will write before it starts."""
    check_out_dir(absolute(out), overwrite)  # before any work
    if not paths:
        runs = runs_by_name(conn, run_names, last)
        if say is not None:
            say(size_of_report(conn, runs))
        return Outcome(runs, write_report(conn, db_path, out, runs, overwrite, page_progress, jobs, run_facts, scrub), [])
    ingested = ingest()
    runs = runs_of()
    if not runs and ingested.problems and not ingested.files:  # not one log could be read: say why, not "no run"
        raise ReportError("nothing to report: " + "; ".join(ingested.problems))
    if not runs and not run_names and not ingested.problems:  # logs read, no record in them: the report says so
        write_empty_report(out, overwrite, f"{ingested.files + ingested.skipped} log file(s) read "
                                           f"({', '.join(paths)}): none holds a trace record.")
        return Outcome([], None, [])
    if run_names:
        runs = sorted(set(runs) & set(runs_by_name(conn, run_names)))
    return Outcome(runs, write_report(conn, db_path, out, runs, overwrite, page_progress, jobs, run_facts, scrub),
                   ingested.problems)
