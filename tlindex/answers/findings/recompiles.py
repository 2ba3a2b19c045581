"""The checks of a run's recompiles: the recompile limit, and recompiles by the input whose guard failed.

Both read the canned query recompile_reasons of the run (one definition: each recompile under the guard of its
newest cache entry, grouped by the guarded input and the kind of guard), and say the change that would stop it.
"""

from __future__ import annotations

import re
import sqlite3

from tlindex.answers.findings.compiles import health
from tlindex.answers.findings.failures import LIMIT_HIT
from tlindex.answers.findings.ranks import processes
from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import ordinal, plural, rank_list, short, short_location
from tlindex.answers.queries import load_queries, run_sql
from tlindex.answers.shapes import change, expression

LIMIT_SAID = re.compile(r"currently set to (\d+)")
SHOWN = 5  # inputs a recompiles sentence names (the others counted)


def reasons(context: Context) -> list[dict]:
    """recompile_reasons' rows of the run, read once."""
    def compute() -> list[dict]:
        cursor = run_sql(context.conn, load_queries()["recompile_reasons"].sql, {"run": str(context.run), "rank": ""})
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]
    return context.shared("recompile_reasons", compute)


def line_of(row: dict) -> str:
    """The user line a guard comes from (torch's comment `y = x * n  # dir/f.py:10 in f`): `dir/f.py:10 `y = x * n``."""
    code, _, where = (row.get("line") or "").rpartition("  # ")
    at = where.split(" in ")[0].strip()
    if not code or not re.search(r":\d+$", at):
        return ""
    return f"{short_location(at)} `{short(code.strip(), 80)}`"


def said(row: dict, world: list | None = None) -> str:
    """One group in words: `f's x.size()[0] (size: 4, 8) ×1 on rank 1 at dir/f.py:10 `y = x * n``."""
    what = f"`{expression(row['input'])}`" if row["input"] else f"“{short(row['failed_guard'], 100)}”"
    values = f": {short(row['values'], 80)}" if row["values"] else ""
    line = line_of(row)
    ranks = [int(r) for r in str(row.get("ranks") or "").split(",") if r.strip().lstrip("-").isdigit()]
    on = f" on {rank_list(ranks, world)}" if ranks else ""  # the same recompile on several ranks: one group, said once
    return f"{row['co_name'] or '?'}'s {what} ({row['guard']}{values}) ×{row['compiles']}{on}" + \
        (f" at {line}" if line else "")


@check("recompile_limit", "warning", 20, "Recompile limit hit",
       "A function was compiled again and again until `torch._dynamo.config.recompile_limit` (8 by default) was "
       "reached: Dynamo gave up on it, and its later calls run without compiled code (eagerly), or raise "
       "FailOnRecompileLimitHit when `fail_on_recompile_limit_hit` is set. It is not counted as a failed compile.",
       "Read its recompile reasons: the guard that keeps failing names the input that changes (a shape, a dtype, "
       "a Python number); mark that dimension dynamic (`torch._dynamo.mark_dynamic`) or stop varying that value, "
       "rather than raising the limit.")
def recompile_limit(conn: sqlite3.Connection, run: int, context: Context):
    rows = conn.execute(f"""
        SELECT c.id, c.compile_id, c.frame_compile_id, c.rank, c.fail_type, c.fail_reason,
               coalesce(c.co_name, (SELECT o.co_name FROM compiles o WHERE o.source_id = c.source_id
                                    AND o.generation = c.generation AND o.frame_id = c.frame_id
                                    AND o.co_name IS NOT NULL ORDER BY o.id LIMIT 1)) AS name
        FROM compiles c WHERE c.run_id = ? AND c.status = 'error' AND {LIMIT_HIT} ORDER BY c.id""", (run,)).fetchall()
    by: dict[tuple, list] = {}
    for row, compile_id, nth, rank, fail_type, reason, name in rows:
        limit = LIMIT_SAID.search(reason or "")
        key = (name or "a function", compile_id, int(limit[1]) if limit else nth, fail_type)
        by.setdefault(key, []).append((row, rank))
    groups = reasons(context)
    found = []
    for (name, compile_id, limit, fail_type), hits in by.items():
        ranks = [rank for _, rank in hits if rank is not None]
        on = f" on {rank_list(ranks, processes(context))}" if ranks else ""
        then = ("with fail_on_recompile_limit_hit set, it raised FailOnRecompileLimitHit to the caller"
                if fail_type == "FailOnRecompileLimitHit" else "it runs without compiling from then on")
        nth = int(compile_id.rsplit("/", 1)[-1]) + 1 if compile_id.rsplit("/", 1)[-1].isdigit() else None
        at = f" at [{compile_id}], its {ordinal(nth)} compile" if nth else f" at [{compile_id}]"
        cause = next((g for g in groups if g["co_name"] == name), None)
        why = f" ({said(cause, processes(context))})" if cause else ""
        text = f"{name} hit the recompile limit ({limit}){at}{on}: {then}{why}."
        found.append(context.finding(len(hits), text, "recompile_reasons", compile=hits[0][0],
                                     next_steps=(f"Stop the recompiles of {name}: {change(cause)}" if cause else None)))
    return found


@check("recompiles", "warning", 40, "Recompiles",
       "A function already compiled was compiled again, because on a call the guards of every compiled version "
       "failed: a new shape, dtype or Python value, or changed global state such as grad mode. Its compile id "
       "counts up ([0/0], then [0/1]) and the compile time is spent again.",
       "Read the reasons (`recompile_reasons`): one recompile after a shape change is expected (Dynamo then makes "
       "that dimension dynamic); more mean a value that changes call after call: mark it dynamic, pass it as a "
       "tensor or keep it constant.")
def recompiles(conn: sqlite3.Connection, run: int, context: Context):
    groups = reasons(context)
    count = sum(g["compiles"] for g in groups)
    total = health(context).get("recompiles") or 0
    if not total:
        return []
    functions = len({(g["co_name"], g["location"]) for g in groups})
    ordered = sorted(groups, key=lambda g: -g["compiles"])
    named = "; ".join(said(g, processes(context)) for g in ordered[:SHOWN])
    more = f"; {plural(len(ordered) - SHOWN, 'more input')}" if len(ordered) > SHOWN else ""
    unexplained = total - count
    without = f"; {plural(unexplained, 'recompile')} without a reason logged" if unexplained > 0 else ""
    text = (f"{plural(total, 'recompile')} of {plural(functions, 'function')}, by the input that changed: "
            f"{named}{more}{without}." if groups else f"{plural(total, 'recompile')}, without a reason logged.")
    top = ordered[0] if ordered else None
    next_steps = (f"Start with {top['co_name']}'s `{expression(top['input']) or top['guard']}`: {change(top)}"
                  if top else None)
    return [context.finding(total, text, "recompile_reasons", next_steps=next_steps,
                            items=[{"function": g["co_name"], "input": g["input"], "guard": g["guard"],
                                    "values": g["values"], "recompiles": g["compiles"],
                                    "compile_ids": g["compile_ids"]} for g in ordered])]
