"""A resume function's compile as the trace tells it: its two bytecode listings aligned, the
graphs and resume functions its code calls, the graph break that created it, and the user's
source lines next to the instructions.

Everything here is read from the database: listings (`tlindex.answers.bytecode`), the graph-break
record of the compile that broke (its "User code traceback"), and the source lines the trace
carries (stack `loc`s, tracebacks, the `# File: …, code: …` comments of FX graphs). The user's
file is read only when it exists on this machine and agrees with every line the trace has.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field

from tlindex.answers.bytecode import (
    ROLE_TITLES,
    Listing,
    Row,
    align,
    called_names,
    line_at_offset,
    parse_listing,
    resume_base,
    resume_name,
    resume_target,
)
from tlindex.answers.decompile import Decompiled, decompile
from tlindex.answers.sql import of_one_rank

SUFFIXES = ("_ORIGINAL_BYTECODE", "_MODIFIED_BYTECODE")
TRACEBACK_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<fn>.*)$')
FX_COMMENT = re.compile(r"# File: (?P<file>.+?):(?P<line>\d+) in (?P<fn>\S+), code: (?P<code>.*)$", re.M)
DECOMPILE_LIMIT = 5000  # instructions; longer listings are not decompiled (the page stays fast)
SOURCE_FILE_LIMIT = 5_000_000  # bytes of a user's file read to show its lines
MIN_KNOWN_LINES = 3  # distinct non-blank lines the trace must know (all matching) before a file is read


@dataclass
class Frame:
    file: str
    line: int
    fn: str
    code: str | None


@dataclass
class Break:
    """The graph break that created a resume function: in `compile`, at `frame` of its code."""

    compile: dict
    reason: str
    user_file: str | None
    user_line: int | None
    frame: Frame  # the breaking compile's own frame in the traceback (the line execution resumes after)
    traceback: list[Frame]


@dataclass
class ResumeView:
    compile: dict
    original: dict  # artifact row (id, name) + text
    modified: dict
    rows: list[Row]
    graphs: list[dict]  # {name, artifact, compile} per __compiled_fn_N
    resumes: list[dict]  # {name, offset, line, target_name, compile} per __resume_at_N
    created_by: Break | None
    source: dict[int, str]  # line -> text of co_filename
    source_from: list[str]  # where those lines came from
    decompiled: dict[str, Decompiled] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=lambda: dict(ROLE_TITLES))


def bytecode_artifacts(conn: sqlite3.Connection, compile_row: int) -> dict[str, dict]:
    """The compile's ORIGINAL/MODIFIED listings by suffix (the first of each), with their text."""
    found: dict[str, dict] = {}
    for row in conn.execute("""
            SELECT a.id, a.name, p.text FROM artifacts a LEFT JOIN payloads p ON p.hash = a.payload
            WHERE a.compile = ? AND a.kind = 'artifact' AND (a.name LIKE '%\\_ORIGINAL\\_BYTECODE' ESCAPE '\\'
                  OR a.name LIKE '%\\_MODIFIED\\_BYTECODE' ESCAPE '\\') ORDER BY a.id""", (compile_row,)):
        for suffix in SUFFIXES:
            if row[1].endswith(suffix) and row[2] is not None:
                found.setdefault(suffix, {"id": row[0], "name": row[1], "text": row[2]})
    return found


# An artifact `a` that is a modified bytecode listing (what gives a compile a bytecode page).
MODIFIED_LISTING = "a.kind = 'artifact' AND a.name LIKE '%\\_MODIFIED\\_BYTECODE' ESCAPE '\\'"


def has_bytecode(conn: sqlite3.Connection, compile_row: int) -> bool:
    """Whether the compile logged a modified bytecode listing (has a bytecode page)."""
    return conn.execute(f"SELECT 1 FROM artifacts a WHERE a.compile = ? AND {MODIFIED_LISTING} LIMIT 1",
                        (compile_row,)).fetchone() is not None


def run_compiles_with_bytecode(conn: sqlite3.Connection, run_id: int, rank: int | None = None) -> set[int]:
    """The compiles of a run (of one rank's processes, when given) that have a modified bytecode listing."""
    of_rank, params = of_one_rank("c.rank", rank)
    return {r[0] for r in conn.execute(f"SELECT DISTINCT a.compile FROM compiles c JOIN artifacts a "
                                       f"ON a.compile = c.id WHERE c.run_id = ?{of_rank} AND {MODIFIED_LISTING}",
                                       (run_id, *params))}


