"""The findings registry: each kind of finding is one check, registered once with what it means and what to try.

A check is a function `(conn, run, context) -> findings`, registered with `@check(kind, severity, order, title,
explanation, next_steps)`; `findings()` runs every registered check on a run. A check that raises (odd data,
a bug) does not take the others down: it becomes a `not_computed` finding saying which check failed and why,
and the rest still show. Checks of one run share what is costly to compute through `context.shared` (the
run's health, the rank comparison, vLLM's compile calls): computed once, and when that fails every check
that needs it fails with the same error, reported once.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from tlindex.answers.findings.words import short

SEVERITIES = ("error", "warning", "info")
FAILED = "not_computed"  # the kind of the finding a check that raised becomes


@dataclass
class Finding:
    severity: str                 # error, warning or info
    kind: str                     # failures, recompile_limit, graph_breaks, divergence:<what>, ...
    count: int
    text: str                     # one sentence
    query: str | None = None      # the canned query that shows the detail (with run=)
    params: dict = field(default_factory=dict)
    compile: int | None = None    # or the compile that shows it
    explanation: str = ""         # what this kind of finding means (its check's)
    next_steps: str = ""          # what to try next: about this finding when it says, else its check's advice
    items: list = field(default_factory=list)  # every item the sentence counts, whole (--json): compile ids, …
    own_next_steps: str | None = None  # what to try next about this finding (the line, the input, the compile)

    def as_dict(self) -> dict:
        """Its fields as --json gives them (`next_steps`: this finding's advice, else its check's)."""
        found = asdict(self)
        found.pop("own_next_steps")
        return found

    @property
    def anchor(self) -> str:
        """Its kind's entry in the glossary (`glossary#finding-graph-breaks`)."""
        return anchor(self.kind)


def anchor(kind: str) -> str:
    """The glossary anchor of a finding kind: `divergence:missing_compile` -> `finding-divergence-missing-compile`."""
    return "finding-" + re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")


@dataclass(frozen=True)
class Check:
    kind: str            # the kind of every finding it returns
    severity: str        # error, warning or info: errors and warnings are problems
    order: int           # its place among the findings of its severity
    title: str           # what it finds, as a glossary heading
    explanation: str     # what such a finding means, for a PyTorch engineer (a sentence or two)
    next_steps: str      # what to try next
    run: Callable[[sqlite3.Connection, int, Context], Iterable[Finding] | None]

    @property
    def anchor(self) -> str:
        return anchor(self.kind)


# Every check, by kind: a new one is one `@check(...)` (or `register(Check(...))`) in a module this package imports.
CHECKS: dict[str, Check] = {}


def register(new: Check) -> Check:
    """Add a check to the registry (its kind must be new)."""
    if new.kind in CHECKS or new.kind == FAILED:
        raise ValueError(f"a check of kind {new.kind!r} is already registered")
    if new.severity not in SEVERITIES or not new.explanation or not new.next_steps:
        raise ValueError(f"check {new.kind!r}: a severity of {SEVERITIES}, an explanation and next steps")
    CHECKS[new.kind] = new
    return new


def check(kind: str, severity: str, order: int, title: str, explanation: str, next_steps: str):
    """Register the decorated function `(conn, run, context) -> findings` as the check of `kind`."""
    def registered(run: Callable) -> Callable:
        register(Check(kind, severity, order, title, explanation, next_steps, run))
        return run
    return registered


# What a check that raised becomes (the glossary explains it with the registered kinds).
NOT_COMPUTED = Check(
    FAILED, "warning", 0, "A check could not be computed",
    "One of tlindex's checks raised on this run's data (records it did not expect): its finding is missing, "
    "the other findings are complete.",
    "Report it to tlindex with the message shown; the run's queries and pages still answer.",
    lambda conn, run, context: ())


