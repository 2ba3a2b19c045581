"""Runs and compiles named as users name them, the same everywhere a run or a compile is asked for.

A run: its id (a whole number is only ever an id), its label, a log directory it came from (the path, with or
without a trailing slash, or its last folder), or a unique label prefix (asked only when nothing else matches).
Every way is collected before one run is chosen: a name two runs answer to (a label that is another run's folder)
names neither. A compile: as torch prints it, `0/1` or `[0/1]` (`!0/1/2` under compiled autograd), with the run
(`RUN:0/1`) and the rank (`0/1@3`) where it would be ambiguous; its row id still works. A name that names
nothing, or several, is an error that lists what it matched and how to name one of them.
"""

from __future__ import annotations

import os
import re
import sqlite3

from tlindex.errors import UnknownCompile, UnknownRun
from tlindex.ingest.runs import normalize_label

SHOWN = 10  # matches listed in an error
COMPILE_RE = re.compile(r"^\s*(?:(?P<run>.+):)?\[?(?P<id>!?\d+(?:/\d+){0,2}|-/-)\]?(?:@(?P<rank>-?\d+))?\s*$")


def _folders(conn: sqlite3.Connection, folder: str) -> dict[int, set[str]]:
    """The log folders of the runs whose folders could be `folder` (its row's, and each of its files'): only those
    whose path holds the folder's last name are read (a scan of the files' folders, not of every process)."""
    needle = os.path.basename(folder)
    if not needle:
        return {}
    folders: dict[int, set[str]] = {}
    for run, directory in [*conn.execute("SELECT id, directory FROM runs WHERE instr(directory, ?) > 0", (needle,)),
                           *conn.execute("SELECT DISTINCT s.run_id, f.directory FROM files f JOIN sources s ON "
                                         "s.file_id = f.id WHERE instr(f.directory, ?) > 0 AND s.run_id IS NOT NULL",
                                         (needle,))]:
        folders.setdefault(run, set()).add(directory)
    return folders


def run_matches(conn: sqlite3.Connection, name: str) -> dict[int, list[str]]:
    """Every run a name can mean, with how it matches. A whole number is an id and nothing else (no label is one,
    and an error's way out of an ambiguity is the id); any other name: a label, one of a run's log folders (the
    path, with or without a trailing slash) or that folder's last name, all collected; only when none of those
    matches, a label prefix."""
    text = str(name)
    wanted = normalize_label(text)
    if re.fullmatch(r"\d+", wanted.strip()):
        found = conn.execute("SELECT id FROM runs WHERE id = ?", (int(wanted.strip()),)).fetchone()
        return {found[0]: ["id"]} if found else {}
    folder = text.rstrip("/\\")
    path = os.path.abspath(folder).rstrip("/") if folder else None
    runs = conn.execute("SELECT id, label FROM runs ORDER BY start_time, id").fetchall()
    folders = _folders(conn, folder)
    found: dict[int, list[str]] = {}
    for run, label in runs:
        ways = []
        if label in (text, wanted):
            ways.append("label")
        for directory in sorted(folders.get(run, ())):
            if path and directory.rstrip("/") == path:
                ways.append("log folder")
            elif folder and os.path.basename(directory.rstrip("/")) == folder:
                ways.append("log folder's name")
        if ways:
            found[run] = sorted(set(ways))
    if not found and text:
        found = {run: ["label prefix"] for run, label in runs if label.startswith(text) or label.startswith(wanted)}
    return found


def resolve_run(conn: sqlite3.Connection, name: str) -> dict:
    """A run by id, label, log directory or unique label prefix: {"id", "label"}. Every way the name can match is
    collected first: a name that matches two runs (a label that is another run's folder, say) is an error listing
    both, never the first found."""
    text = str(name)
    found = run_matches(conn, text)
    if not found:
        raise UnknownRun(f"no run matches {text!r}: give a run id, a label, a unique label prefix or its log "
                         f"directory (`tlindex runs` lists them)")
    labels = dict(conn.execute(f"SELECT id, label FROM runs WHERE id IN ({','.join('?' * len(found))})",
                               list(found)).fetchall())
    if len(found) > 1:
        shown = "; ".join(f"{run} {labels[run]!r} (its {' and '.join(ways)})" for run, ways in list(found.items())[:SHOWN])
        raise UnknownRun(f"{len(found)} runs match {text!r}: {shown}" + ("; …" if len(found) > SHOWN else "")
                         + ". Name one by its id (the number before its label)")
    (run,) = found
    return {"id": run, "label": labels[run]}


def run_id(conn: sqlite3.Connection, name: str | int | None) -> int | None:
    """A run's id by any of its names; None stays None (every run)."""
    if name is None or name == "":
        return None
    return resolve_run(conn, str(name))["id"]


def resolve_compile(conn: sqlite3.Connection, name: str, run: int | None = None) -> int:
    """A compile's row id by its name as torch prints it (`0/1`, `[0/1]`, `RUN:0/1@RANK`) or its row id, within
    `run` when given."""
    text = str(name).strip()
    if re.fullmatch(r"\d+", text) and "/" not in text:
        if conn.execute("SELECT 1 FROM compiles WHERE id = ?", (int(text),)).fetchone():
            return int(text)
    match = COMPILE_RE.match(text)
    if match is None:
        raise UnknownCompile(f"{text!r} names no compile: give it as torch prints it (0/1 or [0/1]; RUN:0/1@RANK "
                             f"where the run or rank is ambiguous) or by its row id")
    if match["run"] is not None:
        run = resolve_run(conn, match["run"])["id"]
    rank = int(match["rank"]) if match["rank"] is not None else None
    found = conn.execute("""
        SELECT c.id, c.run_id, r.label, c.rank, c.generation FROM compiles c LEFT JOIN runs r ON r.id = c.run_id
        WHERE c.compile_id = ? AND (? IS NULL OR c.run_id = ?) AND (? IS NULL OR c.rank = ?)
        ORDER BY c.run_id, c.rank, c.id""", (match["id"], run, run, rank, rank)).fetchall()
    if not found:
        where = (f" in run {run}" if run is not None else "") + (f" on rank {rank}" if rank is not None else "")
        raise UnknownCompile(f"no compile [{match['id']}]{where}")
    if len(found) > 1:
        shown = "; ".join(f"{label or f'run {run_}'}:{match['id']}" + (f"@{r}" if r is not None else "")
                          + (f" (generation {g}, row {row})" if g else f" (row {row})")
                          for row, run_, label, r, g in found[:SHOWN]) + ("; …" if len(found) > SHOWN else "")
        raise UnknownCompile(f"{len(found)} compiles are [{match['id']}]: {shown}. Name one with its run "
                             f"(RUN:{match['id']}) and rank (@RANK), or by its row id")
    return found[0][0]
