"""The check of a run's failed compiles: each failure in torch's words, at the user's line, with its compiles.

A failed compile is one whose compilation_metrics carry a `fail_type`, the recompile limit aside (its own finding,
tlindex.answers.findings.recompiles). Failures that read the same (torch's type and reason, the user's line) are one
finding naming every compile they hit.
"""

from __future__ import annotations

import re
import sqlite3

from tlindex.answers.artifacts import payload_text
from tlindex.answers.findings import tracebacks
from tlindex.answers.findings.ranks import processes
from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import plural, rank_list, short, short_location
from tlindex.answers.shapes import USER_LINE

# A compile that hit the recompile limit, as SQL over `compiles` (recompile_reasons' hit_limit says the same).
LIMIT_HIT = ("(coalesce(fail_reason, '') LIKE 'Dynamo recompile limit exceeded%' "
             "OR coalesce(fail_type, '') = 'FailOnRecompileLimitHit')")  # (never NULL: NOT of it is a filter)
READ = 200  # failed compiles of a run whose artifacts are read for the user's line (the others counted)
SHOWN = 5  # groups of failures said one by one; the others in one last finding
TEXTS = ("dynamo_error", "dynamo_graph_break_reason")  # torch's artifacts that print the user's frames


def failed(conn: sqlite3.Connection, run: int) -> list[dict]:
    """The run's failed compiles (the recompile limit aside), in log order, each with torch's reason quoted and the
    user's frame torch printed (the first READ of them; the others without)."""
    rows = conn.execute(f"""
        SELECT id, compile_id, co_name, rank, fail_type, fail_reason, fail_user_frame_filename, fail_user_frame_lineno
        FROM compiles WHERE run_id = ? AND status = 'error' AND fail_type IS NOT NULL AND NOT {LIMIT_HIT}
        ORDER BY id""", (run,)).fetchall()
    out = []
    for n, (row, compile_id, name, rank, fail_type, fail_reason, file, line) in enumerate(rows):
        frame = _user_frame(conn, row, file, line) if n < READ else None
        special = _specialized(conn, run, fail_reason) if frame is None and n < READ else None
        out.append({"compile": row, "compile_id": compile_id, "function": name, "rank": rank, "type": fail_type,
                    "frame": frame or (special and special[0]), "specialized": special and special[1],
                    "reason": tracebacks.reason(fail_reason),
                    "raised": tracebacks.raised(fail_reason) is not None, "hint": _hint(fail_reason)})
    return out


def _user_frame(conn: sqlite3.Connection, compile: int, file: str | None, line: int | None):
    """The user's frame of a failed compile: torch's texts first, then its dynamo_start stack, then the frame
    compilation_metrics name."""
    texts = [payload_text(conn, digest) for (digest,) in conn.execute(
        "SELECT payload FROM artifacts WHERE compile = ? AND name IN (?, ?) AND payload IS NOT NULL "
        "ORDER BY name != ?, id", (compile, *TEXTS, TEXTS[0]))]
    found = tracebacks.user_frame(*texts)
    if found:
        return found
    stack = conn.execute("""SELECT f.filename, f.line, f.name, f.loc FROM compiles c JOIN frames f
                            ON f.envelope_id = c.dynamo_start AND f.stack = 'stack' WHERE c.id = ?
                            ORDER BY f.depth DESC""", (compile,)).fetchall()
    for path, at, name, loc in stack:
        if tracebacks.is_user_file(path) and at is not None:
            return tracebacks.UserFrame(path, at, name or "", loc or "")
    return tracebacks.UserFrame(file, line) if file and line is not None else None


SPECIALIZED = re.compile(r"specialized it to be a constant \((?P<value>[^)]+)\)")


def _specialized(conn: sqlite3.Connection, run: int, reason: str | None) -> tuple | None:
    """For a constraint torch says the code specialized ("... specialized it to be a constant (4)"): the user line of
    the run's specialization to that value, and torch's reason for it."""
    said = SPECIALIZED.search(reason or "")
    if not said:
        return None
    found = conn.execute(f"""
        SELECT {USER_LINE.format(envelope='g.envelope_id')}, g.reason FROM compiles c JOIN guards g ON g.compile = c.id
        WHERE c.run_id = ? AND g.origin = 'symbolic_shape_specialization' AND g.value = ? ORDER BY g.id LIMIT 1""",
                         (run, said["value"])).fetchone()
    if not found or not found[0]:
        return None
    where, _, source = found[0].partition("  ")
    path, _, at = where.rpartition(":")
    return tracebacks.UserFrame(path, int(at), "", source.strip()), found[1]


