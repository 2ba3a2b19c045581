"""The findings as tlindex computed them before the registry of checks (tlindex/answers/findings/), kept verbatim
as the oracle of tests/test_findings_registry.py: the registry must say exactly what this said, run by run. A
finding whose sentence is changed on purpose is changed here too (or this file retired with its test)."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field

from tlindex.answers.health import run_health
from tlindex.answers.queries import load_queries, run_sql
from tlindex.answers.top_breaks import break_type, top_graph_breaks
from tlindex.answers.vllm import compile_calls, has_vllm, lone_misses, slowest_range
from tlindex.store.kinds import RECOMPILE

SEVERITIES = ("error", "warning", "info")
# rank_divergence findings -> (severity, what diverges); `time` (compile-time gaps) is noise here.
DIVERGENCE = {
    "missing_compile": ("error", "compile ids"),
    "collective_schedule": ("error", "collective schedules"),
    "execution_order": ("error", "the order compiled graphs ran in"),
    "cache_pattern": ("warning", "cache hit/miss patterns"),
    "cache": ("warning", "cache results of a compile id"),
    "graph": ("warning", "graphs of a compile id"),
    "tensor_meta": ("warning", "ops and output shapes"),
    "estimated_runtime": ("warning", "estimated runtimes"),
}


@dataclass
class Finding:
    severity: str                 # error, warning or info
    kind: str                     # failures, recompile_limit, graph_breaks, divergence:<what>, ...
    count: int
    text: str                     # one sentence
    query: str | None = None      # the canned query that shows the detail (with run=)
    params: dict = field(default_factory=dict)
    compile: int | None = None    # or the compile that shows it

    def as_dict(self) -> dict:
        return asdict(self)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def _short(text: str | None, limit: int = 140) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def findings(conn: sqlite3.Connection, run_id: int, divergence: bool = True) -> list[Finding]:
    """The findings of one run, most severe first (divergence=False skips the multi-rank comparison)."""
    run = {"run": str(run_id)}
    # the counts the trend and the run page show (tlindex.answers.health)
    health = run_health(conn, run_id, ("graph_breaks", "recompiles", "cache_misses", "cache_bypasses",
                                       "cache_lookups")) or {}
    found, graph_breaks, breaks = _first_findings(conn, run_id, run, health)  # (split in two here only)

    if divergence:
        try:
            found += _divergence(conn, run_id)
        except Exception as error:  # one finding that cannot be computed degrades alone, and says so
            found.append(Finding("warning", "not_computed", 0,
                                 f"The comparison of the ranks could not be computed ({type(error).__name__}: "
                                 f"{_short(str(error), 120)}); the other findings are complete.", None, {}))

    if has_vllm(conn, run_id):
        try:
            found += _vllm(conn, run_id)
        except Exception as error:  # degrades alone, as the rank comparison does
            found.append(Finding("warning", "not_computed", 0,
                                 f"vLLM's piece compiles could not be summed up ({type(error).__name__}: "
                                 f"{_short(str(error), 120)}); the other findings are complete.", None, {}))

    exports = export_issue_count(conn, run_id)
    if exports:
        found.append(Finding("warning", "export_issues", exports,
                             f"{_plural(exports, 'issue')} found during export (data-dependent errors, evaluated "
                             f"guards, fake kernels).", "export_issues", run))

    errors = conn.execute("""
        SELECT e.kind, count(*) FROM ingest_errors e JOIN sources s ON s.id = e.source_id
        WHERE s.run_id = ? GROUP BY e.kind ORDER BY 2 DESC""", (run_id,)).fetchall()
    if errors:
        total = sum(n for _, n in errors)
        kinds = ", ".join(f"{kind} ×{n}" for kind, n in errors)
        found.append(Finding("warning", "ingest_errors", total,
                             f"{_plural(total, 'ingest error')} in its logs ({kinds}): the table ingest_errors says "
                             f"where.", None, {}))

    found += _last_findings(conn, run_id, run, health, graph_breaks, breaks)
    return sorted(found, key=lambda f: SEVERITIES.index(f.severity))


def _first_findings(conn: sqlite3.Connection, run_id: int, run: dict, health: dict) -> tuple[list[Finding], int, list]:
    """The first part of `findings` as it was: failures, the recompile limit, graph breaks and recompiles."""
    found: list[Finding] = []

    failures = conn.execute("SELECT fail_type, count(*) FROM compiles WHERE run_id = ? AND status = 'error' "
                            "GROUP BY fail_type ORDER BY 2 DESC, 1", (run_id,)).fetchall()
    if failures:
        total = sum(n for _, n in failures)
        kinds = ", ".join(f"{kind} ×{n}" for kind, n in failures)
        found.append(Finding("error", "failures", total, f"{_plural(total, 'compile')} failed: {kinds}.",
                             "failures", run))

    limit = conn.execute("SELECT count(*), group_concat(DISTINCT co_name) FROM compiles WHERE run_id = ? "
                         "AND fail_reason LIKE 'Dynamo recompile limit exceeded%'", (run_id,)).fetchone()
    if limit[0]:
        found.append(Finding("warning", "recompile_limit", limit[0],
                             f"{_short(limit[1], 60) or 'a function'} hit the recompile limit "
                             f"({_plural(limit[0], 'time')}): Dynamo gave up compiling it.", "recompile_reasons", run))

    breaks = conn.execute("""
        SELECT g.reason, count(*), min(g.user_file || ':' || g.user_line) FROM graph_break_events g
        JOIN compiles c ON c.id = g.compile WHERE c.run_id = ? GROUP BY g.reason ORDER BY 2 DESC, 1""",
                          (run_id,)).fetchall()
    graph_breaks = health.get("graph_breaks") or 0
    if graph_breaks or breaks:
        frequent = ""
        if breaks:
            where = f" at {short_location(breaks[0][2])}" if breaks[0][2] else ""
            frequent = (f" ({_plural(len(breaks), 'distinct reason')}); most frequent{where}: "
                        f"“{_short(_reason_line(breaks[0][0]), 160)}” ×{breaks[0][1]}")
        found.append(Finding("warning", "graph_breaks", graph_breaks, f"{_plural(graph_breaks, 'graph break')}{frequent}.",
                             "graph_breaks", run))

    recompiles = conn.execute(f"""
        SELECT count(DISTINCT coalesce(co_name, '') || '@' || coalesce(frame_id, '')),
               (SELECT recompile_reason FROM compiles WHERE run_id = ? AND {RECOMPILE}
                AND recompile_reason IS NOT NULL ORDER BY id LIMIT 1)
        FROM compiles WHERE run_id = ? AND {RECOMPILE}""", (run_id, run_id)).fetchone()
    if health.get("recompiles"):
        found.append(Finding("warning", "recompiles", health["recompiles"],
                             f"{_plural(health['recompiles'], 'recompile')} of {_plural(recompiles[0], 'function')}; "
                             f"first reason: “{_short(recompiles[1]) or 'not logged'}”.", "recompile_reasons", run))
    return found, graph_breaks, breaks



def _last_findings(conn: sqlite3.Connection, run_id: int, run: dict, health: dict, graph_breaks: int,
                   breaks: list) -> list[Finding]:
    """The last part of `findings` as it was: the slowest compile, cache misses, the costliest break."""
    found: list[Finding] = []
    slowest = conn.execute("""
        SELECT id, compile_id, co_name, rank, duration_s, (SELECT sum(duration_s) FROM compiles WHERE run_id = ?)
        FROM compiles WHERE run_id = ? AND duration_s IS NOT NULL ORDER BY duration_s DESC LIMIT 1""",
                           (run_id, run_id)).fetchone()
    if slowest:
        row, compile_id, name, rank, seconds, total = slowest
        where = f" on rank {rank}" if rank is not None else ""
        found.append(Finding("info", "slowest_compile", 1,
                             f"Slowest compile: [{compile_id}] {name or ''}{where}, {seconds:.2f} s of "
                             f"{total:.2f} s of compile time.", compile=row))

    misses, bypasses, lookups = (health.get(key) or 0 for key in ("cache_misses", "cache_bypasses", "cache_lookups"))
    if lookups and (misses or bypasses):
        found.append(Finding("info", "cache", misses + bypasses,
                             f"{_plural(misses, 'cache miss', 'cache misses')} and {_plural(bypasses, 'bypass', 'bypasses')} "
                             f"in {_plural(lookups, 'cache lookup')}.", "cache", run))

    if graph_breaks or breaks:
        try:
            found += _costliest_break(conn, run_id)
        except Exception as error:  # degrades alone, as the rank comparison does
            found.append(Finding("warning", "not_computed", 0,
                                 f"The graph breaks' cost could not be computed ({type(error).__name__}: "
                                 f"{_short(str(error), 120)}); the other findings are complete.", None, {}))
    return found

def _costliest_break(conn: sqlite3.Connection, run_id: int) -> list[Finding]:
    """The graph break that costs the run most (queries/top_graph_breaks.sql), with torch's first hint."""
    top = top_graph_breaks(conn, run_id, limit=1)
    if not top:
        return []
    group = top[0]
    where = f" at {short_location(group['location'])}" if group["location"] else ""
    cost = (f", {group['restart_s']:.2f} s of compile time thrown away by the restarts it caused"
            if group["restart_s"] else ", no restart")
    hint = f"; torch's hint: {_short(group['hints'][0], 160)}" if group["hints"] else ""
    text = f"Costliest graph break: {_short(break_type(group), 120)}{where} ×{group['breaks']}{cost}{hint}"
    return [Finding("info", "top_graph_break", group["breaks"], text.rstrip(".") + ".", "top_graph_breaks",
                    {"run": str(run_id)}, compile=group["compile"])]


