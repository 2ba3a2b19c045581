"""A CI gate on compile health: bounds on a run's health numbers (tlindex.answers.health), alone or against a baseline.

    --fail-on 'compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0'

A clause is METRIC OP BOUND, clauses separated by commas. METRIC is a column of run_health without its unit
(`compile_time`, `recompiles`, ...; the column's own name works too); OP is >, >=, < or <=. BOUND says what is
compared:
  +20%  -10%   the change against the baseline, in percent of the baseline's value (from a baseline of 0, any
               rise is +inf %, any fall -inf %)
  +0    -2.5   the change against the baseline, in the metric's unit (seconds for times)
  0     30     the run's own value (no baseline needed)
A clause is crossed when `value OP bound` (the change for a signed bound) holds. A metric the run, or the
baseline, did not log (no backward compile, autotuning on CPU) is not judged, and says so.

The gate judges one run: the newest of those a trend shows (the last in time order), or the run `tlindex run`
just ingested. When a bound is crossed, the compiles that changed most between the baseline and that run are
named, as `tlindex diff` matches and ranks them.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass, field

from tlindex.answers.diff import diff, entry_lines
from tlindex.answers.health import BY_NAME, METRICS, Metric, run_health
from tlindex.errors import UsageError

CLAUSE_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(>=|<=|>|<)\s*([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")
OPS = {">": lambda x, y: x > y, ">=": lambda x, y: x >= y, "<": lambda x, y: x < y, "<=": lambda x, y: x <= y}
CHANGED_COMPILES = 5  # compiles named when a bound is crossed


class GateError(UsageError):
    """A --fail-on that cannot be read, or cannot be judged without a baseline: the message says which clause."""


@dataclass(frozen=True)
class Clause:
    text: str      # as written
    metric: Metric
    op: str        # >, >=, <, <=
    kind: str      # relative (percent of the baseline), delta (change in the metric's unit) or absolute
    bound: float   # signed for relative and delta

    @property
    def needs_baseline(self) -> bool:
        return self.kind != "absolute"


def metric_names() -> str:
    return ", ".join(metric.name for metric in METRICS)


def parse_fail_on(spec: str) -> list[Clause]:
    """The clauses of a --fail-on; GateError names a clause that is not METRIC OP BOUND, and the metrics."""
    clauses = []
    for text in spec.split(","):
        if not text.strip():
            continue
        match = CLAUSE_RE.match(text)
        if match is None:
            raise GateError(f"--fail-on: {text.strip()!r} is not METRIC OP BOUND (e.g. compile_time>+20%, "
                            f"recompiles>+0, failures>0; OP is >, >=, < or <=; a signed bound is a change against "
                            f"the baseline, in % or in the metric's unit; metrics: {metric_names()})")
        name, op, sign, number, percent = match.groups()
        metric = BY_NAME.get(name)
        if metric is None:
            raise GateError(f"--fail-on: {text.strip()!r}: no metric {name!r}; metrics: {metric_names()}")
        if percent and not sign:
            raise GateError(f"--fail-on: {text.strip()!r}: a percentage is a change against the baseline; "
                            f"write +{number}% for a rise or -{number}% for a fall")
        bound = float(number) * (-1 if sign == "-" else 1)
        kind = "relative" if percent else "delta" if sign else "absolute"
        clauses.append(Clause(text.strip(), metric, op, kind, bound))
    if not clauses:
        raise GateError(f"--fail-on: no clause given (e.g. compile_time>+20%,failures>0); metrics: {metric_names()}")
    return clauses


def check_baseline(clauses: list[Clause], baseline: object) -> None:
    """GateError when a clause compares against a baseline and none was given."""
    relative = [clause.text for clause in clauses if clause.needs_baseline]
    if relative and baseline is None:
        raise GateError(f"--fail-on: {', '.join(relative)} compare{'s' * (len(relative) == 1)} against a baseline: "
                        f"give --baseline RUN (or write an absolute bound, e.g. failures>0)")


@dataclass
class Verdict:
    clause: Clause
    value: float | None
    baseline: float | None
    change: float | None      # what was compared with the bound: the change (in % or in the unit), or the value
    crossed: bool | None      # None: not judged (why says why)
    why: str = ""

    def as_dict(self) -> dict:
        return {"clause": self.clause.text, "metric": self.clause.metric.name, "value": self.value,
                "baseline": self.baseline, "compared": self.change, "crossed": self.crossed, "why": self.why}


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def judge(clauses: list[Clause], run: dict, baseline: dict | None) -> list[Verdict]:
    """Each clause judged on a run's health row against the baseline's (tlindex.answers.health)."""
    verdicts = []
    for clause in clauses:
        column = clause.metric.column
        value = _number(run.get(column))
        base = _number(baseline.get(column)) if baseline is not None else None
        if value is None or (clause.needs_baseline and base is None):
            which = "the run" if value is None else "the baseline"
            verdicts.append(Verdict(clause, value, base, None, None, f"{which} logged no {clause.metric.what}"))
            continue
        if clause.kind == "absolute":
            compared = value
        elif clause.kind == "delta":
            compared = value - base
        elif base:
            compared = (value - base) / abs(base) * 100
        else:
            compared = 0.0 if value == base else math.copysign(math.inf, value - base)
        if math.isnan(compared) or not all(map(math.isfinite, (value, base if base is not None else 0.0))):
            verdicts.append(Verdict(clause, value, base, None, None, "not a finite number"))
            continue
        verdicts.append(Verdict(clause, value, base, compared, OPS[clause.op](compared, clause.bound)))
    return verdicts


@dataclass
class GateResult:
    run: dict                              # the judged run's health row
    baseline: dict | None                  # the baseline's
    verdicts: list[Verdict]
    changed: list[dict] = field(default_factory=list)  # entries of the diff (tlindex.answers.diff), most changed first

    @property
    def crossed(self) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if verdict.crossed]

    @property
    def exit_code(self) -> int:
        return 1 if self.crossed else 0

    def as_dict(self) -> dict:
        return {"run": self.run["run_id"], "baseline": self.baseline["run_id"] if self.baseline else None,
                "verdicts": [verdict.as_dict() for verdict in self.verdicts],
                "crossed": [verdict.clause.metric.name for verdict in self.crossed], "changed_compiles": self.changed}


def gate(conn: sqlite3.Connection, run_id: int, baseline_id: int | None, clauses: list[Clause],
         changed: int = CHANGED_COMPILES) -> GateResult:
    """Judge one run against a baseline; when a bound is crossed, the `changed` compiles that changed most."""
    check_baseline(clauses, baseline_id)
    run = run_health(conn, run_id)
    base = run_health(conn, baseline_id) if baseline_id is not None else None
    result = GateResult(run, base, judge(clauses, run, base))
    if result.crossed and baseline_id is not None and baseline_id != run_id and changed:
        compared = diff(conn, str(baseline_id), str(run_id))
        result.changed = [entry for entry in compared["compiles"] if entry["changes"] or not (entry["a"] and entry["b"])
                          ][:changed]
    return result


def _amount(value: float | None, metric: Metric) -> str:
    if value is None:
        return "not logged"
    if metric.unit == "s":
        return f"{value:.3f} s"
    return f"{value:g}"


def _compared(verdict: Verdict) -> str:
    clause = verdict.clause
    if verdict.change is None or clause.kind == "absolute":
        return ""
    if clause.kind == "relative":
        return f" ({verdict.change:+.1f}%)" if math.isfinite(verdict.change) else f" ({'+' if verdict.change > 0 else '-'}inf %)"
    return f" ({verdict.change:+.3f} {clause.metric.unit})" if clause.metric.unit else f" ({verdict.change:+g})"


def lines(result: GateResult) -> list[str]:
    """The gate's verdict as `tlindex trend` and `tlindex run` print it: each clause, then the compiles that changed."""
    run, base = result.run, result.baseline
    against = f" against baseline run {base['run_id']} {base['label']}" if base else ""
    same = " (the run is the baseline itself)" if base and base["run_id"] == run["run_id"] else ""
    out = [f"gate: run {run['run_id']} {run['label']}{against}{same}: "
           + (f"{len(result.crossed)} bound{'s' * (len(result.crossed) != 1)} crossed ("
              + ", ".join(verdict.clause.metric.name for verdict in result.crossed) + ")" if result.crossed
              else "no bound crossed")]
    for verdict in result.verdicts:
        clause = verdict.clause
        state = "CROSSED" if verdict.crossed else "not judged" if verdict.crossed is None else "ok"
        if verdict.crossed is None:
            out.append(f"  {state}: {clause.text}: {verdict.why}")
            continue
        was = f", baseline {_amount(verdict.baseline, clause.metric)}" if clause.needs_baseline else ""
        out.append(f"  {state}: {clause.text}: {clause.metric.name} {_amount(verdict.value, clause.metric)}{was}"
                   f"{_compared(verdict)}")
    if result.changed:
        out.append(f"compiles that changed most (tlindex diff {base['run_id']} {run['run_id']}):")
        for entry in result.changed:
            out += entry_lines(entry)
    return out
