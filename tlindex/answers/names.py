"""Runs and compiles named as users name them, the same everywhere a run or a compile is asked for.

A run: its id, its label, the log directory it came from (the path, or its last folder), or a unique label
prefix. A compile: as torch prints it, `0/1` or `[0/1]` (`!0/1/2` under compiled autograd), or one of its
attempts as torch and tlparse print them (`[0/1_1]`, `0/1_1`: the compile), with the run (`RUN:0/1`), the
generation after a torch._dynamo.reset() (`0/1~1`, as the tree's "after reset 1") and the rank (`0/1@3`) or
process (`0/1@pid4242`) where it would be ambiguous; its row id still works. A name that names nothing, or
several, is an error that lists what it matched, each by a name that works.
"""

from __future__ import annotations

import os
import re
import sqlite3

from tlindex.errors import UnknownCompile, UnknownRun

SHOWN = 10  # matches listed in an error
COMPILE_RE = re.compile(r"^\s*(?:(?P<run>.+):)?\[?(?P<id>!?\d+(?:/\d+){0,2}|-/-)(?:_(?P<attempt>\d+))?\]?"
                        r"(?:~(?P<generation>\d+))?(?:@(?:(?P<rank>-?\d+)|pid(?P<pid>\d+)))?\s*$")
ATTEMPT_RE = re.compile(r"^(\[?!?\d+(?:/\d+){1,2})_\d+(\]?)$")  # [0/1_2]: attempt 2 of compile [0/1]


def without_attempt(word: str) -> str:
    """A word naming a compile's attempt (`[0/1_2]`, `0/1_2`) as the compile (`[0/1]`, `0/1`); others unchanged."""
    return ATTEMPT_RE.sub(r"\1\2", word)


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
    generation = int(match["generation"]) if match["generation"] is not None else None
    pid = int(match["pid"]) if match["pid"] is not None else None
    found = conn.execute("""
        SELECT c.id, r.label, c.rank, c.generation, s.pid, c.attempts, c.run_id FROM compiles c
        LEFT JOIN runs r ON r.id = c.run_id LEFT JOIN sources s ON s.id = c.source_id
        WHERE c.compile_id = ? AND (? IS NULL OR c.run_id = ?) AND (? IS NULL OR c.rank = ?)
        AND (? IS NULL OR c.generation = ?) AND (? IS NULL OR s.pid = ?)
        ORDER BY c.run_id, c.rank, c.generation, c.id""",
                         (match["id"], run, run, rank, rank, generation, generation, pid, pid)).fetchall()
    if not found:
        where = (f" in run {run}" if run is not None else "") + (f" on rank {rank}" if rank is not None else "")
        raise UnknownCompile(f"no compile [{match['id']}]{where}")
    if len(found) > 1:
        shown = "; ".join(_typeable(match["id"], row, found) for row in found[:SHOWN]) + \
            ("; …" if len(found) > SHOWN else "")
        raise UnknownCompile(f"{len(found)} compiles are [{match['id']}]: {shown}. Name one as shown, or by its "
                             f"row id")
    attempt = int(match["attempt"]) if match["attempt"] is not None else None
    if attempt is not None and attempt >= found[0][5]:
        raise UnknownCompile(f"compile [{match['id']}] has no attempt {attempt}: it made {found[0][5]} "
                             f"(numbered from 0)")
    return found[0][0]


def _typeable(compile_id: str, row: tuple, found: list[tuple]) -> str:
    """A name of one of several compiles that names it alone: RUN:ID, then ~GENERATION, and @RANK or @pidPID as
    needed (row: id, label, rank, generation, pid, attempts, run id); its row id when nothing else tells it apart."""
    row_id, label, rank, generation, pid, _, run = row
    same = [r for r in found if r[6] == run]
    name = f"{label or run}:{compile_id}"
    if len({r[3] for r in same}) > 1:
        name, same = name + f"~{generation}", [r for r in same if r[3] == generation]
    if len(same) > 1 and rank is not None and len({r[2] for r in same}) > 1:
        name, same = name + f"@{rank}", [r for r in same if r[2] == rank]
    if len(same) > 1 and pid is not None and len({r[4] for r in same}) > 1:
        name, same = name.rsplit("@", 1)[0] if rank is not None and name.endswith(f"@{rank}") else name, \
            [r for r in same if r[4] == pid]
        name += f"@pid{pid}"
    return name if len(same) == 1 else f"row {row_id}"