def _reason_line(reason: str | None) -> str:
    """A graph-break reason's first informative line (torch 2.13's start with a generic header)."""
    lines = [line.strip() for line in (reason or "").splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith("Encountered graph break when attempting")]
    return (useful or lines or [""])[0]


def short_location(location: str) -> str:
    """/a/b/c/train.py:12 -> c/train.py:12"""
    path, _, line = location.rpartition(":")
    return "/".join(path.replace("\\", "/").split("/")[-2:]) + ":" + line


def export_issue_count(conn: sqlite3.Connection, run_id: int) -> int:
    """What draft_export found in a run, as tlparse's export report counts it (queries/export_issues.sql lists them)."""
    return conn.execute("""
        SELECT count(*) FROM export_issue_records e CROSS JOIN sources s  -- by kind first (index)
        WHERE s.id = e.source_id AND s.run_id = ?""", (run_id,)).fetchone()[0]


def rank_list(ranks: list[int | str]) -> str:
    """Ranks (or processes, "1 (restart 1)") as people write them: "rank 3", "ranks 0–2, 5, 1 (restart 1)"."""
    named = sorted({r for r in ranks if not isinstance(r, int)}, key=str)
    ranks = sorted({r for r in ranks if isinstance(r, int)})
    parts, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            parts.append(str(start) if start == rank else f"{start}–{rank}" if rank > start + 1 else f"{start}, {rank}")
            start = None
    return ("rank " if len(ranks) + len(named) == 1 else "ranks ") + ", ".join(parts + [str(n) for n in named])


