"""The bytecode page of a resume function's compile: original and modified listings side by side, Dynamo's
insertions marked and linked, the user's source, the graph break that created it, depyf's source."""

from __future__ import annotations

import sqlite3

from tlindex.answers.resume_functions import bytecode_artifacts, resume_view
from tlindex.errors import NotFound
from tlindex.pages.rows import Args


def bytecode_data(conn: sqlite3.Connection, args: Args, compile: int) -> dict:
    """The page's view; `read_source_files` (an option: the plugin setting) lets it read the user's file."""
    read_files = bool(args.options.get("read_source_files", True))
    view = resume_view(conn, compile, read_files)
    if view is None:
        raise NotFound(f"Compile {compile} logged no bytecode listing (only resume functions do)")
    return {"view": view, "compile": view.compile, "read_files": read_files}


def listings(conn: sqlite3.Connection, compile: int) -> list[tuple[str, str]]:
    """What the page shows when it cannot analyse the listings: each listing as the trace logged it."""
    found = bytecode_artifacts(conn, compile)
    return [(name.strip("_").replace("_", " ").lower(), listing["text"]) for name, listing in sorted(found.items())]
