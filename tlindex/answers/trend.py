"""`tlindex trend`: compile health run after run, against a baseline, and the CI gate on one run.

One row per run, oldest first (tlindex.answers.health). The run compared with the baseline is the one named, else
the one ingested last (tlindex.answers.gate.last_ingested: never the newest by the logs' clocks). With a baseline,
its changes are said in one line; with bounds (tlindex.answers.gate), it is judged against the baseline. A run whose
torch version is not the one of the run before it is marked (`torch_changed_from`): what changed there may be torch's.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass

from tlindex.answers.gate import Clause, GateResult, check_baseline, gate, last_ingested
from tlindex.answers.health import METRICS, health, select_runs
from tlindex.answers.names import resolve_run


@dataclass
class Trend:
    rows: list[dict]                 # run_health rows, oldest first
    baseline: dict | None            # the baseline's row (it need not be among the rows)
    gate: GateResult | None          # the judged run's verdict, when bounds were given
    judged: dict | None = None       # the run compared with the baseline: named, else ingested last
    why: str = "ingested last"       # which of the two

    @property
    def newest(self) -> dict | None:
        """The run compared with the baseline (named, else ingested last), not the last row in time order."""
        return self.judged


def trend(conn: sqlite3.Connection, names: list[str] | tuple[str, ...] = (), label: str | None = None,
          baseline: str | None = None, clauses: list[Clause] | None = None, judge: str | None = None,
          allow_unjudged: bool = False, last: int | None = None) -> Trend:
    """The health of the runs named (else every run; with `label`, those whose label starts with it; with `last`,
    only the last so many of them), the baseline's (a run named as everywhere), and with clauses the gate's verdict
    on the run `judge` names, else on the run ingested last of those `last` leaves out or not. Raises UnknownRun for
    a name that matches no run, or several, GateError for a clause that needs a baseline not given."""
    if clauses:
        check_baseline(clauses, baseline)
    baseline_id = resolve_run(conn, baseline)["id"] if baseline is not None else None
    judged_id = resolve_run(conn, judge)["id"] if judge is not None else None
    shown = select_runs(conn, names, label, last)
    rows = mark_torch_changes(health(conn, shown))
    base = None
    if baseline_id is not None:
        base = next((row for row in rows if row["run_id"] == baseline_id), None) or health(conn, [baseline_id])[0]
    why, arrived_with = ("named" if judged_id is not None else "ingested last"), []
    if judged_id is None:  # ingested last: of every run the names and label keep, not only of the last shown by time
        judged_id, arrived_with = last_ingested(conn, shown if last is None else select_runs(conn, names, label))
    judged = None if judged_id is None else (next((row for row in rows if row["run_id"] == judged_id), None)
                                             or health(conn, [judged_id])[0])
    verdict = gate(conn, judged_id, baseline_id, clauses, why=why, allow_unjudged=allow_unjudged,
                   arrived_with=arrived_with) \
        if clauses and judged is not None else None
    return Trend(rows, base, verdict, judged, why)


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
    """One line: what moved from the baseline to the judged run (nothing when there is no baseline)."""
    run, base = result.newest, result.baseline
    if run is None or base is None:
        return []
    if run["run_id"] == base["run_id"]:
        return [f"the run {result.why}, {run['run_id']} {run['label']}, is the baseline"]
    moved = [text for metric in METRICS if (text := _change(metric, run[metric.column], base[metric.column]))]
    return [f"run {run['run_id']} {run['label']} ({result.why}) against baseline run {base['run_id']} {base['label']}: "
            + ("; ".join(moved) if moved else "no change")]


def mark_torch_changes(rows: list[dict]) -> list[dict]:
    """Each row (oldest first) with `torch_changed_from`: the torch version of the run before it when its own is
    another (both logged), else None."""
    before = None
    for row in rows:
        version = row.get("torch_version")
        row["torch_changed_from"] = before if None not in (before, version) and version != before else None
        before = version if version is not None else before
    return rows


def torch_change_lines(rows: list[dict]) -> list[str]:
    """One line per run where the torch version changed, as `tlindex trend` prints them under its table."""
    return [f"torch changed at run {row['run_id']} {row['label']}: {row['torch_changed_from']} -> "
            f"{row['torch_version']} (what moved there may be torch's)" for row in rows if row.get("torch_changed_from")]
