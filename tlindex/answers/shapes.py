"""A compile's dynamic shapes explained: each symbol with where it came from (its source, the user line that created
it), its specializations (value, reason, line), and, for an input this compile recompiled on, the change that keeps
it dynamic from the first compile (the canned query recompile_reasons' group of it); `change`, what stops the
recompiles of an input, as the recompile findings and the compile page say it."""

from __future__ import annotations

import re
import sqlite3

from tlindex.answers.queries import load_queries, run_sql

# The innermost frame of an envelope's user stack that is the user's (not Python's nor an installed package's).
USER_LINE = """(SELECT f.filename || ':' || f.line || coalesce('  ' || f.loc, '') FROM frames f
    WHERE f.envelope_id = {envelope} AND f.stack = 'user_stack' AND f.filename NOT LIKE '%-packages/%'
      AND f.filename NOT LIKE '%/lib/python3.%' AND f.filename NOT LIKE '<%' ORDER BY f.depth DESC LIMIT 1)"""


def symbols(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """A compile's symbols, each once, in the order it first logged them, with the user line that created each
    (`line`), its specializations (`specialized`: value, reason, line) and, when this compile recompiled on its
    source, how to keep it dynamic from the start (`keep_dynamic`)."""
    cursor = conn.execute(f"""
        SELECT symbol, unbacked, value, value_range, source, min({USER_LINE.format(envelope='s.envelope_id')}) AS line
        FROM symbols s WHERE compile = ? GROUP BY symbol, unbacked, value, value_range, source ORDER BY min(id)""",
                          (compile,))
    found = [dict(zip([d[0] for d in cursor.description], row)) for row in cursor]
    special: dict[str, list[dict]] = {}
    for symbol, value, reason, line in conn.execute(f"""
            SELECT DISTINCT symbol, value, reason, coalesce({USER_LINE.format(envelope='g.envelope_id')}, user_code)
            FROM guards g WHERE compile = ? AND origin = 'symbolic_shape_specialization' ORDER BY id""", (compile,)):
        special.setdefault(symbol, []).append({"value": value, "reason": reason, "line": line})
    advice = keep_dynamic(conn, compile)
    for row in found:
        row["specialized"] = special.get(row["symbol"], [])
        row["keep_dynamic"] = advice.get(row["source"])
    return found


def keep_dynamic(conn: sqlite3.Connection, compile: int) -> dict[str, str]:
    """The inputs this compile recompiled on (the newest cache entry's guard, as recompile_reasons groups them), each
    with the change that keeps it dynamic from the first compile."""
    row = conn.execute("SELECT run_id, rank, compile_id, co_name, frame_compile_id FROM compiles WHERE id = ?",
                       (compile,)).fetchone()
    if row is None or not row[4]:
        return {}
    run, rank, compile_id, name, _ = row
    cursor = run_sql(conn, load_queries()["recompile_reasons"].sql,
                     {"run": str(run), "rank": "" if rank is None else str(rank)})
    columns = [d[0] for d in cursor.description]
    out = {}
    for group in (dict(zip(columns, values)) for values in cursor):
        ids = {item.split(" ×")[0] for item in (group["compile_ids"] or "").split(", ")}
        if group["co_name"] == name and compile_id in ids and group["input"] and group["guard"] in ("size", "stride"):
            out[group["input"]] = change(group)
    return out


def expression(source: str | None) -> str:
    """A guarded source as the user's code names it: `L['x'].size()[0]` -> `x.size()[0]`, `L['args'][0]` -> `args[0]`."""
    return re.sub(r"[LG]\['([^']*)'\]", r"\1", source or "")


def change(row: dict) -> str:
    """The change that stops the recompiles of one group (its input and kind of guard)."""
    name, kind = expression(row["input"]), row["guard"]
    if kind in ("size", "stride") and name.endswith("]"):
        tensor, _, dim = name.rpartition(f".{kind}()[")
        dim = dim.rstrip("]")
        made = (" torch made it dynamic by itself after this recompile; marking it first saves the recompile."
                if row["dynamic"] else "")
        return (f"mark that dimension dynamic before the first call: `torch._dynamo.mark_dynamic({tensor}, {dim})` "
                f"(or `torch._dynamo.maybe_mark_dynamic({tensor}, {dim})` if it may stay static).{made}")
    if kind == "value":
        made = " (torch already made it dynamic by itself)" if row["dynamic"] else ""
        return f"`{name}` is a Python number that varies{made}: pass it as a tensor, or keep it constant."
    if kind == "global state":
        return f"call the function under one {name} throughout (or compile each setting's path apart)."
    if kind in ("dtype", "device", "requires_grad"):
        return f"keep `{name}`'s {kind} the same from call to call (convert it once, before the compiled call)."
    return f"read the guard that failed ({' '.join((row['failed_guard'] or '').split())}) and keep what it checks the same."
