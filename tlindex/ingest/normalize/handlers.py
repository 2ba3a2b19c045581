"""One small handler per envelope family, keyed by envelope kind.

A handler receives the normalizer, the record's process and compilation, the
envelope id already written, the metadata and the payload text, and adds the
rows of its own tables. Supporting a new envelope is one function here, one
entry in HANDLERS (or ARTIFACT_HANDLERS) and its test.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

import orjson

from tlindex.ingest.guard_keys import guard_identity, guard_key
from tlindex.ingest.normalize.collectives import (
    on_collective_schedule,
    on_graph_execution,
    on_output_code,
    on_runtime_and_tensor_meta,
)
from tlindex.ingest.normalize.protocols import Normalizer
from tlindex.ingest.normalize.spans import on_chromium_event
from tlindex.ingest.normalize.strings import on_str
from tlindex.ingest.typecheck import TIMES, noun, typed_columns, valid
from tlindex.store.tables import METRICS_CONFIGS, METRICS_TYPED

if TYPE_CHECKING:
    from tlindex.ingest.normalize.state import Compile, Process
    from tlindex.ingest.reader import Record

Handler = Callable[["Normalizer", "Process", "Record", int, "Compile | None", Any, "str | None"], None]

METRICS_KINDS = frozenset({
    "compilation_metrics", "bwd_compilation_metrics", "aot_autograd_backward_compilation_metrics",
    "compilation_metrics_runtime", "bwd_compilation_metrics_runtime",
})


METRICS_NUMBERS = dict(typed_columns()["metrics"])  # the metrics columns declared INTEGER or REAL


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value, default=repr).decode()


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, int) else None


def on_dynamo_start(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if compile is None:
        return
    compile.started_attempts.add(rec.data.get("attempt") or 0)
    if compile.dynamo_start is None:
        compile.dynamo_start = envelope_id  # a compile without metrics is named by its stack's last frame, at merge
    stack = meta.get("stack") if isinstance(meta, dict) else None
    if stack is not None and not isinstance(stack, list):  # its frames are not read: said, the rest lands
        raise ValueError(f"its stack is {type(stack).__name__.replace('dict', 'an object')}, not a list of frames")


def on_metrics(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if not isinstance(meta, dict):
        return
    kind = next(iter(rec.data))
    refused = {column: meta[column] for column, declared in METRICS_NUMBERS.items()
               if column in meta and not valid(meta[column], declared, TIMES.get(("metrics", column)))}
    if refused:  # types at the door (tlindex.ingest.typecheck): NULL, said, and kept in `other`
        meta = {**meta, **dict.fromkeys(refused)}
        for column, value in refused.items():
            belongs = noun("metrics", column, METRICS_NUMBERS[column])
            n.error(rec.line, rec.offset, "bad_value", f"metrics.{column}: {kind} record gives {_json(value)[:120]} "
                    f"where {belongs} belongs; the column is NULL (`other` keeps the value)", pid=rec.pid)
    if compile is not None:
        compile.add_metrics(kind, meta)
    typed = []
    for column in METRICS_TYPED:
        value = meta.get(column)
        if column == "restart_reasons" and value is not None:
            value = _json(value)
        elif isinstance(value, (list, dict)):
            value = _json(value)
        elif isinstance(value, bool):
            value = int(value)
        typed.append(value)
    configs = []
    for column in METRICS_CONFIGS:
        value = meta.get(column)
        if value is None:
            configs.append(None)
        else:
            configs.append(n.store_text(value if isinstance(value, str) else _json(value)))
    known = set(METRICS_TYPED) | set(METRICS_CONFIGS) | {"compile_id"}
    other = {key: value for key, value in meta.items() if key not in known}
    other.update(refused)
    n.sink.add("metrics", (n.next_id("metrics"), envelope_id, compile.id if compile else None, kind,
                           meta.get("compile_id"), *typed, *configs, _json(other)))


def add_guard(n: Normalizer, envelope_id: int, compile, origin: str, position: int, depth, guard_type,
              text: str, source=None, user_code=None, symbol=None, value=None, reason=None) -> None:
    """One guards row; key and identity (crc32s of type and text, tlindex.ingest.guard_keys) let queries compare
    guards as integers, within one process and across processes."""
    key = guard_key(guard_type, text)
    identity = guard_identity(guard_type, text) if "___" in text else key
    n.sink.add("guards", (n.next_id("guards"), envelope_id, compile.id if compile else None, origin, position,
                          depth, guard_type, text, source, user_code, symbol, value, reason, key, identity))


# A line of the guard tree: indentation bars, "+- ", then "TYPE: text" or a manager name.
GUARD_LINE_RE = re.compile(r"^((?:\| )*)\+- (.*)$")
GUARD_SOURCE_RE = re.compile(r"source=(.*?), accessed_by=")


def on_cpp_guards(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if not text:
        return
    position = 0
    for line in text.split("\n"):
        match = GUARD_LINE_RE.match(line)
        if match is None:
            continue
        bars, body = match.groups()
        guard, _, user_code = body.partition("  # ")
        guard = guard.rstrip()
        guard_type, sep, rest = guard.partition(": ")
        if not sep or " " in guard_type:
            guard_type, rest = guard.split(" ", 1)[0].rstrip(":"), guard
        source = GUARD_SOURCE_RE.search(rest)
        add_guard(n, envelope_id, compile, "dynamo_cpp_guards_str", position, len(bars) // 2, guard_type, rest,
                  source.group(1) if source else None, user_code.strip() or None)
        position += 1


def on_dynamo_guards(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    """The JSON list of {code, stack, user_stack} older torch logged (dead in 2.13)."""
    try:
        guards = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return
    if not isinstance(guards, list):
        return
    for position, guard in enumerate(guards):
        if not isinstance(guard, dict):
            continue
        for key in ("stack", "user_stack"):
            if isinstance(guard.get(key), list):
                n.frames(proc, envelope_id, f"guards[{position}].{key}", guard[key])
        add_guard(n, envelope_id, compile, "dynamo_guards", position, None, None, str(guard.get("code")),
                  user_code=n.frame_text(proc, guard.get("user_stack")))


def on_guard_added(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if not isinstance(meta, dict):
        return
    kind = next(iter(rec.data))
    sources = meta.get("symbol_to_sources")
    add_guard(n, envelope_id, compile, kind, 0, None, meta.get("prefix"), str(meta.get("expr")),
              _json(sources) if sources else None, n.frame_text(proc, meta.get("user_stack")))


def on_specialization(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if not isinstance(meta, dict):
        return
    sources = meta.get("sources")
    if isinstance(sources, list):
        sources = ", ".join(map(str, sources))
    symbol, value = meta.get("symbol"), meta.get("value")
    add_guard(n, envelope_id, compile, "symbolic_shape_specialization", 0, None, None, f"{symbol} = {value}",
              sources, n.frame_text(proc, meta.get("user_stack")), symbol,
              None if value is None else str(value), meta.get("reason"))


def on_symbol(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if not isinstance(meta, dict):
        return
    unbacked = next(iter(rec.data)) == "create_unbacked_symbol"
    value = meta.get("val")
    n.sink.add("symbols", (n.next_id("symbols"), envelope_id, compile.id if compile else None,
                           str(meta.get("symbol")), int(unbacked), None if value is None else str(value),
                           meta.get("vr"), meta.get("source"),
                           None if meta.get("node_id") is None else str(meta.get("node_id"))))


def on_describe(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if not isinstance(meta, dict):
        return
    kind = next(iter(rec.data)).removeprefix("describe_")
    size = meta.get("size")
    stride = meta.get("stride")
    n.sink.add("tensor_descriptions", (
        n.next_id("tensor_descriptions"), envelope_id, compile.id if compile else None, kind,
        _int(meta.get("describer_id")), _int(meta.get("id")), meta.get("dtype"), meta.get("device"),
        None if size is None else _json(size), None if stride is None else _json(stride),
        _int(meta.get("storage")), _int(meta.get("requires_grad")), _int(meta.get("is_parameter")),
        meta.get("source") if isinstance(meta.get("source"), str) else None))


def on_artifact(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str):
        return
    handler = ARTIFACT_HANDLERS.get(name)
    if handler is None and CACHE_NAME_RE.match(name):
        handler = on_cache_event
    if handler is not None:
        handler(n, proc, rec, envelope_id, compile, meta, text)


# "0/1: tensor 'x' size mismatch ..." -> previous compile id, reason
RECOMPILE_RE = re.compile(r"^(!?\d+(?:/\d+)*(?:/\d+)?): (.*)$", re.S)


def on_recompile_reasons(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if text is None:
        return
    reasons: list = [text]
    if text.startswith("["):  # one reason: a bare string; several: a JSON list
        try:
            parsed = orjson.loads(text)
            if isinstance(parsed, list):
                reasons = parsed
        except orjson.JSONDecodeError:
            pass
    for position, reason in enumerate(reasons):
        reason = str(reason)
        match = RECOMPILE_RE.match(reason)
        previous, reason = match.groups() if match else (None, reason)
        n.sink.add("failed_guards", (n.next_id("failed_guards"), envelope_id,
                                         compile.id if compile else None, position, previous, reason))
    if compile is not None and compile.recompile_reason is None and reasons:
        compile.recompile_reason = str(reasons[0])


BREAK_AT_RE = re.compile(r"Graph break in user code at (.*):(\d+)")


def on_graph_break(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    if text is None:
        return
    where = BREAK_AT_RE.search(text)
    reason = text
    head, sep, rest = text.partition("Graph Break Reason: ")
    if sep:
        reason = rest
    for end in ("\nUser code traceback:", "\n\nTraceback (most recent call last)"):
        reason = reason.split(end, 1)[0]
    n.sink.add("graph_break_events", (n.next_id("graph_break_events"), envelope_id, compile.id if compile else None,
                                reason.strip(), where.group(1) if where else None,
                                int(where.group(2)) if where else None))
    if compile is not None:
        compile.graph_breaks += 1


CACHE_NAME_RE = re.compile(r"^(.+?)_cache_(hit|miss|bypass|pickle_failure)$")


def on_cache_event(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    cache, result = CACHE_NAME_RE.match(meta["name"]).groups()
    info: Any = None
    if text:
        try:
            info = orjson.loads(text)
        except orjson.JSONDecodeError:
            info = None
    key = reason = None
    if isinstance(info, dict):
        key = info.get("key")
        reason = info.get("cache_bypass_reason") or info.get("reason")
    elif result == "bypass" and text:
        reason = text
    n.sink.add("cache_events", (n.next_id("cache_events"), envelope_id, compile.id if compile else None,
                                cache, result, None if key is None else str(key),
                                None if reason is None else str(reason)))


PIECE_FIELDS = ("piecewise_index", "submod_name", "total_piecewise_compiles", "compile_range_start",
                "compile_range_end", "is_single_size", "is_cudagraph_capture_size")


def on_piece_compile(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    """vLLM's vllm_piecewise_compile_start: a piece of a split graph compiled for one range."""
    info = orjson.loads(text) if text else None
    if not isinstance(info, dict):
        raise ValueError("vllm_piecewise_compile_start payload is not a JSON object")
    values = []
    for field in PIECE_FIELDS:
        value = info.get(field)
        if isinstance(value, bool):
            value = int(value)
        values.append(value if value is None or isinstance(value, (int, str)) else str(value))
    n.sink.add("piece_compiles", (n.next_id("piece_compiles"), envelope_id, compile.id if compile else None, *values))


