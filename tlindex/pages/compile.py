"""The compile page: everything one compilation logged."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from itertools import zip_longest

from tlindex.answers import compiles, shapes
from tlindex.answers.artifacts import runtime_wrappers
from tlindex.answers.clip import clip
from tlindex.answers.configs import compile_config
from tlindex.answers.findings.words import rank_list
from tlindex.answers.passes import snapshot_counts
from tlindex.answers.provenance import MAPPINGS
from tlindex.answers.resume_functions import has_bytecode, resumes_created
from tlindex.answers.top_breaks import site_url
from tlindex.answers.trie import short_path
from tlindex.errors import NotFound
from tlindex.pages.languages import json_value
from tlindex.pages.rows import Args
from tlindex.store.tables import METRICS_CONFIGS

TIME_FIRST = ("entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s",
              "code_gen_time_s", "dynamo_time_before_restart_s", "duration_us", "start_time")

def compile_data(conn: sqlite3.Connection, args: Args, compile: int) -> dict:
    """Everything one compilation logged: its stack, status, failure, recompiles, metrics, guards, spans,
    artifacts, collectives, caches and symbols."""
    found = compiles.compile_row(conn, compile)
    if found is None:
        raise NotFound(f"No compile {compile}")
    found.update(_why(conn, found))
    found.update(_metrics(conn, compile))
    found.update(_records(conn, compile))
    found["spans"] = _timeline(conn, compile)
    found["artifacts"] = _artifacts(conn, compile)
    found["artifact_groups"] = _by_subgraph(found["artifacts"])
    found.update(collectives_data(conn, found))
    found["config"] = [{"name": name, "payload": c["payload"], "note": c["note"], "keys": len(c["values"] or ())}
                       for name, c in compile_config(conn, compile).items()]  # each config on its payload's page
    found["provenance"] = [a["id"] for a in found["artifacts"] if a["name"] == MAPPINGS and a["payload"]]
    found["siblings"] = compiles.siblings(conn, found)
    found["alike"] = alike_data(conn, found)
    return {"compile": found}


def alike_data(conn: sqlite3.Connection, compile: dict) -> dict | None:
    """The same compile on the other processes of its rank group (compiles.alike): the ranks as people say them, the
    spread of their compile times and the slowest, each rank's row; None when no other process compiled it the same."""
    rows = compiles.alike_ranks(conn, compile)
    if not rows:
        return None
    def named(process: str) -> int | str:
        return int(process) if str(process).lstrip("-").isdigit() else process

    ranks = [named(r["rank"]) for r in rows]
    world = [named(process) for process in compiles.run_processes(conn, compile["run_id"])]
    timed = sorted((r for r in rows if r["compile_time_s"] is not None), key=lambda r: r["compile_time_s"])
    spread = None
    if timed:
        middle = timed[len(timed) // 2]["compile_time_s"] if len(timed) % 2 else \
            (timed[len(timed) // 2 - 1]["compile_time_s"] + timed[len(timed) // 2]["compile_time_s"]) / 2
        spread = {"fastest": timed[0]["compile_time_s"], "median": middle, "slowest": timed[-1]}
    return {"said": rank_list(ranks, world), "count": len(rows), "first": rows[0]["rank"], "spread": spread, "rows": rows}


def _why(conn: sqlite3.Connection, compile: dict) -> dict:
    """Its stack, restarts, recompile reasons, failure and what it has besides (bytecode, graphs, pieces)."""
    row = compile["id"]
    stack = compiles.stack(conn, compile["dynamo_start"]) if compile["dynamo_start"] else []
    for frame in stack:
        frame["short"] = short_path(frame["filename"])
    return {"stack": stack,
            "restarts": _restarts(compile["restart_reasons"]),
            "recompile_reasons": _clipped(compiles.recompile_reasons(conn, row, EMBED_CHARS)),
            "has_bytecode": has_bytecode(conn, row), "snapshots": snapshot_counts(conn, row),
            "pieces": compiles.compiled_pieces(conn, row),
            "resumes": resumes_created(conn, compile) if compile["graph_breaks"] else [],
            "failure": folded(compile["fail_reason"])}


def _clipped(rows: list[dict], column: str = "reason") -> list[dict]:
    """Rows whose column (read up to EMBED_CHARS + 1 characters: the whole is on the row's own page) is cut at a word
    to EMBED_CHARS characters, with "…"."""
    for row in rows:
        row[column] = clip(row[column], EMBED_CHARS)
    return rows


def _restarts(stored: str | None) -> list[str]:
    """The reasons of a compile's restarts (a JSON list of texts), each cut to EMBED_CHARS."""
    reasons = json_value(stored) if stored else []
    return [clip(str(r), EMBED_CHARS) for r in reasons] if isinstance(reasons, list) else [clip(str(stored), EMBED_CHARS)]


def _metrics(conn: sqlite3.Connection, compile: int) -> dict:
    rows = compiles.metrics(conn, compile)
    return {"summaries": [metrics_summary(m) for m in rows if m["kind"] == "compilation_metrics"],
            "traceback": folded(_traceback(rows)), "metrics": [_metrics_fields(m) for m in rows],
            "guard_headings": GUARD_HEADINGS}


def _records(conn: sqlite3.Connection, compile: int) -> dict:
    """Its guards by origin, graph breaks, cache events and symbols."""
    return {"guard_groups": _guard_groups(compiles.guards(conn, compile)),
            "graph_breaks_list": [dict(b, site=site_url(b["reason"] and _gb(b["reason"])))
                                  for b in _clipped(compiles.graph_breaks(conn, compile, EMBED_CHARS))],
            "cache_events": _clipped(compiles.cache_events(conn, compile, EMBED_CHARS)),
            "symbols": shapes.symbols(conn, compile)}


def _gb(reason: str) -> str | None:
    """torch's graph-break id in a reason (the link torch 2.13 appends: …/gb/gb0025.html)."""
    at = reason.find("/gb/gb")
    return reason[at + 4:at + 10] if at >= 0 else None


def _timeline(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """Its chromium spans, placed on one line (percent of the compile's span) for the timeline."""
    spans = compiles.spans(conn, compile)
    if spans:
        start = min(s["ts_us"] for s in spans)
        width = max(max(s["ts_us"] + s["duration_us"] for s in spans) - start, 1)
        for span in spans:
            span["left"] = round(100 * (span["ts_us"] - start) / width, 2)
            span["width"] = max(round(100 * span["duration_us"] / width, 2), 0.2)
            span["ms"] = round(span["duration_us"] / 1000, 1)
    return spans


def _artifacts(conn: sqlite3.Connection, compile: int) -> list[dict]:
    """Its artifacts in log order; torch 2.15's aot_autograd_runtime_wrappers with the wrappers it holds (`wrappers`:
    name and line, as 2.14 logged each in an artifact of that name)."""
    artifacts = compiles.artifacts(conn, compile)
    wrappers = runtime_wrappers(conn, artifacts)
    for artifact in artifacts:
        url = artifact["url"]  # a link record: followed only when it is a web address
        artifact["href"] = url if isinstance(url, str) and url.startswith(("https://", "http://")) else None
        artifact["wrappers"] = wrappers.get(artifact["id"], [])
    return artifacts


def _by_subgraph(artifacts: list[dict]) -> list[tuple[str | None, list[dict]]]:
    """Artifacts grouped by subgraph_name (regional inductor), groups in first-seen order."""
    groups: dict[str | None, list[dict]] = {}
    for artifact in artifacts:
        groups.setdefault(artifact["subgraph_name"], []).append(artifact)
    return list(groups.items())


def collectives_data(conn: sqlite3.Connection, compile: dict) -> dict:
    """The compile's scheduled collectives beside its code's, and the same compile id on the other ranks."""
    ops = {"schedule": [], "code": []}
    for origin, op, collective in compiles.collective_ops(conn, compile["id"]):
        ops[origin].append({"op": op, "collective": collective})
    if not (ops["schedule"] or ops["code"]):
        return {"collectives": [], "collective_ranks": [], "estimate": None}
    rows = [{"position": i, "schedule": s, "code": k, "same": bool(s and k and s["op"] == k["op"])}
            for i, (s, k) in enumerate(zip_longest(ops["schedule"], ops["code"]))]
    mine = " ".join(op["op"] for op in ops["schedule"])
    groups: dict[str, dict] = {}  # the other ranks by their schedule: a row a schedule, not a row a rank
    for rank in compiles.collective_ranks(conn, compile):
        group = groups.setdefault(rank["ops"], {"id": rank["id"], "ranks": [], "shown": rank["shown"],
                                                "same": rank["ops"] == mine})
        group["ranks"].append(rank["rank"])
    for group in groups.values():
        group["said"] = rank_list(group["ranks"])
    estimate = compiles.op_estimate(conn, compile["id"])
    return {"collectives": rows, "collective_ranks": list(groups.values()),
            "estimate": estimate if estimate["ops"] else None}


SHOWN_ABOVE = {"fail_type", "fail_reason", "fail_user_frame_filename", "fail_user_frame_lineno", "restart_reasons",
               "recompile_reason", "co_name", "co_filename", "co_firstlineno", "compile_id", "exception_stack_trace"}
FOLD_LINES = 12          # lines of a long text shown before the fold
EMBED_CHARS = 20_000     # at most this much of one text in the page (a failure can be megabytes)


def folded(text: str | None) -> dict | None:
    """A long text as (head shown, rest folded, bytes left out of the page)."""
    if text is None:
        return None
    text = str(text)
    lines = text.split("\n")
    head = "\n".join(lines[:FOLD_LINES])
    if len(head) > EMBED_CHARS // 4:
        head = head[:EMBED_CHARS // 4]
    rest = text[len(head):EMBED_CHARS]
    return {"head": head, "rest": rest, "rest_lines": rest.count("\n"),
            "omitted": max(len(text) - EMBED_CHARS, 0)}


# The fields tlparse's compilation-metrics page shows, in its order, with what each means.
SUMMARY_TIMES = [
    ("entire_frame_compile_time_s", "whole compile of the frame (Dynamo, then the backend)"),
    ("backend_compile_time_s", "backend: AOTAutograd and Inductor"),
    ("inductor_compile_time_s", "Inductor, inside the backend"),
    ("code_gen_time_s", "Inductor's code generation"),
    ("dynamo_time_before_restart_s", "Dynamo's analysis thrown away by restarts (graph breaks)"),
]
SUMMARY_COUNTS = [
    ("cache_size", "cache entries of this frame before this compile (recompiles so far)"),
    ("accumulated_cache_size", "cache entries including other frames sharing the code"),
    ("guard_count", "guards installed"), ("shape_env_guard_count", "symbolic shape guards among them"),
    ("graph_op_count", "ops in the Dynamo graph (0: an empty graph)"), ("graph_node_count", "nodes in the graph"),
    ("graph_input_count", "graph inputs"),
]
SUMMARY_LISTS = [("compliant_custom_ops", "custom ops that comply with PT2"),
                 ("non_compliant_ops", "ops that do not (a reason for graph breaks)")]
GUARD_HEADINGS = {"dynamo_cpp_guards_str": "Guard tree", "dynamo_guards": "Guards (older torch)",
                  "guard_added": "Guards added", "guard_added_fast": "Guards added fast",
                  "symbolic_shape_specialization": "Symbolic shape specializations"}


def metrics_summary(row: dict) -> dict:
    """The important fields of one compilation_metrics record, as tlparse shows them: durations, counts, lists."""
    other = _other(row.get("other"))
    fields = {**other, **row}  # a typed column wins: `other` keeps what the door refused (tlindex.ingest.typecheck)
    start = fields.get("start_time")
    started = (datetime.fromtimestamp(start, timezone.utc).isoformat(timespec="milliseconds")
               if isinstance(start, (int, float)) else None)
    times = [(name, f"{fields[name]:.3f} s", help) for name, help in SUMMARY_TIMES
             if isinstance(fields.get(name), (int, float))]
    counts = [(name, fields[name], help) for name, help in SUMMARY_COUNTS if fields.get(name) is not None]
    lists = [(name, value if isinstance(value, list) else [value], help) for name, help in SUMMARY_LISTS
             if (value := fields.get(name))]
    return {"started": started, "times": times, "counts": counts, "lists": lists}


def _other(stored: str | None) -> dict:
    """A metrics row's `other` fields (JSON written at ingest), or none when they cannot be read back (nested
    deeper than Python's parser goes: the envelope keeps them)."""
    value = json_value(stored) if stored else {}
    return value if isinstance(value, dict) else {}


def _traceback(metrics_rows: list[dict]) -> str | None:
    """The Python traceback of a failure (compilation_metrics' exception_stack_trace), as lines."""
    for row in metrics_rows:
        trace = _other(row.get("other")).get("exception_stack_trace")
        if trace:
            return "".join(trace) if isinstance(trace, list) else str(trace)
    return None


def _guard_groups(guards: list[dict]) -> list[tuple[str, list[dict], bool]]:
    """(origin, its guards, whether any has a reason: the table's reason column) per origin."""
    groups: dict[str, list[dict]] = {}
    for guard in guards:
        groups.setdefault(guard.pop("origin"), []).append(guard)
    return [(origin, group, any(g["reason"] for g in group)) for origin, group in groups.items()]


def _metrics_fields(row: dict) -> dict:
    """A metrics row as (key, value) pairs: times first, then the rest, then configs."""
    other = _other(row.pop("other"))
    configs = {k: row.pop(k) for k in METRICS_CONFIGS}
    kind = row["kind"]
    fields = {k: v for k, v in {**row, **other}.items()
              if k not in ("id", "envelope_id", "compile", "kind") and k not in SHOWN_ABOVE and v is not None}
    ordered = [(k, fields.pop(k)) for k in TIME_FIRST if k in fields]
    ordered += [(k, fields[k]) for k in sorted(fields) if k.endswith(("_s", "_us", "_ms"))]
    ordered += [(k, v) for k, v in sorted(fields.items()) if not k.endswith(("_s", "_us", "_ms"))]
    return {"kind": kind, "fields": [(k, folded(v if isinstance(v, (str, int, float)) else json.dumps(v)))
                                     for k, v in ordered],
            "configs": {k: v for k, v in configs.items() if v}}