class Context:
    """What the checks of one run share: the connection, the run, whether ranks are compared, and values computed
    once on first use (`shared`). `finding` makes a finding of the check being run."""

    def __init__(self, conn: sqlite3.Connection, run: int, divergence: bool = True):
        self.conn, self.run, self.divergence = conn, run, divergence
        self.params = {"run": str(run)}  # a canned query's parameters for this run
        self.check: Check | None = None  # set by `findings` while a check runs
        self._shared: dict[str, tuple[object, BaseException | None]] = {}

    def shared(self, name: str, compute: Callable[[], object]):
        """`compute()` once per run; when it raised, every later call raises that same error."""
        if name not in self._shared:
            try:
                self._shared[name] = (compute(), None)
            except Exception as error:  # kept: each check that needs it fails with it, reported once
                self._shared[name] = (None, error)
        value, error = self._shared[name]
        if error is not None:
            raise error
        return value

    def finding(self, count: int, text: str, query: str | None = None, compile: int | None = None,
                items: list | None = None, next_steps: str | None = None) -> Finding:
        """A finding of the running check: its kind, severity, explanation and next steps; a query runs on this run;
        `items`, every thing it counts (when its sentence names only some); `next_steps`, what to try about this one
        (the line, the input, the compile: else the check's advice is shown)."""
        made = self.check
        assert made is not None, "context.finding is for a check that findings() runs"
        return Finding(made.severity, made.kind, count, text, query, dict(self.params) if query else {}, compile,
                       made.explanation, next_steps or made.next_steps, items or [], next_steps or None)


def findings(conn: sqlite3.Connection, run_id: int, divergence: bool = True) -> list[Finding]:
    """The findings of one run, most severe first (divergence=False skips the multi-rank comparison)."""
    context = Context(conn, run_id, divergence)
    found: list[tuple[Check, Finding]] = []
    failed: dict[int, tuple[BaseException, list[Check]]] = {}  # by the error's identity: one error, one finding
    for registered in list(CHECKS.values()):
        context.check = registered
        try:
            found += [(registered, finding) for finding in registered.run(conn, run_id, context) or ()]
        except Exception as error:  # one check that fails degrades alone, and says so
            failed.setdefault(id(error), (error, []))[1].append(registered)
    context.check = None
    found += [(checks[0], not_computed(error, checks)) for error, checks in failed.values()]
    ordered = sorted(enumerate(found), key=lambda item: (SEVERITIES.index(item[1][1].severity), item[1][0].order,
                                                         item[0]))
    return [finding for _, (_, finding) in ordered]


def not_computed(error: BaseException, checks: list[Check]) -> Finding:
    """The finding of the checks that raised `error` (several when they needed the same shared value)."""
    kinds = [c.kind for c in checks]
    named = ", ".join(kinds[:3]) + (f" and {len(kinds) - 3} more" if len(kinds) > 3 else "")
    text = (f"The {'check' if len(kinds) == 1 else 'checks'} {named} could not be computed ({type(error).__name__}: "
            f"{short(str(error), 120)}); the other findings are complete.")
    return Finding(NOT_COMPUTED.severity, FAILED, 0, text, None, {}, None, NOT_COMPUTED.explanation,
                   NOT_COMPUTED.next_steps)


FIX_FIRST_RULE = ("the first problem of the list: errors before warnings, and within one severity the kinds in "
                  "their order (failed compiles, the recompile limit, graph breaks, recompiles, rank divergence, …)")


def fix_first(found: list[Finding]) -> Finding | None:
    """The one finding to fix first, by FIX_FIRST_RULE (`found` in the order findings() gives)."""
    return next(iter(problems(found)), None)


def problems(found: list[Finding]) -> list[Finding]:
    """The findings that mean something is wrong (errors and warnings)."""
    return [f for f in found if f.severity != "info"]


def kinds() -> list[Check]:
    """Every kind of finding there is, with what it means: the registered checks in the order findings are
    shown, then the finding a failed check becomes."""
    return sorted(CHECKS.values(), key=lambda c: (SEVERITIES.index(c.severity), c.order)) + [NOT_COMPUTED]
