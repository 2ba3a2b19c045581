"""The checks of a run's compiles: failures, the recompile limit, graph breaks, recompiles, the slowest compile,
cache misses and the costliest graph break. Counts come from `run_health`, as the trend and the run page's."""

from __future__ import annotations

import sqlite3

from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import plural, short, short_location
from tlindex.answers.health import run_health
from tlindex.answers.top_breaks import break_type, top_graph_breaks
from tlindex.store.kinds import RECOMPILE


def health(context: Context) -> dict:
    """The counts the trend and the run page show (tlindex.answers.health), read once per run."""
    return context.shared("health", lambda: run_health(context.conn, context.run, (
        "graph_breaks", "recompiles", "cache_misses", "cache_bypasses", "cache_lookups")) or {})


def break_groups(context: Context) -> list[dict]:
    """The run's graph-break groups as the graph-breaks page groups and orders them (queries/top_graph_breaks.sql:
    by torch's type and the user line), costliest first: one reading for both graph-break findings."""
    return context.shared("break_groups", lambda: top_graph_breaks(context.conn, context.run, limit=MAX_GROUPS))


MAX_GROUPS = 100_000  # every group of a run: the sentence counts them and picks the most frequent


@check("failures", "error", 10, "Failed compiles",
       "A compile ended with an exception: its compilation_metrics carry a `fail_type` (`Unsupported`, "
       "`BackendCompilerFailed`, `InductorError`, …) and it installed no compiled code. The error reached the caller, "
       "or the frame ran eagerly (errors suppressed, or the recompile limit).",
       "Read `fail_reason` at the user frame it names (the failures query; the compile's `dynamo_error` artifact has the "
       "whole traceback); a compiler error (BackendCompilerFailed, InductorError) reruns alone from the compile's "
       "`fx_graph_runnable` script, when logged.")
def failures(conn: sqlite3.Connection, run: int, context: Context):
    rows = conn.execute("SELECT fail_type, count(*) FROM compiles WHERE run_id = ? AND status = 'error' "
                        "GROUP BY fail_type ORDER BY 2 DESC, 1", (run,)).fetchall()
    if not rows:
        return []
    total = sum(n for _, n in rows)
    kinds = ", ".join(f"{kind} ×{n}" for kind, n in rows)
    return [context.finding(total, f"{plural(total, 'compile')} failed: {kinds}.", "failures")]


@check("recompile_limit", "warning", 20, "Recompile limit hit",
       "A function was compiled again and again until `torch._dynamo.config.recompile_limit` (8 by default) was "
       "reached: Dynamo gave up on it, and its later calls run eagerly, without compiled code.",
       "Read its recompile reasons: the guard that keeps failing names the input that changes (a shape, a dtype, "
       "a Python number); mark that dimension dynamic (`torch._dynamo.mark_dynamic`) or stop varying that value, "
       "rather than raising the limit.")
def recompile_limit(conn: sqlite3.Connection, run: int, context: Context):
    count, names = conn.execute("SELECT count(*), group_concat(DISTINCT co_name) FROM compiles WHERE run_id = ? "
                                "AND fail_reason LIKE 'Dynamo recompile limit exceeded%'", (run,)).fetchone()
    if not count:
        return []
    return [context.finding(count, f"{short(names, 60) or 'a function'} hit the recompile limit "
                                   f"({plural(count, 'time')}): Dynamo gave up compiling it.", "recompile_reasons")]


@check("graph_breaks", "warning", 30, "Graph breaks",
       "Dynamo met code it could not put in the graph (a print, a data-dependent branch, an unsupported call): "
       "it compiled the graph up to there, ran that code eagerly and went on in a resume function, compiled as "
       "a frame of its own. Each break usually costs an analysis restart, and smaller graphs optimize less.",
       "Open graph_breaks and fix the most frequent reason first, at the user line it names (torch's hint says "
       "how); `fullgraph=True` turns the first break into an error with its stack.")
def graph_breaks(conn: sqlite3.Connection, run: int, context: Context):
    groups, count = break_groups(context), health(context).get("graph_breaks") or 0
    if not (count or groups):
        return []
    frequent = ""
    if groups:
        top = max(groups, key=lambda group: group["breaks"])  # the first of the page's order among the largest
        where = f" at {short_location(top['location'])}" if top["location"] else ""
        frequent = (f" in {plural(len(groups), 'group')} (type and user line); "
                    f"most frequent: {short(break_type(top), 160)}{where} ×{top['breaks']}")
    return [context.finding(count, f"{plural(count, 'graph break')}{frequent}.", "top_graph_breaks",
                            compile=groups[0]["compile"] if len(groups) == 1 else None)]


