"""A run's compile health, one definition: the view `run_health` (schema/013_run_health.sql).

Per run: compiles, recompiles, failures, graph breaks, restarts, compile time (the frames' and their backward's, as
the view compile_times defines it; AOTAutograd and Inductor within the frames', the backward's part, autotuning when
logged), guards, and cache lookups,
hits, misses and bypasses (all caches, then Inductor's FX-graph cache and AOTAutograd's). Its counts and
compile time are the view run_totals' own, which the run page shows, so the trend, the CI gate
(tlindex.answers.gate), the findings and the run page cannot disagree. Runs come oldest first, as everywhere.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from tlindex.answers.names import resolve_run
from tlindex.store.db import with_views


@dataclass(frozen=True)
class Metric:
    column: str   # the view's column
    unit: str     # "s" for seconds, "" for a count
    what: str     # what it counts, as a sentence's object

    @property
    def name(self) -> str:
        """How the gate and the table name it: the column without its unit (`compile_time`)."""
        return self.column.removesuffix("_s")


IDENTITY = ("run_id", "label", "start_time", "torch_version")
# The view's numbers, in its order (a test holds the view and this list to each other).
METRICS = (
    Metric("compiles", "", "compiles"),
    Metric("recompiles", "", "recompiles"),
    Metric("failures", "", "failed compiles"),
    Metric("graph_breaks", "", "graph breaks"),
    Metric("restarts", "", "analysis restarts"),
    Metric("compile_time_s", "s", "compile time (frames and backward)"),
    Metric("aot_time_s", "s", "AOTAutograd time"),
    Metric("inductor_time_s", "s", "Inductor time (forward)"),
    Metric("backward_time_s", "s", "backward compile time (part of the compile time)"),
    Metric("autotune_time_s", "s", "autotuning time"),
    Metric("guards", "", "guards"),
    Metric("cache_lookups", "", "cache lookups"),
    Metric("cache_hits", "", "cache hits"),
    Metric("cache_misses", "", "cache misses"),
    Metric("cache_bypasses", "", "cache bypasses"),
    Metric("fx_graph_hits", "", "FX-graph cache hits"),
    Metric("fx_graph_misses", "", "FX-graph cache misses"),
    Metric("aotautograd_hits", "", "AOTAutograd cache hits"),
    Metric("aotautograd_misses", "", "AOTAutograd cache misses"),
)
BY_NAME = {metric.name: metric for metric in METRICS} | {metric.column: metric for metric in METRICS}
# Counts a run without any compile has none of (run_health has no row for it); its times are unknown.
ZERO_WITHOUT_COMPILES = ("compiles", "recompiles", "failures", "graph_breaks", "restarts", "cache_lookups",
                         "cache_hits", "cache_misses", "cache_bypasses", "fx_graph_hits", "fx_graph_misses",
                         "aotautograd_hits", "aotautograd_misses")


def _rows(conn: sqlite3.Connection, where: str, params: tuple, columns: tuple[str, ...] | None = None) -> dict[int, dict]:
    """run_health's rows by run; with `columns`, only those are computed (the view's other subqueries are not run)."""
    select = ", ".join(("run_id", *(c for c in columns if c != "run_id"))) if columns else "*"
    cursor = conn.execute(f"{with_views(conn, ('run_totals', 'run_health'))}SELECT {select} FROM run_health {where}",
                          params)
    names = [d[0] for d in cursor.description]
    return {row[0]: dict(zip(names, row)) for row in cursor}


def health(conn: sqlite3.Connection, run_ids: list[int] | None = None) -> list[dict]:
    """The health of the runs (every run when None), oldest first: run_health's rows, and for a run that
    compiled nothing its identity with zero counts and no times."""
    if run_ids is None:
        runs = conn.execute("SELECT id, label, start_time, torch_version FROM runs ORDER BY start_time, id").fetchall()
        found = _rows(conn, "", ())
    else:
        runs, found = [], {}
        ids = sorted(set(run_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            runs += conn.execute(f"SELECT id, label, start_time, torch_version FROM runs WHERE id IN ({marks})",
                                 chunk).fetchall()
            found.update(_rows(conn, f"WHERE run_id IN ({marks})", tuple(chunk)))
        runs.sort(key=lambda run: (run[2] is not None, run[2] or "", run[0]))  # SQLite's order: NULL first
    result = []
    for run in runs:
        row = found.get(run[0])
        if row is None:
            row = dict(zip(IDENTITY, run)) | {metric.column: (0 if metric.column in ZERO_WITHOUT_COMPILES else None)
                                              for metric in METRICS}
        result.append(row)
    return result


def run_health(conn: sqlite3.Connection, run_id: int, columns: tuple[str, ...] | None = None) -> dict | None:
    """One run's health (None for no such run); with `columns`, only those numbers (the rest is not computed)."""
    if columns is None:
        rows = health(conn, [run_id])
        return rows[0] if rows else None
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
        return None
    row = _rows(conn, "WHERE run_id = ?", (run_id,), columns).get(run_id)
    return row or {"run_id": run_id, **{c: (0 if c in ZERO_WITHOUT_COMPILES else None) for c in columns}}


CUT_OFF_SHOWN = 5  # compiles cut off named in a sentence


