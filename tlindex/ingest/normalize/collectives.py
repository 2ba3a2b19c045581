"""Handlers for what multi-rank desync diagnosis needs: collective schedules,
the collective calls in generated code, per-op estimates, graph execution order."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import orjson

from tlindex.ingest.normalize.protocols import Normalizer

if TYPE_CHECKING:
    from tlindex.ingest.normalize.state import Compile, Process
    from tlindex.ingest.reader import Record

OP_PREFIXES = ("torch.ops._c10d_functional.", "_c10d_functional.", "torch.ops.c10d_functional.")
# A call of a functional collective in inductor's generated Python (not a mention in a comment or string).
CODE_CALL_RE = re.compile(r"torch\.ops\._c10d_functional\.(\w+)\.default\(")
# Base op name -> the collective it performs (tlparse's normalization, plus wait).
COLLECTIVE_PREFIXES = (("all_reduce", "all_reduce"), ("all_gather", "all_gather"),
                       ("reduce_scatter", "reduce_scatter"), ("all_to_all", "all_to_all"),
                       ("broadcast", "broadcast"), ("wait", "wait"), ("reduce", "reduce"))


def collective_of(op: str) -> str:
    """'torch.ops._c10d_functional.all_gather_into_tensor_out.default' -> 'all_gather'."""
    base = op
    for prefix in OP_PREFIXES:
        if base.startswith(prefix):
            base = base[len(prefix):]
            break
    base = base.removesuffix(".default")
    for prefix, collective in COLLECTIVE_PREFIXES:
        if base.startswith(prefix):
            return collective
    return base


def _add_ops(n: Normalizer, envelope_id: int, compile: Compile | None, origin: str, ops: list[str]) -> None:
    for position, op in enumerate(ops):
        n.sink.add("collective_ops", (n.next_id("collective_ops"), envelope_id, compile.id if compile else None,
                                      origin, position, op, collective_of(op)))


def _loads(text: str | None) -> Any:
    try:
        return orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None


def on_collective_schedule(n: Normalizer, proc: Process, rec: Record, envelope_id: int,
                           compile: Compile | None, meta: Any, text: str | None) -> None:
    schedule = _loads(text)
    if isinstance(schedule, list):
        _add_ops(n, envelope_id, compile, "schedule", [str(op) for op in schedule])


def on_output_code(n: Normalizer, proc: Process, rec: Record, envelope_id: int,
                   compile: Compile | None, meta: Any, text: str | None) -> None:
    if not text or "_c10d_functional" not in text:
        return
    calls = [f"torch.ops._c10d_functional.{match.group(1)}.default"
             for line in text.splitlines() if not line.lstrip().startswith("#")
             for match in CODE_CALL_RE.finditer(line)]
    _add_ops(n, envelope_id, compile, "code", calls)


def on_runtime_and_tensor_meta(n: Normalizer, proc: Process, rec: Record, envelope_id: int,
                               compile: Compile | None, meta: Any, text: str | None) -> None:
    info = _loads(text)
    ops = info.get("ops") if isinstance(info, dict) else None
    if not isinstance(ops, list):
        return
    for position, op in enumerate(ops):
        if not isinstance(op, dict):
            continue
        runtime = op.get("estimated_runtime_ns")
        outputs = op.get("outputs")
        n.sink.add("op_estimates", (
            n.next_id("op_estimates"), envelope_id, compile.id if compile else None, position,
            None if op.get("name") is None else str(op.get("name")),
            None if op.get("type") is None else str(op.get("type")),
            runtime if isinstance(runtime, (int, float)) and not isinstance(runtime, bool) else None,
            None if outputs is None else orjson.dumps(outputs).decode()))


def on_graph_execution(n: Normalizer, proc: Process, rec: Record, envelope_id: int,
                       compile: Compile | None, meta: Any, text: str | None) -> None:
    info = _loads(text)
    order = info.get("graph_execution_order") if isinstance(info, dict) else None
    if not isinstance(order, list):
        return
    for position, entry in enumerate(order):
        compile_id = entry.get("compile_id") if isinstance(entry, dict) else None
        n.sink.add("graph_executions", (n.next_id("graph_executions"), envelope_id, position,
                                        None if compile_id is None else str(compile_id)))
