"""The checks of a run's compiles: graph breaks (the group to fix first), the slowest compile and cache misses.
Counts come from `run_health`, as the trend and the run page's (failures: failures.py; recompiles: recompiles.py)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.artifacts import payload_text
from tlindex.answers.findings import tracebacks
from tlindex.answers.findings.ranks import processes
from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import group_ranks, plural, rank_list, short, short_location
from tlindex.answers.health import run_health
from tlindex.answers.top_breaks import break_type, top_graph_breaks


def health(context: Context) -> dict:
    """The counts the trend and the run page show (tlindex.answers.health), read once per run."""
    return context.shared("health", lambda: run_health(context.conn, context.run, (
        "graph_breaks", "recompiles", "cache_misses", "cache_bypasses", "cache_lookups")) or {})


def break_groups(context: Context) -> list[dict]:
    """The run's graph-break groups as the graph-breaks page groups and orders them (queries/top_graph_breaks.sql:
    by torch's type and the user line), costliest first."""
    return context.shared("break_groups", lambda: top_graph_breaks(context.conn, context.run, limit=MAX_GROUPS))


MAX_GROUPS = 100_000  # every group of a run: the sentence counts them


FIX_FIRST = "the group that threw away the most compile time in analysis restarts, then the one that broke most"


def described(conn: sqlite3.Connection, group: dict) -> tuple[str, str, bool]:
    """A graph-break group's type and user line in words: torch's own (`gb0025 “title”`, `dir/f.py:12`), except
    when torch's title is its generic header ("Observed exception"): then the exception the code raised, and the
    user's frame of the traceback torch printed (and True: the user's code raised it)."""
    kind = short(break_type(group), 160)
    where = short_location(group["location"]) if group["location"] else ""
    if not tracebacks.is_generic(group["title"]) or group["compile"] is None:
        return kind, where, False
    texts = [payload_text(conn, digest) for (digest,) in conn.execute(
        "SELECT payload FROM artifacts WHERE compile = ? AND name = 'dynamo_graph_break_reason' "
        "AND payload IS NOT NULL ORDER BY id LIMIT 4", (group["compile"],))]
    exception = next((found for found in map(tracebacks.raised, texts) if found), None)
    frame = tracebacks.user_frame(*texts)
    if exception:
        kind = f"{group['gb'] + ' ' if group['gb'] else ''}{tracebacks.quote(exception, 160)}"
    return kind, frame.where() if frame else where, bool(exception)


@check("graph_breaks", "warning", 30, "Graph breaks",
       "Dynamo met code it could not put in the graph (a print, a data-dependent branch, an unsupported call): "
       "it compiled the graph up to there, ran that code eagerly and went on in a resume function, compiled as "
       "a frame of its own. Each break usually costs an analysis restart, and smaller graphs optimize less.",
       "Open graph_breaks and fix the costliest group first (" + FIX_FIRST + "), at the user line it names "
       "(torch's hint says how); `fullgraph=True` turns the first break into an error with its stack.")
def graph_breaks(conn: sqlite3.Connection, run: int, context: Context):
    groups, count = break_groups(context), health(context).get("graph_breaks") or 0
    if not (count or groups):
        return []
    if not groups:
        return [context.finding(count, f"{plural(count, 'graph break')}.", "top_graph_breaks")]
    first = groups[0]  # the page's order: restart time thrown away, then breaks
    kind, where, raised = described(conn, first)
    at = f" at {where}" if where else ""
    cost = (f", {first['restart_s']:.2f} s of compile time thrown away by its restarts" if first["restart_s"]
            else "")
    text = (f"{plural(count, 'graph break')} in {plural(len(groups), 'group')} (type and user line); the costliest: "
            f"{kind}{at} ×{first['breaks']}{cost}.")
    line = f" at {short_location(first['location'])}" if first["location"] and not raised else \
        (f" at {where.split(' `')[0]}" if where else "")
    hint = ("your code raises it without torch.compile too: fix it there, or keep that call out of the compiled "
            "function" if raised else f"torch's hint: {short(first['hints'][0], 200)}" if first["hints"] else
            "`fullgraph=True` turns it into an error with its stack")
    return [context.finding(count, text, "top_graph_breaks", compile=first["compile"],
                            next_steps=f"Change the code{line}; {hint}.".replace("..", "."))]


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
                               f"{total:.2f} s of compile time.", compile=row,
                            next_steps=f"Open compile [{compile_id}]{where}: its timeline splits the {seconds:.2f} s "
                                       f"into phases.")]


def each_of(ranks: list, world: list) -> str:
    """"on each rank" when they are all the run's, else "on each of ranks 0–2"."""
    return "on each rank" if set(ranks) == set(world) else f"on each of {rank_list(ranks, world)}"


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
    per_rank = {rank: (plural(m, "cache miss", "cache misses") + (f", {plural(b, 'bypass', 'bypasses')}" if b else "")
                       + f" in {plural(n, 'lookup')}")
                for rank, m, b, n in conn.execute("""
        SELECT c.rank, sum(e.result = 'miss'), sum(e.result = 'bypass'), count(*)
        FROM compiles c JOIN cache_events e ON e.compile = c.id WHERE c.run_id = ? AND c.rank IS NOT NULL
        GROUP BY c.rank""", (run,))}
    ranks = ""
    if len(per_rank) > 1:  # the same on every rank said once, else each group of ranks
        ranks = (f": {next(iter(per_rank.values()))} {each_of(list(per_rank), processes(context))}"
                 if len(set(per_rank.values())) == 1 else f": {group_ranks(per_rank)}")
    reasons = [reason for (reason,) in conn.execute(
        "SELECT DISTINCT e.reason FROM compiles c JOIN cache_events e ON e.compile = c.id WHERE c.run_id = ? "
        "AND e.result = 'bypass' AND e.reason IS NOT NULL ORDER BY e.id LIMIT 3", (run,))]
    why = f"; bypassed: {short(reasons[0], 160)}" if reasons else ""
    text = (f"{plural(misses, 'cache miss', 'cache misses')} and {plural(bypasses, 'bypass', 'bypasses')} in "
            f"{plural(lookups, 'cache lookup')}{ranks}{why}.")
    return [context.finding(misses + bypasses, text, "cache",
                            next_steps=None if bypasses else "Expected on a cold start; on a warm start, compare "
                                                            "with a run that hit (`tlindex diff`).")]
