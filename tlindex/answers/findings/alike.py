"""The checks that compare ranks by what they did: the groups of ranks that compiled the same (same compiles, graphs
and guards, rank_divergence's `group` rows) and a rank that compiled as others did but far slower (`slow_rank`)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.findings.ranks import divergence_rows, processes, rank_names
from tlindex.answers.findings.registry import Context, check
from tlindex.answers.findings.words import MAX_GROUPS, plural, rank_list

SHOWN = 4  # groups that differ from the largest one named in the sentence (every one is in `items`)


@check("rank_groups", "info", 95, "Ranks compared",
       "Ranks grouped by what they compiled: the same compiles (matched by code object, not by compile id, so ids "
       "shifted by an export or any extra frame still match), the same graphs and the same guards. One group: the "
       "ranks did the same work.",
       "When ranks differ, the divergence findings say where; open rank_divergence for every group's ranks.")
def rank_groups(conn: sqlite3.Connection, run: int, context: Context):
    groups = [(rank_names(row["ranks"]), row["detail"]) for row in divergence_rows(context).get("group", [])]
    if not groups:
        return []
    world = processes(context)
    items = [{"ranks": ", ".join(map(str, ranks)), "like": ranks[0], "detail": detail} for ranks, detail in groups]
    if len(groups) == 1:
        return [context.finding(1, f"{rank_list(world, world).capitalize()} compiled the same: {groups[0][1]}.",
                                "rank_divergence", items=items)]
    ordered = sorted(groups, key=lambda group: (-len(group[0]), world.index(group[0][0])))
    (first, said), rest = ordered[0], ordered[1:]
    rows = divergence_rows(context)
    missing = [(row["compile_id"], set(rank_names(row["ranks"]))) for row in rows.get("missing_compile", [])]
    versions = {kind: _versions(rows.get(kind, [])) for kind in ("graph", "guards")}
    behind = {rank: row["compile_id"] for row in rows.get("behind", []) for rank in rank_names(row["ranks"])}
    parts = [f"{_like(ranks, world)} ({detail}{_differs(ranks, first, missing, versions)}"
             f"{f'; still compiling [{behind[ranks[0]]}]' if ranks[0] in behind else ''})" for ranks, detail in rest[:SHOWN]]
    more = f"; and {plural(len(rest) - SHOWN, 'more group')}" if len(rest) > SHOWN else ""
    differ = sum(len(ranks) for ranks, _ in rest)
    if len(first) == 1:  # every group one rank: none is like another
        text = f"No two ranks compiled the same: {rank_list(first)} ({said}); {'; '.join(parts)}{more}."
    else:
        text = f"{_like(first, world)} ({said}); {differ:,} differ{'s' * (differ == 1)}: {'; '.join(parts)}{more}."
    return [context.finding(len(groups), text[:1].upper() + text[1:], "rank_divergence", items=items)]


def _like(ranks: list, world: list) -> str:
    """"192 of 256 ranks (all but every 4th from 1) like rank 0"; a group of one is that rank."""
    return rank_list(ranks, world) if len(ranks) == 1 else f"{rank_list(ranks, world)} like rank {ranks[0]}"


def _versions(rows: list[dict]) -> dict[str, dict]:
    """{compile id: {rank: its version}} of rank_divergence's graph or guards rows (a graph's name kept apart)."""
    found: dict[str, dict] = {}
    for row in rows:
        name = str(row["detail"]).rsplit("version ", 1)[0]
        for rank in rank_names(row["ranks"]):
            found.setdefault(row["compile_id"], {})[rank] = name + str(row["detail"]).rsplit(" of ", 1)[0]
    return found


def _differs(ranks: list, largest: list, missing: list[tuple[str, set]], versions: dict[str, dict]) -> str:
    """What a group compiled that the largest did not, the reverse (the missing_compile rows), and the compiles
    whose graphs or guards differ from the largest's (the graph and guards rows)."""
    mine, theirs = set(ranks), set(largest)
    extra = [cid for cid, where in missing if mine <= where and not theirs & where]
    lacking = [cid for cid, where in missing if theirs <= where and not mine & where]
    other = {kind: [cid for cid, by_rank in found.items()
                    if ranks[0] in by_rank and largest[0] in by_rank and by_rank[ranks[0]] != by_rank[largest[0]]]
             for kind, found in versions.items()}
    said = [f"also {_ids(extra)}" if extra else "", f"not {_ids(lacking)}" if lacking else "",
            *(f"other {kind} in {_ids(cids)}" for kind, cids in other.items() if cids)]
    return "".join(f"; {part}" for part in said if part)


def _ids(compile_ids: list[str]) -> str:
    shown = ", ".join(f"[{cid}]" for cid in compile_ids[:MAX_GROUPS])
    return shown + (f" and {len(compile_ids) - MAX_GROUPS} more" if len(compile_ids) > MAX_GROUPS else "")


@check("slow_rank", "warning", 59, "A rank compiled far slower",
       "A rank compiled what other ranks compiled (the same compiles, graphs and guards) but took far longer: more "
       "than 2 s and a quarter more than the median of those ranks. Until it catches up, the others wait for it at "
       "their next collective.",
       "Look at what differs on its machine: a cold compile cache (TORCHINDUCTOR_CACHE_DIR), a busy or slower host, "
       "autotuning; the timeline of its slowest compile splits the time into phases.")
def slow_rank(conn: sqlite3.Connection, run: int, context: Context):
    rows = divergence_rows(context).get("slow_rank", [])
    if not rows:
        return []
    world = processes(context)
    first = rows[0]
    others = [rank for row in rows[1:] for rank in rank_names(row["ranks"])]
    more = f" (and {rank_list(others, world)})" if others else ""
    return [context.finding(len(rows), f"{rank_list(rank_names(first['ranks']), world).capitalize()} compiled far "
                                       f"slower than the ranks that compiled the same: {first['detail']}{more}.",
                            "rank_divergence",
                            items=[{"ranks": row["ranks"], "detail": row["detail"]} for row in rows])]


def group_rows(found: list, world: list) -> list[dict]:
    """The rank_groups finding's groups as the run page's table shows them: the ranks as people say them and in
    full, the rank they are like, what they compiled; the largest group first."""
    items = next((finding.items for finding in found if finding.kind == "rank_groups"), [])
    rows = [{**item, "named": rank_list(rank_names(item["ranks"]), world), "count": len(rank_names(item["ranks"]))}
            for item in items]
    return sorted(rows, key=lambda row: -row["count"])
