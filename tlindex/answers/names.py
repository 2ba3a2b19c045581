"""Runs and compiles named as users name them, the same everywhere a run or a compile is asked for.

A run: its id, its label, the log directory it came from (the path, or its last folder), or a unique label
prefix. A compile: as torch prints it, `0/1` or `[0/1]` (`!0/1/2` under compiled autograd), with the run
(`RUN:0/1`) and the rank (`0/1@3`) where it would be ambiguous; its row id still works. A name that names
nothing, or several, is an error that lists what it matched and how to name one of them.
"""

from __future__ import annotations

import os
import re
import sqlite3

from tlindex.errors import UnknownCompile, UnknownRun

SHOWN = 10  # matches listed in an error
COMPILE_RE = re.compile(r"^\s*(?:(?P<run>.+):)?\[?(?P<id>!?\d+(?:/\d+){0,2}|-/-)\]?(?:@(?P<rank>-?\d+))?\s*$")


def resolve_run(conn: sqlite3.Connection, name: str) -> dict:
    """A run by id, label, log directory or unique label prefix: {"id", "label"}; an id is always its own run."""
    rows = conn.execute("SELECT id, label, directory FROM runs ORDER BY start_time, id").fetchall()
    text = str(name)
    folder = text.rstrip("/\\")
    found = ([r for r in rows if str(r[0]) == text.strip()] or [r for r in rows if r[1] == text]
             or [r for r in rows if r[2] and folder and (r[2].rstrip("/") == os.path.abspath(folder).rstrip("/")
                                                         or os.path.basename(r[2].rstrip("/")) == folder)]
             or [r for r in rows if r[1].startswith(text)])
    if not found:
        raise UnknownRun(f"no run matches {text!r}: give a run id, a label, a unique label prefix or its log "
                         f"directory (`tlindex runs` lists them)")
    if len(found) > 1:
        shown = "; ".join(f"{run_id} {label}" for run_id, label, _ in found[:SHOWN]) + ("; …" if len(found) > SHOWN else "")
        raise UnknownRun(f"{len(found)} runs match {text!r}: {shown}. Name one by its id (the number before its "
                         f"label) or a longer label prefix")
    return {"id": found[0][0], "label": found[0][1]}


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
