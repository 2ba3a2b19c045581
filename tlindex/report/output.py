"""Writing a report's files: each whole or not at all, counted, and what could not be written said."""

from __future__ import annotations

import html
import os
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tlindex.report.files import INDEX


@dataclass
class ReportSummary:
    pages: int = 0
    payloads: int = 0
    bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    degraded: list[tuple[str, str]] = field(default_factory=list)  # (report file, what failed): written as a notice

    def add(self, other: "ReportSummary") -> None:
        self.pages += other.pages
        self.payloads += other.payloads
        self.bytes += other.bytes
        self.warnings += other.warnings
        self.degraded += other.degraded


DEGRADED_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>tlindex: not rendered</title></head>
<body><h1>This page could not be rendered</h1><p>{what}</p><p>The rest of the report was written;
the report's <a href="{index}">index</a> lists every page that was not. Please report this with the log
that produced it.</p></body></html>
"""


class Output:
    """The report's folder: files saved (and counted in `summary`), streamed whole or not at all."""

    def __init__(self, out: Path):
        self.out = out
        self.summary = ReportSummary()
        self.folders: set[str] = set()  # folders made (or found) by this process: two system calls a file spared

    def folder(self, file: Path) -> None:
        """The file's folder, made once."""
        parent = str(file.parent)
        if parent not in self.folders:
            file.parent.mkdir(parents=True, exist_ok=True)
            self.folders.add(parent)

    def save(self, path: str, body: bytes, page: bool = False, payload: bool = False) -> None:
        """A file written whole, counted as a page or a payload's text as the caller says."""
        file = self.out / path
        self.folder(file)
        with open(file, "wb") as out:
            out.write(body)
        self.summary.pages += page
        self.summary.payloads += payload
        self.summary.bytes += len(body)

    def stream(self, path: str, pieces: Iterable[bytes]) -> None:
        """Write a file piece by piece, whole or not at all: a failure midway leaves no half file behind."""
        file = self.out / path
        self.folder(file)
        partial = file.with_name(f"{file.name}.partial")
        try:
            with open(partial, "wb") as out:
                for piece in pieces:
                    self.summary.bytes += out.write(piece)
            os.replace(partial, file)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def degraded(self, path: str, what: str) -> bytes:
        """The notice written in place of a page that failed (links to it still lead somewhere)."""
        self.summary.degraded.append((path, what))
        index = posixpath.relpath(INDEX, posixpath.dirname(path) or ".")
        return DEGRADED_PAGE.format(what=html.escape(what), index=html.escape(index)).encode("utf-8")

    def isolated(self, path: str, work: Callable[[], None]) -> None:
        """Run one piece of non-page work (a trace, tlparse's files of a log); a failure is recorded, not raised."""
        try:
            work()
        except Exception as error:
            self.summary.degraded.append((path, f"{type(error).__name__}: {error}"))


def note_degraded(out: Path, degraded: list[tuple[str, str]]) -> None:
    """Name every file that could not be produced at the top of the index (the runs page's file)."""
    index = out / INDEX
    if not degraded or not index.exists():
        return
    items = "".join(f'<li>{_link(path) if (out / path).is_file() else html.escape(path)}: {html.escape(what)}</li>'
                    for path, what in sorted(degraded))  # a trace or JSON file that failed is not there
    notice = (f'<div class="tlindex-degraded" role="alert"><strong>{len(degraded)} '
              f'file{"s" * (len(degraded) != 1)} of this report could not be rendered</strong> '
              f'(a page says so where it would be; the rest is complete):<ul>{items}</ul></div>')
    page = index.read_text(encoding="utf-8")
    at = page.find("</h1>")
    at = at + len("</h1>") if at >= 0 else 0
    index.write_text(page[:at] + notice + page[at:], encoding="utf-8")


def _link(path: str) -> str:
    return f'<a href="{html.escape(path)}">{html.escape(path)}</a>'
