"""A CI gate on compile health: bounds on a run's health numbers (tlindex.answers.health), alone or against a baseline.

    --fail-on 'compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0'

A clause is METRIC OP BOUND, clauses separated by commas. METRIC is a column of run_health without its unit
(`compile_time`, `recompiles`, ...; the column's own name works too); OP is >, >=, < or <=. BOUND says what is
compared:
  +20%  -10%   the change against the baseline, in percent of the baseline's value (from a baseline of 0, any
               rise is +inf %, any fall -inf %)
  +0    -2.5   the change against the baseline, in the metric's unit (seconds for times)
  0     30     the run's own value (no baseline needed)
A clause is crossed when `value OP bound` (the change for a signed bound) holds.

The gate judges one run: the one the user names, else the one ingested last (the highest run id: the order of
ingest, never the logs' clocks, which carry no year or zone), or the run `tlindex run` just ingested; it says
which and why. It judges only complete runs, and fails closed: a metric the run or the baseline did not log (no
backward compile, autotuning on CPU), a run that finished no compile, a run judged against itself, a run or
baseline that is incomplete (a compile cut off, ingest errors in its logs: tlindex.answers.health.incomplete), a
run of other ranks than its baseline's, and a run ingested last along with others in one ingest (unless it is
named) are failures that name what could not be judged, unless the caller allows them (`--allow-unjudged`). When a
bound is crossed, the compiles that changed most between the baseline and that run are named, as `tlindex diff`
ranks them.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass, field

from tlindex.answers.diff import diff, entry_lines
from tlindex.answers.health import BY_NAME, METRICS, Metric, incomplete, run_health
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
    why: str = "named"                     # why this run is the one judged (named, ingested last, just made)
    unjudgeable: list[str] = field(default_factory=list)  # what kept the run as a whole from being judged
    allow_unjudged: bool = False           # pass what could not be judged instead of failing

    @property
    def crossed(self) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if verdict.crossed]

    @property
    def not_judged(self) -> list[str]:
        """Everything that could not be judged: the run's own problems, then each clause not judged and why."""
        return self.unjudgeable + [f"{verdict.clause.text} ({verdict.why})" for verdict in self.verdicts
                                   if verdict.crossed is None]

    @property
    def exit_code(self) -> int:
        return 1 if self.crossed or (self.not_judged and not self.allow_unjudged) else 0

    def as_dict(self) -> dict:
        return {"run": self.run["run_id"], "baseline": self.baseline["run_id"] if self.baseline else None,
                "judged_because": self.why, "verdicts": [verdict.as_dict() for verdict in self.verdicts],
                "crossed": [verdict.clause.metric.name for verdict in self.crossed], "not_judged": self.not_judged,
                "changed_compiles": self.changed}


FINISHED = "status NOT IN ('missing', 'none')"  # a compile that ended (schema: status; its metrics, or a warm start's end)


def last_ingested(conn: sqlite3.Connection, run_ids: list[int]) -> tuple[int | None, list[int]]:
    """The run ingested last of these: the highest id (ids grow with each run an ingest makes; clocks do not); and
    the others of these that arrived in the same ingest (made or grown by it: runs.last_ingest)."""
    if not run_ids:
        return None, []
    last = max(run_ids)
    row = conn.execute("SELECT last_ingest FROM runs WHERE id = ?", (last,)).fetchone()
    if row is None or row[0] is None:
        return last, []
    together = {run for (run,) in conn.execute("SELECT id FROM runs WHERE last_ingest = ? AND id != ?", (row[0], last))}
    return last, sorted(together & set(run_ids))


def _ranks(count: int | None) -> str:
    return f"{count} rank{'s' * (count != 1)}" if count else "no rank (one process, not distributed)"


def unjudgeable(conn: sqlite3.Connection, run_id: int, baseline_id: int | None,
                arrived_with: list[int] | tuple[int, ...] = ()) -> list[str]:
    """What keeps a run from being judged at all: it is the baseline itself, it finished no compile, it or its
    baseline is incomplete (tlindex.answers.health.incomplete), it has other ranks than its baseline, or it was
    chosen as ingested last while the runs `arrived_with` arrived in the same ingest."""
    found = []
    if baseline_id is not None and baseline_id == run_id:
        found.append(f"run {run_id} is the baseline itself (name the run to judge, or another baseline)")
    finished = conn.execute(f"SELECT count(*) FROM compiles WHERE run_id = ? AND {FINISHED}", (run_id,)).fetchone()[0]
    if not finished:
        found.append(f"run {run_id} finished no compile (no compile of its logs ended: cut off mid-compile, "
                     f"or it compiled nothing)")
    found += [f"run {run_id} is incomplete: {why}" for why in incomplete(conn, run_id)]
    if baseline_id is not None and baseline_id != run_id:
        found += [f"baseline run {baseline_id} is incomplete: {why}" for why in incomplete(conn, baseline_id)]
        ranks = dict(conn.execute("SELECT id, world_size FROM runs WHERE id IN (?, ?)", (run_id, baseline_id)))
        if (ranks.get(run_id) or 1) != (ranks.get(baseline_id) or 1):
            found.append(f"run {run_id} has {_ranks(ranks.get(run_id))}, its baseline run {baseline_id} has "
                         f"{_ranks(ranks.get(baseline_id))} (a rank that wrote nothing, or another world size)")
    if arrived_with:
        found.append(f"run {run_id} arrived in one ingest with run{'s' * (len(arrived_with) != 1)} "
                     f"{', '.join(map(str, arrived_with))}: name the run to judge with --run")
    return found


def gate(conn: sqlite3.Connection, run_id: int, baseline_id: int | None, clauses: list[Clause],
         changed: int = CHANGED_COMPILES, why: str = "named", allow_unjudged: bool = False,
         arrived_with: list[int] | tuple[int, ...] = ()) -> GateResult:
    """Judge one run against a baseline (`why` says why this run; `arrived_with`, the other runs of the ingest that
    made it when it was chosen as ingested last); when a bound is crossed, the `changed` compiles that changed most.
    What cannot be judged fails the gate unless `allow_unjudged`."""
    check_baseline(clauses, baseline_id)
    run = run_health(conn, run_id)
    base = run_health(conn, baseline_id) if baseline_id is not None else None
    result = GateResult(run, base, judge(clauses, run, base), why=why, allow_unjudged=allow_unjudged,
                        unjudgeable=unjudgeable(conn, run_id, baseline_id, arrived_with))
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
    crossed = (f"{len(result.crossed)} bound{'s' * (len(result.crossed) != 1)} crossed ("
               + ", ".join(verdict.clause.metric.name for verdict in result.crossed) + ")" if result.crossed
               else "no bound crossed")
    if result.not_judged:
        crossed += (f"; {len(result.not_judged)} thing{'s' * (len(result.not_judged) != 1)} not judged"
                    + (" (allowed by --allow-unjudged)" if result.allow_unjudged else ": FAILED"))
    out = [f"gate: run {run['run_id']} {run['label']} ({result.why}){against}: {crossed}"]
    out += [f"  NOT JUDGED: {text}" for text in result.unjudgeable]
    for verdict in result.verdicts:
        clause = verdict.clause
        state = "CROSSED" if verdict.crossed else "NOT JUDGED" if verdict.crossed is None else "ok"
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