MAX_GROUPS = 6  # groups of ranks a sentence names; past it, the largest stay unnamed, the smallest never


def group_ranks(values: dict[int, object], say=str) -> str:
    """Ranks grouped by value, the largest group first and every smaller one named in full, so the outlier is
    never the one left out: "ranks 0–2: 5 compiles; rank 3: 6 compiles"."""
    groups: dict[object, list[int]] = {}
    for rank, value in values.items():
        groups.setdefault(value, []).append(rank)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), min(item[1])))
    shown = ordered if len(ordered) <= MAX_GROUPS else [ordered[0], *ordered[-(MAX_GROUPS - 1):]]
    text = "; ".join(f"{rank_list(ranks)}: {say(value)}" for value, ranks in shown)
    hidden = len(ordered) - len(shown)
    return text + (f"; {_plural(hidden, 'other group')} of ranks" if hidden else "")


def _compiles_by_rank(conn: sqlite3.Connection, run_id: int) -> dict[int | str, int]:
    """Compiles per process of the run, named as the comparison names them (a rank, or "1 (restart 1)")."""
    rows = conn.execute("""SELECT s.process, count(*) FROM compiles c JOIN sources s ON s.id = c.source_id
                           WHERE c.run_id = ? AND c.compile_id != '-/-' AND s.process IS NOT NULL
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


def _divergence(conn: sqlite3.Connection, run_id: int) -> list[Finding]:
    """rank_divergence's findings of a multi-rank run, one sentence per kind, naming the ranks."""
    rows = _rows(run_sql(conn, load_queries()["rank_divergence"].sql, {"run": str(run_id)}))
    by_kind: dict[str, list[dict]] = {}
    for row in rows:
        if row["finding"] in DIVERGENCE:
            by_kind.setdefault(row["finding"], []).append(row)
    found = []
    for kind, (severity, what) in DIVERGENCE.items():
        hits = by_kind.get(kind)
        if not hits:
            continue
        first = hits[0]
        where = f"[{first['compile_id']}] " if first["compile_id"] else ""
        more = f" (and {_plural(len(hits) - 1, 'more compile id')})" if len(hits) > 1 else ""
        detail, groups = first["detail"], ""
        if kind == "missing_compile":  # every rank's count, grouped: the outlier is always named
            ranks = [int(r) if r.strip().lstrip("-").isdigit() else r.strip()
                     for r in str(first["ranks"]).split(",") if r.strip()]
            detail = f"only on {rank_list(ranks)} ({detail})"
            groups = group_ranks(_compiles_by_rank(conn, run_id),
                                 lambda n: _plural(n, "compile")) + ". "
        elif kind == "graph" and first["compile_id"]:
            versions = _versions_by_rank(conn, run_id, first["compile_id"], str(detail).split(":", 1)[0])
            if len(set(versions.values())) > 1:
                detail = f"{detail} ({group_ranks(versions)})"
        found.append(Finding(severity, f"divergence:{kind}", len(hits),
                             f"Ranks diverge in {what}: {groups}{where}{_short(detail, 240)}{more}.",
                             "rank_divergence", {"run": str(run_id)}))
    parity = [r for r in _rows(run_sql(conn, load_queries()["collectives"].sql, {"run": str(run_id)}))
              if r.get("parity") == "mismatch"]
    if parity:
        first = parity[0]
        found.append(Finding("warning", "collectives_parity", len(parity),
                             f"{_plural(len(parity), 'graph')} call other collectives than inductor scheduled: "
                             f"[{first['compile_id']}] on rank {first['rank']} ({first['parity']}).",
                             "collectives", {"run": str(run_id)}))
    return found


def _vllm(conn: sqlite3.Connection, run_id: int) -> list[Finding]:
    """vLLM's slowest compile range, and the pieces that missed the cache where the rest of their range hit."""
    calls, _ = compile_calls(conn, run_id)
    several = len(calls) > 1
    found = []
    misses = lone_misses(calls)
    if misses:
        first = misses[0]
        where = (f"size {first['compile_range_start']}" if first["is_single_size"]
                 else f"range {first['compile_range_start']}–{first['compile_range_end']}")
        call = f" of compile call {first['compile_call']}" if several else ""
        more = f" (and {_plural(len(misses) - 1, 'more piece')})" if len(misses) > 1 else ""
        found.append(Finding("warning", "vllm_cache_miss", len(misses),
                             f"vLLM piece {first['submod_name']} missed the cache at {where}{call} where every other "
                             f"piece of that range hit: its graph changed{more}.", "vllm_pieces", {"run": str(run_id)}))
    for call in calls:
        if call.abandoned is not None:
            why = f" ({call.abandoned})" if call.abandoned else ""
            ids = ", ".join(f"[{cid}]" for _, cid in call.compiles)
            found.append(Finding("info", "vllm_abandoned_call", call.started,
                                 f"vLLM compile call {call.number} {ids} was abandoned: Dynamo restarted its analysis"
                                 f"{why} after the backend began, cutting {_plural(call.started, 'piece compile')} "
                                 f"short; the next attempt compiled again.", "vllm_pieces", {"run": str(run_id)}))
    slowest = slowest_range(calls)
    if slowest:
        call, found_range = slowest
        total = round(sum(r.seconds for c in calls for r in c.ranges), 3)
        of_call = f" of compile call {call.number}" if several else ""
        found.append(Finding("info", "vllm_slowest_range", len(found_range.compiled),
                             f"vLLM's slowest compile range: {found_range.label}{of_call}, {found_range.seconds:.2f} s "
                             f"of {total:.2f} s over {_plural(len(found_range.compiled), 'piece')}.",
                             "vllm_pieces", {"run": str(run_id)}))
    return found


def _rows(cursor: sqlite3.Cursor) -> list[dict]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def problems(found: list[Finding]) -> list[Finding]:
    """The findings that mean something is wrong (errors and warnings)."""
    return [f for f in found if f.severity != "info"]