def _hint(reason: str | None) -> str:
    """torch's first hint of a reason ("Hint: ..."), if any."""
    hints = [line.strip()[len("Hint:"):].strip() for line in (reason or "").splitlines()
             if line.strip().startswith("Hint:")]
    return hints[0] if hints else ""


def groups(rows: list[dict]) -> list[list[dict]]:
    """Failures that read the same (type, reason, user line), the largest first, in log order otherwise."""
    by: dict[tuple, list[dict]] = {}
    for row in rows:
        by.setdefault((row["type"], row["reason"], row["frame"]), []).append(row)
    return sorted(by.values(), key=lambda hits: -len(hits))


def compiles_named(hits: list[dict], world: list | None = None) -> str:
    """`[0/0] uses_broken, [0/0] suppressed`; a compile id on several ranks once, with its ranks."""
    by: dict[tuple, list] = {}
    for hit in hits:
        by.setdefault((hit["compile_id"], hit["function"] or ""), []).append(hit["rank"])
    named = []
    for (compile_id, function), ranks in by.items():
        on = f" on {rank_list([r for r in ranks if r is not None], world)}" if any(r is not None for r in ranks) else ""
        named.append(f"[{compile_id}] {function}".rstrip() + on)
    return ", ".join(named[:8]) + (f" and {plural(len(named) - 8, 'more')}" if len(named) > 8 else "")


def advice(first: dict) -> str:
    """What to try about one failure: where to change the code, or how to rerun the compiler alone."""
    frame = first["frame"]
    where = f" at {short_location(f'{frame.file}:{frame.line}')}" if frame else ""
    if first["type"] in ("BackendCompilerFailed", "InductorError"):
        return (f"The compiler raised{where}: fix it there, or rerun compile [{first['compile_id']}] alone from its "
                f"fx_graph_runnable artifact (when logged) to debug it.")
    if first["specialized"]:
        return (f"The code{where} specialized that dimension to a constant ({first['specialized']}): change that line "
                f"to keep it dynamic, or ask for it with `Dim.AUTO` / `maybe_mark_dynamic` as torch says.")
    if first["raised"]:
        return (f"Your code raised this{where}; it raises the same without torch.compile: fix it there, or keep the "
                f"call that raises out of the compiled function.")
    hint = f" torch's hint: {short(first['hint'], 200)}" if first["hint"] else ""
    return f"Change the code{where} so Dynamo can trace it.{hint}"


@check("failures", "error", 10, "Failed compiles",
       "A compile ended with an exception: its compilation_metrics carry a `fail_type` (`Unsupported`, "
       "`BackendCompilerFailed`, `InductorError`, …) and it installed no compiled code. The error reached the caller, "
       "or the frame ran eagerly (errors suppressed). The recompile limit is a finding of its own, not a failed "
       "compile.",
       "Read torch's reason at the user's line it names; the compile's `dynamo_error` artifact has the whole "
       "traceback, and a compiler error (BackendCompilerFailed, InductorError) reruns alone from the compile's "
       "`fx_graph_runnable` script, when logged.")
def failures(conn: sqlite3.Connection, run: int, context: Context):
    grouped = groups(failed(conn, run))
    found = []
    for hits in grouped[:SHOWN]:
        first = hits[0]
        where = f" at {first['frame'].where()}" if first["frame"] else ""
        text = (f"{plural(len(hits), 'failed compile')}, {first['type']}{where}: "
                f"{tracebacks.quote(first['reason'] or 'no reason logged')} ({compiles_named(hits, processes(context))}).")
        found.append(context.finding(len(hits), text, compile=first["compile"], next_steps=advice(first),
                                     items=[hit["compile"] for hit in hits]))
    rest = [hit for hits in grouped[SHOWN:] for hit in hits]
    if rest:
        kinds = sorted({hit["type"] for hit in rest})
        found.append(context.finding(len(rest), f"{plural(len(rest), 'more failed compile')} "
                                                f"({', '.join(kinds)}): the failures query lists them.", "failures"))
    return found
