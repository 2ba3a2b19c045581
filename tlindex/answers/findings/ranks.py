"""The checks of a multi-rank run: where its ranks part ways (the canned query rank_divergence, one check per
kind of divergence, naming the ranks) and graphs whose collectives differ from inductor's schedule."""

from __future__ import annotations

import sqlite3
from functools import partial

from tlindex.answers.findings.registry import Check, Context, check, register
from tlindex.answers.findings.words import group_ranks, plural, rank_list, short
from tlindex.answers.queries import load_queries, run_sql

HANG = "Ranks that disagree on which collectives to run, or in which order, can wait for each other forever: a hang."
ALIKE = "make the ranks' inputs (shapes, Python values) and code paths the same, then compare again."
# rank_divergence's kinds of finding (`time`, compile-time gaps, is noise here): severity, what diverges,
# what it means and what to try; registered in this order (their order among findings).
DIVERGENCE = {
    "missing_compile": (
        "error", "compile ids",
        "Some ranks compiled a compile id the others did not: the ranks took different paths through the code "
        "(a data-dependent branch, a rank-specific shape). " + HANG,
        "Open rank_divergence, then the compile found on some ranks only: its recompile reason or stack says "
        "what differed on those ranks; " + ALIKE),
    "collective_schedule": (
        "error", "collective schedules",
        "Inductor scheduled different collectives (all_reduce, all_gather, …) for the same compile id on "
        "different ranks. " + HANG,
        "Open the compile on each rank (its Collectives section) and compare their graphs; " + ALIKE),
    "execution_order": (
        "error", "the order compiled graphs ran in",
        "The ranks ran their compiled graphs in different orders (recorded by "
        "`torch._inductor.debug.record_and_log_graph_execution_order()`), so the collectives inside them pair "
        "up wrongly across ranks. " + HANG,
        "Open rank_divergence to see where the orders part, then the graphs there; " + ALIKE),
    "cache_pattern": (
        "warning", "cache hit/miss patterns",
        "The ranks hit and missed the compile caches differently: some compiled what others loaded, so their "
        "compile times differ and the fast ranks wait for the slow ones at their next collective.",
        "Usually harmless: ranks sharing a cache directory race to fill it. When start-up time matters, warm "
        "the cache before the job so every rank hits."),
    "cache": (
        "warning", "cache results of a compile id",
        "The same compile id hit a cache on some ranks and missed on others.",
        "Usually a race on a shared cache directory; if its graph differs too, see that finding first."),
    "graph": (
        "warning", "graphs of a compile id",
        "The same compile id logged different graphs on different ranks (other ops, shapes or constants).",
        "Compare the versions (the compile page of each rank, or `tlindex diff` on two compiles): the first "
        "difference names the input or branch that differs; " + ALIKE),
    "tensor_meta": (
        "warning", "ops and output shapes",
        "Inductor's list of ops and output shapes for a compile id differs between ranks: the ranks compiled "
        "different graphs.",
        "Compare the compile's graphs across ranks, as for a divergence in graphs; " + ALIKE),
    "estimated_runtime": (
        "warning", "estimated runtimes",
        "Inductor's runtime estimates for a compile id differ between ranks: their graphs or shapes differ, "
        "and the slower rank makes the others wait at each collective.",
        "Compare the compile's graphs and shapes across ranks; " + ALIKE),
}


def divergence_rows(context: Context) -> dict[str, list[dict]]:
    """rank_divergence's rows of the run by kind, read once (none when ranks are not compared)."""
    def compute() -> dict[str, list[dict]]:
        by_kind: dict[str, list[dict]] = {}
        if context.divergence:
            for row in _rows(run_sql(context.conn, load_queries()["rank_divergence"].sql, context.params)):
                by_kind.setdefault(row["finding"], []).append(row)
        return by_kind
    return context.shared("rank_divergence", compute)


NAMED = 8  # compile ids a sentence names whole; past it, each group of ranks' first (the rest in `items`)


