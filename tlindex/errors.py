"""The errors a user can act on: one family, each with its one-line message and its exit code.

The command line catches TlindexError once (tlindex.cli.Commands) and prints its message as one line;
the plugin answers NotFound with 404 and UsageError with 400. Anything else is a bug, and says so with
a traceback (a page: a page that says what failed).
"""

from __future__ import annotations


class TlindexError(Exception):
    """Something the user can fix; str(error) says what, in one line."""

    exit_code = 1


class UsageError(TlindexError):
    """An argument of the wrong form: a label that is a number, a page argument that is not one (HTTP 400)."""

    exit_code = 2


class NotFound(TlindexError):
    """What was asked for is not there: no such run, compile, artifact or page (HTTP 404)."""


class UnknownRun(NotFound):
    """A run name that names no run, or several (the message lists them)."""


class UnknownCompile(NotFound):
    """A compile name that names no compile, or several (the message lists them)."""


class RunBusy(TlindexError):
    """A run an ingest still running is writing: it is not removed until that ingest ends (the message names it)."""


class DatabaseError(TlindexError):
    """A database tlindex must not (or cannot) write to; the message says why, naming the file."""


class ReportError(TlindexError):
    """A report that cannot be written: the message names the folder or database and why."""


class ExportError(TlindexError):
    """An export that cannot be written: the message names the folder and why."""


class QueryError(TlindexError):
    """A statement SQLite refused, or could not finish within its limits; the message says why."""


class SearchError(TlindexError):
    """A term that cannot be searched; the message says why."""


class NotOwned(TlindexError):
    """A path tlindex will not remove or replace: it did not make it (tlindex.owned)."""
