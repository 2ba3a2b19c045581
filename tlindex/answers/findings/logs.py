"""The checks of a run's logs themselves: what torch.export's draft_export found, and lines tlindex could not read."""

from __future__ import annotations

import sqlite3

from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import plural
from tlindex.answers.health import ingest_error_kinds


def export_issue_count(conn: sqlite3.Connection, run_id: int) -> int:
    """What draft_export found in a run, as tlparse's export report counts it (queries/export_issues.sql lists them)."""
    return conn.execute("""
        SELECT count(*) FROM export_issue_records e CROSS JOIN sources s  -- by kind first (index)
        WHERE s.id = e.source_id AND s.run_id = ?""", (run_id,)).fetchone()[0]


@check("export_issues", "warning", 70, "Export issues",
       "`torch.export.draft_export` met problems exporting the program: data-dependent errors (a branch or "
       "guard on a value only known at run time), guards it evaluated, custom ops without a fake kernel or "
       "with one that disagrees with the real kernel.",
       "Open export_issues, which names each issue's user frame: a data-dependent branch wants `torch._check` (or "
       "`torch.cond`), a custom op a fake kernel (`torch.library.register_fake`).")
def export_issues(conn: sqlite3.Connection, run: int, context: Context):
    count = export_issue_count(conn, run)
    if not count:
        return []
    return [context.finding(count, f"{plural(count, 'issue')} found during export (data-dependent errors, evaluated "
                                   f"guards, fake kernels).", "export_issues")]


@check("ingest_errors", "warning", 80, "Ingest errors",
       "Lines of the run's logs that tlindex could not index as they are: a line without the log prefix, bad "
       "JSON, a payload whose md5 does not match, a last line cut off… The rest of each log was indexed.",
       "Open the table ingest_errors (file, line, what is wrong): a last line cut off is a log still being "
       "written (ingest it again when it is done); other errors mean a log was edited, cut or mixed with other "
       "output.")
def ingest_errors(conn: sqlite3.Connection, run: int, context: Context):
    errors = ingest_error_kinds(conn, run)
    if not errors:
        return []
    total = sum(n for _, n in errors)
    kinds = ", ".join(f"{kind} ×{n}" for kind, n in errors)
    return [context.finding(total, f"{plural(total, 'ingest error')} in its logs ({kinds}): the table ingest_errors "
                                   f"says where.")]