def resumes_created(conn: sqlite3.Connection, compile_: dict) -> list[dict]:
    """The resume functions this compile's graph breaks created, each with its compile when the same
    process compiled it later (the first of that name)."""
    found = []
    for reason, _, _, text in breaks_of(conn, compile_["id"]):
        frame = next((f for f in reversed(user_traceback(text or ""))
                      if f.fn in (compile_["co_name"], resume_base(compile_["co_name"] or ""))), None)
        if frame is None:
            continue
        name = resume_name(compile_["co_name"], frame.line)
        row = conn.execute("""SELECT id, compile_id FROM compiles WHERE source_id = ? AND generation = ? AND id > ?
                              AND co_name = ? ORDER BY id LIMIT 1""",
                           (compile_["source_id"], compile_["generation"], compile_["id"], name)).fetchone()
        found.append({"name": name, "line": frame.line, "compile": row[0] if row else None,
                      "compile_id": row[1] if row else None,
                      "has_bytecode": bool(row and has_bytecode(conn, row[0]))})
    return found


def user_traceback(text: str) -> list[Frame]:
    """The frames of a graph-break record's "User code traceback:" section, with their code lines."""
    frames: list[Frame] = []
    lines = text.splitlines()
    try:
        k = lines.index("User code traceback:") + 1
    except ValueError:
        return frames
    while k < len(lines):
        match = TRACEBACK_FRAME.match(lines[k])
        if not match:
            break
        code = None
        if k + 1 < len(lines) and lines[k + 1].startswith("    ") and not TRACEBACK_FRAME.match(lines[k + 1]):
            code = lines[k + 1].strip()
            k += 1
            while k + 1 < len(lines) and lines[k + 1].strip() and set(lines[k + 1].strip()) <= set("^~ "):
                k += 1  # the ^^^^ markers under the code
        frames.append(Frame(match["file"], int(match["line"]), match["fn"], code))
        k += 1
    return frames


def breaks_of(conn: sqlite3.Connection, compile_row: int) -> list[tuple[str, str | None, int | None, str]]:
    """The compile's graph-break records: (reason, user_file, user_line, whole artifact text)."""
    return conn.execute("""
        SELECT g.reason, g.user_file, g.user_line, p.text FROM graph_break_events g
        JOIN envelopes e ON e.id = g.envelope_id LEFT JOIN payloads p ON p.hash = e.payload
        WHERE g.compile = ? ORDER BY g.id""", (compile_row,)).fetchall()


def created_by(conn: sqlite3.Connection, resume: dict) -> Break | None:
    """The latest earlier compile of the same process whose graph break, in its own frame at line L,
    gives the resume function's name (torch_dynamo_resume_in_<fn>_at_<L>)."""
    candidates = conn.execute("""
        SELECT * FROM compiles WHERE source_id = ? AND generation = ? AND id < ? AND graph_breaks > 0
        ORDER BY id DESC LIMIT 200""", (resume["source_id"], resume["generation"], resume["id"]))
    columns = [d[0] for d in candidates.description]
    for values in candidates.fetchall():
        parent = dict(zip(columns, values))
        for reason, user_file, user_line, text in breaks_of(conn, parent["id"]):
            frames = user_traceback(text or "")
            for frame in reversed(frames):
                # tracebacks name a resume function's frame after the user function it continues
                own = frame.fn in (parent["co_name"], resume_base(parent["co_name"]))
                if own and resume_name(parent["co_name"], frame.line) == resume["co_name"]:
                    return Break(parent, reason, user_file, user_line, frame, frames)
    return None


def graph_links(conn: sqlite3.Connection, compile_row: int, names: list[str]) -> list[dict]:
    """Each compiled graph the modified code calls: the graph this compile produced. When the compile
    produced as many graphs as the code calls, the n-th call (by Dynamo's counter) is the n-th graph."""
    graphs = [r[0] for r in conn.execute(
        "SELECT id FROM artifacts WHERE compile = ? AND kind = 'dynamo_output_graph' ORDER BY id", (compile_row,))]
    matched = len(graphs) == len(names)
    return [{"name": name, "compile": compile_row, "artifact": graphs[k] if matched else None}
            for k, name in enumerate(names)]


def resume_links(conn: sqlite3.Connection, resume: dict, original: Listing,
                 calls: list[tuple[str, int]]) -> list[dict]:
    """Each resume function the modified code calls (`__resume_at_<offset>_N`): named after the line
    of that offset in the original listing, compiled later by the same process. Among compiles of
    that name, the one whose prologue jumps to that offset is preferred."""
    links = []
    for name, offset in calls:
        line = line_at_offset(original, offset)
        target = resume_name(resume["co_name"], line) if line is not None else None
        found = None
        if target:
            candidates = conn.execute("""
                SELECT id FROM compiles WHERE source_id = ? AND generation = ? AND id > ? AND co_name = ?
                ORDER BY id LIMIT 20""", (resume["source_id"], resume["generation"], resume["id"], target)).fetchall()
            for (candidate,) in candidates:
                listing = bytecode_artifacts(conn, candidate).get("_ORIGINAL_BYTECODE")
                if listing and resume_target(parse_listing(listing["text"])) == offset:
                    found = candidate
                    break
            if found is None and candidates:
                found = candidates[0][0]
        links.append({"name": name, "offset": offset, "line": line, "target_name": target, "compile": found})
    return links


