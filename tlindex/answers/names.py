"""Runs and compiles named as users name them, the same everywhere a run or a compile is asked for.

A run: its id (a whole number is only ever an id), its label, a log directory it came from (the path, with or
without a trailing slash, or its last folder), or a unique label prefix (asked only when nothing else matches).
Every way is collected before one run is chosen: a name two runs answer to (a label that is another run's folder)
names neither. A compile: as torch prints it, `0/1` or `[0/1]` (`!0/1/2` under compiled autograd), or one of its
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
from tlindex.ingest.runs import normalize_label

SHOWN = 10  # matches listed in an error
LARGEST_ID = (1 << 63) - 1  # SQLite's largest integer: a larger number is no row's id (nor rank, pid or generation)
COMPILE_RE = re.compile(r"^\s*(?:(?P<run>.+):)?\[?(?P<id>!?\d+(?:/\d+){0,2}|-/-)(?:_(?P<attempt>\d+))?\]?"
                        r"(?:~(?P<generation>\d+))?(?:@(?:(?P<rank>-?\d+)|pid(?P<pid>\d+)))?\s*$")
ATTEMPT_RE = re.compile(r"^(\[?!?\d+(?:/\d+){1,2})_\d+(\]?)$")  # [0/1_2]: attempt 2 of compile [0/1]


def without_attempt(word: str) -> str:
    """A word naming a compile's attempt (`[0/1_2]`, `0/1_2`) as the compile (`[0/1]`, `0/1`); others unchanged."""
    return ATTEMPT_RE.sub(r"\1\2", word)


def _number(text: str | None) -> int | None:
    """A whole number as SQLite can compare it, or None for a number past its integers (it names no row): any number
    is a name that matches or not, never an error of the database."""
    if text is None:
        return None
    value = int(text)
    return value if -LARGEST_ID - 1 <= value <= LARGEST_ID else None


def prints_as_nothing(name: str) -> bool:
    """Whether a name is nothing once normalized as labels are (empty, blank, or only characters that print as
    nothing: a zero-width space, a soft hyphen, U+202E): it names no run (as a prefix, it would name them all)."""
    return not normalize_label(str(name)).strip()


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
    if not wanted.strip():
        return {}  # prints as nothing: no run (every label would begin with it)
    if re.fullmatch(r"\d+", wanted.strip()):
        number = _number(wanted.strip())
        found = conn.execute("SELECT id FROM runs WHERE id = ?", (number,)).fetchone() if number is not None else None
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
    if prints_as_nothing(text):
        raise UnknownRun(f"{text!r} names no run: it prints as nothing (give a run id, a label, a unique label prefix "
                         f"or its log directory; `tlindex runs` lists them)")
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


def run_labels(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    """The labels of these runs, by id."""
    return dict(conn.execute(f"SELECT id, label FROM runs WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall())


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
        row_id = _number(text)
        if row_id is not None and conn.execute("SELECT 1 FROM compiles WHERE id = ?", (row_id,)).fetchone():
            return row_id
    match = COMPILE_RE.match(text)
    if match is None:
        raise UnknownCompile(f"{text!r} names no compile: give it as torch prints it (0/1 or [0/1]; RUN:0/1@RANK "
                             f"where the run or rank is ambiguous) or by its row id")
    if match["run"] is not None:
        run = resolve_run(conn, match["run"])["id"]
    rank, generation, pid = (_number(match[part]) for part in ("rank", "generation", "pid"))
    if any(match[part] is not None and value is None for part, value in
           (("rank", rank), ("generation", generation), ("pid", pid))):
        raise UnknownCompile(f"no compile {text!r}: a number in it is past any rank, generation or process id")
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
