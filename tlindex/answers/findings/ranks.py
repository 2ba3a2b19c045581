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
    "guards": (
        "warning", "guards of a compile",
        "The same compile installed different guards on different ranks: it specialized on a value that differs "
        "between ranks (the rank itself, a shape, a Python value), so each rank checks other conditions and may "
        "recompile where the others do not.",
        "Open the compile on two ranks (Guards) and compare: the guard that differs names the value; pass it as a "
        "tensor or mark it dynamic when it is meant to differ; " + ALIKE),
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
    """One kind of rank_divergence's findings as one sentence: the compiles that differ first, then the rank sets as
    people say them ("64 of 256 ranks (every 4th from 1)"); every row whole in `items`."""
    hits = divergence_rows(context).get(kind)
    if not hits:
        return []
    world = processes(context)
    items = [{"compile_id": h["compile_id"], "ranks": h["ranks"], "detail": h["detail"]} for h in hits]
    if kind == "missing_compile":  # each group of ranks' own compile ids, then every rank's count, grouped
        counts = group_ranks(compiles_by_process(context), lambda n: plural(n, "compile"), world)
        return [context.finding(len(hits), f"Ranks diverge in {what}: {_only_on(hits, world)}. Compiles per rank: "
                                           f"{counts}.", "rank_divergence", items=items)]
    subjects = _subjects(hits)
    (compile_id, subject), groups = next(iter(subjects.items()))
    where = f"[{compile_id}] " if compile_id else ""
    said = groups[0][1] if len(groups) == 1 else \
        group_ranks({rank: value for value, ranks in groups for rank in ranks}, lambda v: short(v, 120), world)
    others = [f"[{cid}]" + (f" {name}" if name else "") for cid, name in list(subjects)[1:] if cid]
    more = (f" (also {', '.join(dict.fromkeys(others))})" if others and len(subjects) <= NAMED else
            f" (and {plural(len(subjects) - 1, 'more')})" if len(subjects) > 1 else "")
    return [context.finding(len({cid for cid, _ in subjects}) or 1,
                            f"Ranks diverge in {what}: {where}{subject + ': ' if subject else ''}{said}{more}.",
                            "rank_divergence", items=items)]


def _subjects(hits: list[dict]) -> dict[tuple, list[tuple[str, list]]]:
    """The rows by what they compare ((compile id, graph or cache name)): each group of ranks' value and ranks, in
    the order of their first rank."""
    found: dict[tuple, list[tuple[str, list]]] = {}
    for hit in hits:
        detail = str(hit["detail"] or "")
        subject, value = detail.split(": ", 1) if hit["finding"] in ("graph", "cache") and ": " in detail else \
            ("", detail)
        if hit["finding"] in ("graph", "guards", "tensor_meta"):
            value = value.split(" of ", 1)[0]  # "version 1 of 2": the sentence says how many there are
        found.setdefault((hit["compile_id"], subject), []).append((value, rank_names(hit["ranks"])))
    return found


def _only_on(hits: list[dict], world: list) -> str:
    """"[0/1], [4/1] only on rank 1 (1 of 4 ranks); [6/0] only on 64 of 256 ranks (every 4th from 3)": every
    compile id when there are few, else each group of ranks' first and how many more."""
    by_ranks: dict[str, list[dict]] = {}
    for hit in hits:
        by_ranks.setdefault(str(hit["ranks"]), []).append(hit)
    parts = []
    for ranks_text, found in by_ranks.items():
        ranks = rank_names(ranks_text)
        shown = found if len(hits) <= NAMED else found[:1]
        ids = ", ".join(f"[{h['compile_id']}]" for h in shown)
        more = f" and {plural(len(found) - len(shown), 'more')}" if len(found) > len(shown) else ""
        named = rank_list(ranks, world)
        of = "" if " of " in named or named.startswith("all ") else f" ({len(ranks):,} of {len(world):,})"
        parts.append(f"{ids}{more} only on {named}{of}")
    return "; ".join(parts)


def rank_names(text: str | None) -> list[int | str]:
    """A `ranks` cell ("0, 2, 1 (restart 1)") as its processes: ranks as numbers, the others as named."""
    return [int(r) if r.lstrip("-").isdigit() else r for r in (part.strip() for part in str(text or "").split(","))
            if r]


def processes(context: Context) -> list[int | str]:
    """The run's ranked processes, as the comparison names them, in rank order (read once)."""
    def compute() -> list[int | str]:
        rows = context.conn.execute("""SELECT process FROM sources WHERE run_id = ? AND process IS NOT NULL
                                       GROUP BY process ORDER BY min(rank), min(coalesce(restart, 0)), min(pid)""",
                                    (context.run,)).fetchall()
        return [int(name) if name.lstrip("-").isdigit() else name for (name,) in rows]
    return context.shared("processes", compute)


def compiles_by_process(context: Context) -> dict[int | str, int]:
    """Compiles per process of the run, those rank_divergence compares (an export's records are no compile)."""
    rows = context.conn.execute("""
        SELECT s.process, count(c.id) FROM sources s
        LEFT JOIN compiles c ON c.source_id = s.id AND c.compile_id != '-/-'
                                AND (c.dynamo_start IS NOT NULL OR c.status != 'missing')
        WHERE s.run_id = ? AND s.process IS NOT NULL GROUP BY s.process""", (context.run,)).fetchall()
    return {int(name) if name.lstrip("-").isdigit() else name: n for name, n in rows}


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


def _rows(cursor: sqlite3.Cursor) -> list[dict]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]