def diverging(kind: str, what: str, conn: sqlite3.Connection, run: int, context: Context):
    """One kind of rank_divergence's findings as one sentence naming the ranks and the compile ids that differ."""
    hits = divergence_rows(context).get(kind)
    if not hits:
        return []
    items = [{"compile_id": h["compile_id"], "ranks": h["ranks"], "detail": h["detail"]} for h in hits]
    if kind == "missing_compile":  # every rank's count, grouped, then each group of ranks' own compile ids
        groups = group_ranks(_compiles_by_rank(conn, run), lambda n: plural(n, "compile")) + ". "
        return [context.finding(len(hits), f"Ranks diverge in {what}: {groups}{_only_on(hits)}.", "rank_divergence",
                                items=items)]
    first = hits[0]
    where = f"[{first['compile_id']}] " if first["compile_id"] else ""
    others = [f"[{h['compile_id']}]" for h in hits[1:] if h["compile_id"]]
    more = (f" (also {', '.join(others)})" if others and len(hits) <= NAMED else
            f" (and {plural(len(hits) - 1, 'more compile id')})" if len(hits) > 1 else "")
    detail = first["detail"]
    if kind == "graph" and first["compile_id"]:
        versions = _versions_by_rank(conn, run, first["compile_id"], str(detail).split(":", 1)[0])
        if len(set(versions.values())) > 1:
            detail = f"{detail} ({group_ranks(versions)})"
    return [context.finding(len(hits), f"Ranks diverge in {what}: {where}{short(detail, 240)}{more}.",
                            "rank_divergence", items=items)]


def _only_on(hits: list[dict]) -> str:
    """"Only on rank 1: [0/1], [4/1] (present on 1 of 4 ranks); only on rank 3: [6/0] (…)": every compile id when
    there are few, else each group of ranks' first and how many more."""
    by_ranks: dict[str, list[dict]] = {}
    for hit in hits:
        by_ranks.setdefault(str(hit["ranks"]), []).append(hit)
    parts = []
    for ranks_text, found in by_ranks.items():
        ranks = [int(r) if r.strip().lstrip("-").isdigit() else r.strip() for r in ranks_text.split(",") if r.strip()]
        shown = found if len(hits) <= NAMED else found[:1]
        ids = ", ".join(f"[{h['compile_id']}]" for h in shown)
        more = f" and {plural(len(found) - len(shown), 'more')}" if len(found) > len(shown) else ""
        parts.append(f"only on {rank_list(ranks)}: {ids}{more} ({short(found[0]['detail'], 80)})")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:]


for order, (kind, (severity, what, explanation, next_steps)) in enumerate(DIVERGENCE.items(), 50):
    register(Check(f"divergence:{kind}", severity, order, f"Ranks diverge in {what}", explanation, next_steps,
                   partial(diverging, kind, what)))
del order, kind, severity, what, explanation, next_steps


@check("collectives_parity", "warning", 58, "Collectives differ from the schedule",
       "A compiled graph's generated code calls other collectives than Inductor scheduled for it (tlparse's "
       "parity check): a collective is missing, extra, or not waited for.",
       "Open the compile's Collectives section: it lines the schedule up with the calls in the output code. "
       "A difference there is worth reporting to PyTorch with the graph.")
def collectives_parity(conn: sqlite3.Connection, run: int, context: Context):
    if not context.divergence:
        return []
    parity = [r for r in _rows(run_sql(conn, load_queries()["collectives"].sql, context.params))
              if r.get("parity") == "mismatch"]
    if not parity:
        return []
    first = parity[0]
    return [context.finding(len(parity), f"{plural(len(parity), 'graph')} call other collectives than inductor "
                                         f"scheduled: [{first['compile_id']}] on rank {first['rank']} "
                                         f"({first['parity']}).", "collectives")]


def _compiles_by_rank(conn: sqlite3.Connection, run_id: int) -> dict[int | str, int]:
    """Compiles per process of the run, named as the comparison names them (a rank, or "1 (restart 1)")."""
    rows = conn.execute("""SELECT s.process, count(*) FROM compile_times c JOIN sources s ON s.id = c.source_id
                           WHERE c.run_id = ? AND s.process IS NOT NULL
                           GROUP BY s.process""", (run_id,)).fetchall()
    return {int(name) if name.lstrip("-").isdigit() else name: n for name, n in rows}


def _versions_by_rank(conn: sqlite3.Connection, run_id: int, compile_id: str, name: str) -> dict[int, str]:
    """Which version of a graph each rank logged for a compile id (numbered in order of first appearance)."""
    rows = conn.execute("""
        SELECT c.rank, group_concat(a.payload) FROM compiles c JOIN artifacts a ON a.compile = c.id
        WHERE c.run_id = ? AND c.compile_id = ? AND a.name = ? AND c.rank IS NOT NULL
        GROUP BY c.rank ORDER BY c.rank""", (run_id, compile_id, name)).fetchall()
    numbers: dict[str, int] = {}
    return {rank: f"version {numbers.setdefault(payloads, len(numbers) + 1)}" for rank, payloads in rows}


def _rows(cursor: sqlite3.Cursor) -> list[dict]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]
