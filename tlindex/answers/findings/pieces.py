"""The checks of a vLLM run's piecewise compilation: pieces that missed the cache alone, compile calls a restart
abandoned, and the slowest compile range (tlindex.answers.vllm)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import plural
from tlindex.answers.vllm import compile_calls, has_vllm, lone_misses, slowest_range


def calls(context: Context) -> list:
    """vLLM's compile calls of the run, read once (none when the run is no vLLM run)."""
    return context.shared("vllm_calls", lambda: compile_calls(context.conn, context.run)[0]
                          if has_vllm(context.conn, context.run) else [])


@check("vllm_cache_miss", "warning", 60, "A vLLM piece missed the cache alone",
       "vLLM splits each Dynamo graph at its attention ops into pieces and compiles each piece per compile "
       "range. One piece missed the cache where every other piece of its range hit: that piece's graph is not "
       "the one cached.",
       "Open the vLLM page and compare the piece's graph with the run that filled the cache (`tlindex diff`): "
       "what changed there is what cost the compile.")
def vllm_cache_miss(conn: sqlite3.Connection, run: int, context: Context):
    found = calls(context)
    misses = lone_misses(found)
    if not misses:
        return []
    first = misses[0]
    where = (f"size {first['compile_range_start']}" if first["is_single_size"]
             else f"range {first['compile_range_start']}–{first['compile_range_end']}")
    call = f" of compile call {first['compile_call']}" if len(found) > 1 else ""
    more = f" (and {plural(len(misses) - 1, 'more piece')})" if len(misses) > 1 else ""
    return [context.finding(len(misses), f"vLLM piece {first['submod_name']} missed the cache at {where}{call} "
                                         f"where every other piece of that range hit: its graph changed{more}.",
                            "vllm_pieces")]


@check("vllm_abandoned_call", "info", 61, "A vLLM compile call was abandoned",
       "Dynamo restarted its analysis after vLLM's backend had begun compiling pieces: the pieces of that "
       "attempt were cut short and never used, and the next attempt compiled them again.",
       "Usually harmless, but it costs compile time: the restart reason (e.g. `TensorifyScalarRestartAnalysis`) "
       "on the vLLM page says what made Dynamo start over.")
def vllm_abandoned_call(conn: sqlite3.Connection, run: int, context: Context):
    found = []
    for call in calls(context):
        if call.abandoned is not None:
            why = f" ({call.abandoned})" if call.abandoned else ""
            ids = ", ".join(f"[{cid}]" for _, cid in call.compiles)
            found.append(context.finding(call.started, f"vLLM compile call {call.number} {ids} was abandoned: "
                                         f"Dynamo restarted its analysis{why} after the backend began, cutting "
                                         f"{plural(call.started, 'piece compile')} short; the next attempt "
                                         f"compiled again.", "vllm_pieces"))
    return found


@check("vllm_slowest_range", "info", 62, "vLLM's slowest compile range",
       "The compile range (a dynamic range of token counts, or one size) whose pieces took longest to compile, "
       "against the time of every range.",
       "Each size vLLM compiles for costs this again: compile fewer sizes when start-up time matters, or keep "
       "the cache so the next start loads them.")
def vllm_slowest_range(conn: sqlite3.Connection, run: int, context: Context):
    found = calls(context)
    slowest = slowest_range(found)
    if not slowest:
        return []
    call, found_range = slowest
    total = round(sum(r.seconds for c in found for r in c.ranges), 3)
    of_call = f" of compile call {call.number}" if len(found) > 1 else ""
    return [context.finding(len(found_range.compiled), f"vLLM's slowest compile range: {found_range.label}{of_call}, "
                                                       f"{found_range.seconds:.2f} s of {total:.2f} s over "
                                                       f"{plural(len(found_range.compiled), 'piece')}.",
                            "vllm_pieces")]
