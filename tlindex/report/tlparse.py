"""Each log's tlparse files in a report: compile_directory.json and raw.jsonl, in tlparse 0.4.3's formats."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from tlindex.formats.tlparse_files import Links, compile_directory, raw_jsonl
from tlindex.report.files import ReportFiles, relative
from tlindex.report.output import Output


def write_tlparse_files(conn: sqlite3.Connection, output: Output, files: ReportFiles, run: int, file_id: int,
                        name: str, logs: int, payload_text: Callable[[str], str]) -> None:
    """compile_directory.json and raw.jsonl of one log of the run (in DIR, or in its own folder when the run has
    several logs); each written whole or not at all, and a failure of one said without stopping the other.
    `payload_text(digest)` writes a payload's text file if no page does, and gives its path."""
    folder = files.run_dir(run) + ("" if logs == 1 else f"{name}/")

    def rel(target: str) -> str:
        return relative(target, folder.rstrip("/"))

    links = Links(lambda digest: rel(payload_text(digest)), lambda digest: rel(files.page_file("payload", hash=digest)),
                  lambda compile: rel(files.page_file("compile", compile=compile)))
    output.isolated(f"{folder}compile_directory.json", lambda: output.stream(
        f"{folder}compile_directory.json", (piece.encode() for piece in compile_directory(conn, file_id, links))))

    def raw() -> None:
        try:
            lines = raw_jsonl(conn, file_id, links.payload_text)
            output.stream(f"{folder}raw.jsonl", (f"{line}\n".encode() for line in lines))
        except OSError as error:
            output.summary.warnings.append(f"raw.jsonl of {folder or 'the run'}: the log is not readable ({error})")

    output.isolated(f"{folder}raw.jsonl", raw)