@check("recompiles", "warning", 40, "Recompiles",
       "A function already compiled was compiled again, because on a call the guards of every compiled version "
       "failed: a new shape, dtype or Python value, or changed global state such as grad mode. Its compile id "
       "counts up ([0/0], then [0/1]) and the compile time is spent again.",
       "Read the reasons (`recompile_reasons`): one recompile after a shape change is expected (Dynamo then makes "
       "that dimension dynamic); more mean a value that changes call after call: mark it dynamic, pass it as a "
       "tensor or keep it constant.")
def recompiles(conn: sqlite3.Connection, run: int, context: Context):
    count = health(context).get("recompiles")
    if not count:
        return []
    functions, first = conn.execute(f"""
        SELECT count(DISTINCT coalesce(co_name, '') || '@' || coalesce(frame_id, '')),
               (SELECT recompile_reason FROM compiles WHERE run_id = ? AND {RECOMPILE}
                AND recompile_reason IS NOT NULL ORDER BY id LIMIT 1)
        FROM compiles WHERE run_id = ? AND {RECOMPILE}""", (run, run)).fetchone()
    return [context.finding(count, f"{plural(count, 'recompile')} of {plural(functions, 'function')}; "
                                   f"first reason: “{short(first) or 'not logged'}”.", "recompile_reasons")]


@check("slowest_compile", "info", 90, "Slowest compile",
       "The compile that took longest (its compile time: tracing and compiling its frame, which holds "
       "AOTAutograd and Inductor for the forward, and compiling its backward graph at the first backward call). "
       "Shown against the run's total compile time.",
       "Open the compile, whose timeline splits the time into phases: a cold cache and autotuning are the usual "
       "causes, and a cache directory (`TORCHINDUCTOR_CACHE_DIR`) kept between runs lets the next run load it.")
def slowest_compile(conn: sqlite3.Connection, run: int, context: Context):
    slowest = conn.execute("""
        SELECT t.compile, t.compile_id, c.co_name, t.rank, t.compile_time_s,
               (SELECT sum(compile_time_s) FROM compile_times WHERE run_id = ?)
        FROM compile_times t JOIN compiles c ON c.id = t.compile WHERE t.run_id = ? AND t.compile_time_s IS NOT NULL
        ORDER BY t.compile_time_s DESC, t.compile LIMIT 1""", (run, run)).fetchone()
    if not slowest:
        return []
    row, compile_id, name, rank, seconds, total = slowest
    where = f" on rank {rank}" if rank is not None else ""
    return [context.finding(1, f"Slowest compile: [{compile_id}] {name or ''}{where}, {seconds:.2f} s of "
                               f"{total:.2f} s of compile time.", compile=row)]


@check("cache", "info", 100, "Cache misses",
       "Lookups of Inductor's FX graph cache or of the AOTAutograd cache that missed (compiled from scratch, "
       "then saved) or bypassed (the graph cannot be cached; the artifact says why). Misses are expected on a "
       "cold start.",
       "Open the cache query: a bypass gives its reason; misses on a warm start mean the cache key changed, so "
       "compare with a run that hit (`tlindex diff`).")
def cache(conn: sqlite3.Connection, run: int, context: Context):
    misses, bypasses, lookups = (health(context).get(key) or 0
                                 for key in ("cache_misses", "cache_bypasses", "cache_lookups"))
    if not (lookups and (misses or bypasses)):
        return []
    return [context.finding(misses + bypasses, f"{plural(misses, 'cache miss', 'cache misses')} and "
                                               f"{plural(bypasses, 'bypass', 'bypasses')} in "
                                               f"{plural(lookups, 'cache lookup')}.", "cache")]


@check("top_graph_break", "info", 110, "Costliest graph break",
       "The graph break that cost the run most: its breaks grouped by torch's graph-break type and user "
       "location, with the compile time thrown away by the analysis restarts they caused.",
       "Fix this one first (torch's hint says how, when it gives one); the graph breaks page ranks the others by "
       "cost, across runs too.")
def top_graph_break(conn: sqlite3.Connection, run: int, context: Context):
    groups = break_groups(context)  # queries/top_graph_breaks.sql, the graph breaks page's order
    if not groups:
        return []
    group = groups[0]
    where = f" at {short_location(group['location'])}" if group["location"] else ""
    cost = (f", {group['restart_s']:.2f} s of compile time thrown away by the restarts it caused"
            if group["restart_s"] else ", no restart")
    hint = f"; torch's hint: {short(group['hints'][0], 160)}" if group["hints"] else ""
    text = f"Costliest graph break: {short(break_type(group), 120)}{where} ×{group['breaks']}{cost}{hint}"
    return [context.finding(group["breaks"], text.rstrip(".") + ".", "top_graph_breaks", compile=group["compile"])]
