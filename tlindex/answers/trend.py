"""`tlindex trend`: compile health run after run, against a baseline, and the CI gate on the newest run.

One row per run, oldest first (tlindex.answers.health). With a baseline, the newest run's changes against it are
said in one line; with bounds (tlindex.answers.gate), the newest run is judged against the baseline.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass

from tlindex.answers.gate import Clause, GateResult, check_baseline, gate
from tlindex.answers.health import METRICS, health, select_runs
from tlindex.answers.names import resolve_run


@dataclass
class Trend:
    rows: list[dict]                 # run_health rows, oldest first
    baseline: dict | None            # the baseline's row (it need not be among the rows)
    gate: GateResult | None          # the newest run judged, when bounds were given

    @property
    def newest(self) -> dict | None:
        return self.rows[-1] if self.rows else None


def trend(conn: sqlite3.Connection, names: list[str] | tuple[str, ...] = (), label: str | None = None,
          baseline: str | None = None, clauses: list[Clause] | None = None, last: int | None = None) -> Trend:
    """The health of the runs named (else every run; with `label`, those whose label starts with it), the
    baseline's (a run named as everywhere), with `last` only the last so many, and with clauses the gate's verdict
    on the newest run. Raises
    UnknownRun for a name that matches no run, GateError for a clause that needs a baseline not given."""
    if clauses:
        check_baseline(clauses, baseline)
    baseline_id = resolve_run(conn, baseline)["id"] if baseline is not None else None
    rows = health(conn, select_runs(conn, names, label, last))
    base = None
    if baseline_id is not None:
        base = next((row for row in rows if row["run_id"] == baseline_id), None) or health(conn, [baseline_id])[0]
    verdict = gate(conn, rows[-1]["run_id"], baseline_id, clauses) if clauses and rows else None
    return Trend(rows, base, verdict)


def _change(metric, value, base) -> str | None:
    """How a metric moved from the baseline, or None when it did not (or one side did not log it)."""
    if value is None or base is None or value == base:
        return None
    if metric.unit == "s":
        if not (math.isfinite(value) and math.isfinite(base)):
            return None
        percent = f" ({(value - base) / abs(base) * 100:+.1f}%)" if base else ""
        return f"{metric.name} {base:.3f} -> {value:.3f} s{percent}"
    return f"{metric.name} {base} -> {value} ({value - base:+})"


def against_baseline(result: Trend) -> list[str]:
    """One line: what moved from the baseline to the newest run (nothing when there is no baseline)."""
    run, base = result.newest, result.baseline
    if run is None or base is None:
        return []
    if run["run_id"] == base["run_id"]:
        return [f"the newest run, {run['run_id']} {run['label']}, is the baseline"]
    moved = [text for metric in METRICS if (text := _change(metric, run[metric.column], base[metric.column]))]
    return [f"run {run['run_id']} {run['label']} against baseline run {base['run_id']} {base['label']}: "
            + ("; ".join(moved) if moved else "no change")]