def on_torch_version(n: Normalizer, proc, rec, envelope_id, compile, meta, text) -> None:
    try:
        info = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return
    if isinstance(info, dict) and proc.torch_version is None:
        proc.torch_version = info.get("pytorch_version")
        proc.torch_commit = info.get("commit")


HANDLERS: dict[str, Handler] = {
    "str": on_str,
    "dynamo_start": on_dynamo_start,
    "chromium_event": on_chromium_event,
    "dynamo_cpp_guards_str": on_cpp_guards,
    "dynamo_guards": on_dynamo_guards,
    "guard_added": on_guard_added,
    "guard_added_fast": on_guard_added,
    "symbolic_shape_specialization": on_specialization,
    "create_symbol": on_symbol,
    "create_unbacked_symbol": on_symbol,
    "describe_tensor": on_describe,
    "describe_storage": on_describe,
    "describe_source": on_describe,
    "artifact": on_artifact,
    "inductor_output_code": on_output_code,
    **{kind: on_metrics for kind in METRICS_KINDS},
}

ARTIFACT_HANDLERS: dict[str, Handler] = {
    "vllm_piecewise_compile_start": on_piece_compile,
    "recompile_reasons": on_recompile_reasons,
    "dynamo_graph_break_reason": on_graph_break,
    "torch_version": on_torch_version,
    "inductor_collective_schedule": on_collective_schedule,
    "inductor_runtime_and_tensor_meta": on_runtime_and_tensor_meta,
    "graph_execution": on_graph_execution,
}