def ingest_error_kinds(conn: sqlite3.Connection, run_id: int) -> list[tuple[str, int]]:
    """The ingest errors of a run's logs by kind, most first (the finding `ingest_errors` says them too)."""
    return conn.execute("""
        SELECT e.kind, count(*) FROM ingest_errors e JOIN sources s ON s.id = e.source_id
        WHERE s.run_id = ? GROUP BY e.kind ORDER BY 2 DESC""", (run_id,)).fetchall()


def incomplete(conn: sqlite3.Connection, run_id: int) -> list[str]:
    """Why a run's logs do not hold the whole of what it compiled, each in words (none when they do): the one place
    that decides it (the gate judges only complete runs). A compile cut off began (its `dynamo_start` is there) and
    never ended (status `missing`: no compilation metrics, and not the end of a warm start either): the log stops
    mid-compile. An ingest error is a line
    tlindex could not index as it is (a last line cut off, a payload whose md5 does not match, ...)."""
    found = []
    cut = conn.execute("SELECT compile_id, rank FROM compiles WHERE run_id = ? AND status = 'missing' AND "
                       "dynamo_start IS NOT NULL ORDER BY id", (run_id,)).fetchall()
    if cut:
        named = ", ".join(f"[{compile_id}]" + (f" on rank {rank}" if rank is not None else "")
                          for compile_id, rank in cut[:CUT_OFF_SHOWN]) + (", …" if len(cut) > CUT_OFF_SHOWN else "")
        found.append(f"{len(cut):,} compile{'s' * (len(cut) != 1)} cut off ({named} began and never ended: its log "
                     f"stops mid-compile)")
    errors = ingest_error_kinds(conn, run_id)
    if errors:
        total = sum(n for _, n in errors)
        kinds = ", ".join(f"{kind} ×{n}" for kind, n in errors)
        found.append(f"{total:,} ingest error{'s' * (total != 1)} in its logs ({kinds}: the table ingest_errors "
                     f"says where)")
    return found


def select_runs(conn: sqlite3.Connection, names: list[str] | tuple[str, ...] = (), label: str | None = None,
                last: int | None = None, offset: int = 0) -> list[int]:
    """The runs a trend shows, oldest first: those named (id, label or unique label prefix, as everywhere), else
    every run; with `label`, only those whose label starts with it; with `last`, the last so many of them (before the
    `offset` newest, unless named). Raises UnknownRun for a name that matches none."""
    if names:
        ids = {resolve_run(conn, name)["id"] for name in names}
        rows = conn.execute("SELECT id, label FROM runs ORDER BY start_time, id").fetchall()
        kept = [run_id for run_id, run_label in rows if run_id in ids and (label is None or run_label.startswith(label))]
    else:
        where, params = ("WHERE substr(label, 1, ?) = ?", [len(label), label]) if label is not None else ("", [])
        kept = [row[0] for row in conn.execute(
            f"SELECT id FROM runs {where} ORDER BY start_time DESC, id DESC LIMIT ? OFFSET ?",
            [*params, -1 if last is None else last, offset])][::-1]
    return kept if last is None else kept[-last:]


def count_runs(conn: sqlite3.Connection, label: str | None = None) -> int:
    """How many runs a trend of every run (with `label`, of those whose label starts with it) would show."""
    if label is None:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    return conn.execute("SELECT count(*) FROM runs WHERE substr(label, 1, ?) = ?", (len(label), label)).fetchone()[0]


# The trend as a table: (header, how a row's cell is made).
def _pair(a, b) -> str:
    return f"{a or 0}/{b or 0}"


TABLE = (
    ("run", lambda r: r["run_id"]),
    ("label", lambda r: r["label"]),
    ("start", lambda r: (r["start_time"] or "")[:19]),
    ("torch", lambda r: f"{r['torch_version']} (new)" if r.get("torch_changed_from") else r["torch_version"]),
    ("compiles", lambda r: r["compiles"]),
    ("recompiles", lambda r: r["recompiles"]),
    ("failures", lambda r: r["failures"]),
    ("breaks", lambda r: r["graph_breaks"]),
    ("restarts", lambda r: r["restarts"]),
    ("compile s", lambda r: r["compile_time_s"]),
    ("aot s", lambda r: r["aot_time_s"]),
    ("inductor s", lambda r: r["inductor_time_s"]),
    ("backward s", lambda r: r["backward_time_s"]),
    ("autotune s", lambda r: r["autotune_time_s"]),
    ("guards", lambda r: r["guards"]),
    ("fx graph hit/miss", lambda r: _pair(r["fx_graph_hits"], r["fx_graph_misses"])),
    ("aot cache hit/miss", lambda r: _pair(r["aotautograd_hits"], r["aotautograd_misses"])),
)


def table(rows: list[dict], baseline: int | None = None) -> tuple[list[str], list[list]]:
    """The trend's rows as a table's (headers, cells); the baseline's label is marked, and a column no run logged
    (autotuning on CPU, a backward never compiled) is left out."""
    cells = []
    for row in rows:
        line = [make(row) for _, make in TABLE]
        if row["run_id"] == baseline:
            line[1] = f"{line[1]} (baseline)"
        cells.append(line)
    kept = [i for i in range(len(TABLE)) if i < 2 or any(line[i] is not None for line in cells)]
    return [TABLE[i][0] for i in kept], [[line[i] for i in kept] for line in cells]