def trace_source_lines(conn: sqlite3.Connection, filename: str, compile_rows: list[int],
                       breaks: list[Frame]) -> dict[int, str]:
    """Lines of `filename` the trace itself carries: stack `loc`s of these compiles, graph-break
    tracebacks, and the `# File:` comments of their FX graphs."""
    lines: dict[int, str] = {}
    marks = ",".join("?" * len(compile_rows))
    for line, loc in conn.execute(f"""
            SELECT f.line, f.loc FROM frames f JOIN envelopes e ON e.id = f.envelope_id
            WHERE e.compile IN ({marks}) AND f.filename = ? AND f.loc IS NOT NULL""", (*compile_rows, filename)):
        lines.setdefault(line, loc)
    for frame in breaks:
        if frame.file == filename and frame.code:
            lines.setdefault(frame.line, frame.code)
    for (text,) in conn.execute(f"""
            SELECT p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload
            WHERE a.compile IN ({marks}) AND a.kind = 'dynamo_output_graph'""", compile_rows):
        for match in FX_COMMENT.finditer(text or ""):
            if match["file"] == filename:
                lines.setdefault(int(match["line"]), match["code"].strip())
    return lines


def file_source_lines(filename: str, known: dict[int, str]) -> dict[int, str] | None:
    """The user's file, only when the trace proves it is the file the compile ran: the compile's own
    co_filename, an absolute path to a regular `.py` file (after links), of which the trace knows at
    least MIN_KNOWN_LINES distinct non-blank lines, every one equal to the file's line at that number
    (a file edited since the run would put wrong lines next to the bytecode; a crafted trace that
    knows only blank lines, or a line or two anyone could guess, must not make a page print a file
    of the server)."""
    evidence = {line: code.strip() for line, code in known.items() if code.strip()}
    if (len(set(evidence.values())) < MIN_KNOWN_LINES or not os.path.isabs(filename)
            or not os.path.realpath(filename).endswith(".py") or not os.path.isfile(filename)):
        return None
    try:
        if os.path.getsize(filename) > SOURCE_FILE_LIMIT:
            return None
        with open(filename, encoding="utf-8", errors="replace") as handle:
            text = handle.read().splitlines()
    except OSError:
        return None
    lines = {k + 1: line.strip() for k, line in enumerate(text)}
    if any(lines.get(line) != code.strip() for line, code in known.items()):
        return None
    return lines


def resume_view(conn: sqlite3.Connection, compile_row: int, read_files: bool = True) -> ResumeView | None:
    """The bytecode view of a compile, or None when it logged no modified listing."""
    cursor = conn.execute("SELECT * FROM compiles WHERE id = ?", (compile_row,))
    row = cursor.fetchone()
    if row is None:
        return None
    compile_ = dict(zip([d[0] for d in cursor.description], row))
    listings = bytecode_artifacts(conn, compile_row)
    if "_MODIFIED_BYTECODE" not in listings:
        return None
    modified_text = listings["_MODIFIED_BYTECODE"]["text"]
    original_text = listings.get("_ORIGINAL_BYTECODE", {}).get("text", "")
    original, modified = parse_listing(original_text), parse_listing(modified_text)
    rows = align(original, modified)
    graph_names, resume_calls = called_names(modified)
    resumes = resume_links(conn, compile_, original, resume_calls)
    parent = created_by(conn, compile_)
    related = [compile_row] + ([parent.compile["id"]] if parent else []) + [r["compile"] for r in resumes if r["compile"]]
    filename = compile_["co_filename"] or ""
    source = trace_source_lines(conn, filename, related, parent.traceback if parent else [])
    source_from = ["the trace"] if source else []
    from_file = file_source_lines(filename, source) if read_files else None
    if from_file:
        source = {**from_file, **source}
        source_from.append(filename)
    view = ResumeView(compile_, listings.get("_ORIGINAL_BYTECODE"), listings["_MODIFIED_BYTECODE"], rows,
                      graph_links(conn, compile_row, graph_names), resumes, parent, source, source_from)
    first_line = compile_["co_firstlineno"] or 1
    for label, listing, text in (("original", original, original_text), ("modified", modified, modified_text)):
        if not text:
            continue
        if len(listing.instructions) > DECOMPILE_LIMIT:
            view.decompiled[label] = Decompiled(None, f"The listing has {len(listing.instructions):,} instructions; "
                                                      f"only listings up to {DECOMPILE_LIMIT:,} are decompiled.")
        else:
            view.decompiled[label] = decompile(listing, text, compile_["co_name"] or "f", filename, first_line)
    return view
