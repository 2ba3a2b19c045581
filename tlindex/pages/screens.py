"""`tlindex show PAGE` without --json: what the page shows first, in a screen (its header facts, its findings),
not an outline of its data. A page without a screen of its own shows its top-level facts and how many items each
list holds; `--json` prints everything (docs/json.md says what)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tlindex.answers.compiles import time_parts, time_text
from tlindex.answers.findings.words import plural, short, short_location

LINES = 40  # a screen


def _facts(pairs: list[tuple[str, object]]) -> Iterator[str]:
    for name, value in pairs:
        if value not in (None, "", [], {}):
            yield f"  {name}: {value}"


def _run(data: dict) -> Iterator[str]:
    run = data["run"]
    totals = run.get("totals") or {}
    yield f"Run {run['label']} (run {run['id']})"
    where = (f"{plural(run['world_size'], 'rank')}" if run.get("world_size")
             else plural(run.get("source_count") or 0, "process", "processes"))
    yield from _facts([
        ("directory", run.get("directory")), ("time", f"{run.get('start_time')} → {run.get('end_time')}"),
        ("torch", run.get("torch_version")), ("processes", where),
        ("compiles", f"{totals.get('compiles') or 0} ({totals.get('failures') or 0} failed, "
                     f"{totals.get('recompiles') or 0} recompiles, {run.get('restarts') or 0} restarts, "
                     f"{totals.get('graph_breaks') or 0} graph breaks)"),
        ("compile time", time_text(run.get("compile_time")) or "0 s"), ("log bytes", f"{run.get('bytes') or 0:,}"),
        ("ingest errors", run.get("ingest_errors") or None)])
    found = run.get("findings") or []
    yield "Findings:" if found else "Findings: nothing to report"
    for finding in found:
        yield f"  {finding['severity']}: {finding['text']}"


def _compile(data: dict) -> Iterator[str]:
    c = data["compile"]
    rank = f", rank {c['rank']}" if c.get("rank") is not None else ""
    yield f"[{c['compile_id']}] {c.get('co_name') or ''} (row {c['id']}) of run {c.get('run_label')}{rank}"
    where = f"{c['co_filename']}:{c['co_firstlineno']}" if c.get("co_filename") else None
    restarts = c["attempts"] - 1
    yield from _facts([
        ("status", f"{c['status']} ({plural(c['attempts'], 'attempt')}, {plural(restarts, 'restart')})"),
        ("function", where and short_location(where)), ("process", f"pid {c.get('pid')} ({c.get('file')})"),
        ("after torch._dynamo.reset()", c.get("generation") or None),
        ("compile time", time_text(time_parts(c.get("compile_time_s"), c.get("backward_s")), "the frame")),
        ("failure", c.get("fail_type") and f"{c['fail_type']}: {short(c.get('fail_reason'), 200)}"),
        ("recompile reason", short(c.get("recompile_reason"), 200) or None),
        ("graph breaks", c.get("graph_breaks") or None),
        ("cache lookups", ", ".join(f"{e.get('cache')} {e.get('result')}" for e in c.get("cache_events") or [])),
        ("artifacts", len(c.get("artifacts") or []) or None)])
    for brk in (c.get("graph_breaks_list") or [])[:5]:
        lines = [line.strip() for line in (brk.get("reason") or "").splitlines() if line.strip()
                 and not line.startswith("Encountered graph break when attempting")]
        yield f"  graph break: {short(lines[0] if lines else '', 160)}"


def _runs(data: dict) -> Iterator[str]:
    runs = data.get("runs") or []
    yield f"{plural(len(runs), 'run')}, oldest first:"
    for run in runs:
        yield (f"  {run['id']:>4}  {run['label']}  {run.get('ranks_text') or ''}, {plural(run.get('compiles') or 0, 'compile')}, "
               f"{run.get('errors') or 0} failed  {_worst(run)}")


def _worst(run: dict) -> str:
    worst = run.get("worst")
    return short(worst["text"], 100) if isinstance(worst, dict) else "nothing to report"


def _generic(data: dict) -> Iterator[str]:
    for key, value in data.items():
        if isinstance(value, list):
            yield f"{key}: {plural(len(value), 'item')}"
        elif isinstance(value, dict):
            scalars = [f"{k}={short(str(v), 40)}" for k, v in value.items()
                       if v is not None and not isinstance(v, (dict, list))]
            yield f"{key}: {short(', '.join(scalars), 200)}"
        elif value is not None:
            yield f"{key}: {short(str(value), 200)}"


SCREENS: dict[str, Callable[[dict], Iterator[str]]] = {"run": _run, "compile": _compile, "runs": _runs}


def screen(page: str, data: dict, command: str) -> list[str]:
    """The page's screen, at most LINES lines, ending with how to get everything (`command` --json)."""
    lines = list(SCREENS.get(page, _generic)(data))
    if len(lines) > LINES:
        lines = lines[:LINES - 1] + [f"… {len(lines) - LINES + 1:,} more lines"]
    return lines + [f"(everything: {command} --json)"]
