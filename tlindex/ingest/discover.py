"""Expand the PATH arguments of `tlindex ingest` into log files."""

from __future__ import annotations

import glob
import os
from pathlib import Path

LOG_SUFFIXES = (".log", ".log.gz", ".txt", ".txt.gz")


def is_log_name(name: str) -> bool:
    """Whether a file found inside a directory looks like a trace log."""
    return name.startswith("dedicated_log_torch_trace") or name.endswith(LOG_SUFFIXES)


def discover(paths: list[str]) -> tuple[list[Path], list[str]]:
    """Return the log files named by files, directories (walked) and globs, and the problems met.

    An argument that names an existing file or directory is taken literally, even when it holds glob
    characters (`[`, `*`, `?`); only one that exists under no such name is expanded as a pattern.
    A file named explicitly is always taken; inside a directory only files that
    look like trace logs are (dedicated_log_torch_trace*, *.log, *.log.gz, ...), and none that a link leads to
    outside the directory (said as a problem: a link named like a log must not read a key beside it).
    """
    found: dict[Path, None] = {}
    problems: list[str] = []
    for arg in paths:
        # A path that exists is that path, whatever its characters (`run[1].log` is no pattern)
        literal = not glob.has_magic(arg) or os.path.lexists(arg)
        candidates = [Path(arg)] if literal else [Path(match) for match in sorted(glob.glob(arg, recursive=True))]
        if not candidates:
            problems.append(f"{arg}: no file matches")
        for path in candidates:
            if path.is_dir():
                logs = sorted(p for p in path.rglob("*") if p.is_file() and is_log_name(p.name))
                if not logs:
                    problems.append(f"{path}: directory holds no trace logs")
                root = path.resolve()
                for log in logs:
                    if log.resolve().is_relative_to(root):
                        _take(log, found, problems)
                    else:  # a link that leaves the folder: what it points at is not the folder's to give
                        problems.append(f"{log}: a link to {log.resolve()}, outside {path}: not read (name the file "
                                        f"itself to ingest it)")
            elif path.is_file():
                _take(path, found, problems)
            elif path.exists():
                problems.append(f"{path}: not a regular file (a FIFO, socket or device): give the log file itself")
            else:
                problems.append(f"{path}: no such file or directory")
    return list(found), problems


def _take(path: Path, found: dict[Path, None], problems: list[str]) -> None:
    """Take a file, unless its name cannot be stored (not valid UTF-8): that one is a problem of its own."""
    resolved = path.resolve()
    try:
        str(resolved).encode("utf-8")
    except UnicodeEncodeError:
        shown = str(resolved).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        problems.append(f"{shown}: the file name is not valid UTF-8 (rename it to ingest it)")
        return
    found[resolved] = None
