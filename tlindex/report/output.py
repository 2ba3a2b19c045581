"""Writing a report's files: each whole or not at all, counted, and what could not be written said."""

from __future__ import annotations

import html
import os
import posixpath
import re
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
    scrubbed: int | None = None  # with --scrub: the tokens masked

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


SCRUB_BLOCK = 1 << 20  # bytes of a file scrubbed at once
_TOKEN_ENDS = re.compile(rb"[\s\"'<>,;&=]")  # bytes no token of a known shape holds: a block is cut after one


def scrub_folder(folder: Path) -> int:
    """Every file of a written report with the tokens of known shapes masked in its text (tlindex.store.secret_shapes,
    `tlindex report --scrub`), read a block at a time; said at the top of its index; how many were masked."""
    masked = sum(_scrub_file(path) for path in sorted(folder.rglob("*")) if path.is_file() and not path.is_symlink())
    _notice(folder, f'<p class="tlindex-scrubbed" role="note">Scrubbed (<code>tlindex report --scrub</code>): '
                    f'{masked:,} token{"s" * (masked != 1)} of a known shape (access tokens, API keys) masked as '
                    f'<code>***</code> in this report\'s text.</p>')
    return masked


def _scrub_file(file: Path) -> int:
    """One file scrubbed into a copy beside it, which replaces it when it masked anything; how many it masked."""
    from tlindex.store.secret_shapes import scrub_counted

    masked, carried = 0, b""
    copy = file.with_name(file.name + ".scrubbed")
    try:
        with open(file, "rb") as source, open(copy, "wb") as out:
            while True:
                chunk = source.read(SCRUB_BLOCK)
                block = carried + chunk
                ends = [m.end() for m in _TOKEN_ENDS.finditer(block, max(0, len(block) - 4096))] if chunk else []
                cut = ends[-1] if ends else len(block)  # a token the block's end cuts waits for the next block
                block, carried = block[:cut], block[cut:]
                text, count = scrub_counted(block.decode("utf-8", "surrogateescape"))
                out.write(text.encode("utf-8", "surrogateescape"))
                masked += count
                if not chunk:
                    break
        if masked:
            os.replace(copy, file)
    finally:
        copy.unlink(missing_ok=True)
    return masked


def note_degraded(out: Path, degraded: list[tuple[str, str]]) -> None:
    """Name every file that could not be produced at the top of the index (the runs page's file)."""
    if not degraded:
        return
    items = "".join(f'<li>{_link(path) if (out / path).is_file() else html.escape(path)}: {html.escape(what)}</li>'
                    for path, what in sorted(degraded))  # a trace or JSON file that failed is not there
    _notice(out, f'<div class="tlindex-degraded" role="alert"><strong>{len(degraded)} '
                 f'file{"s" * (len(degraded) != 1)} of this report could not be rendered</strong> '
                 f'(a page says so where it would be; the rest is complete):<ul>{items}</ul></div>')


def _notice(out: Path, notice: str) -> None:
    """A notice at the top of the report's index (the runs page's file), below its heading."""
    index = out / INDEX
    if not index.exists():
        return
    page = index.read_text(encoding="utf-8")
    at = page.find("</h1>")
    at = at + len("</h1>") if at >= 0 else 0
    index.write_text(page[:at] + notice + page[at:], encoding="utf-8")


def _link(path: str) -> str:
    return f'<a href="{html.escape(path)}">{html.escape(path)}</a>'
