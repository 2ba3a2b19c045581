"""Column order of the rows the normalizer emits, per table.

These tuples name the columns of each INSERT; schema/*.sql defines the tables
(tests/test_schema.py checks that every column named here exists there).
"""

from __future__ import annotations

COLUMNS: dict[str, tuple[str, ...]] = {
    "files": ("id", "path", "name", "directory", "size", "mtime", "sha256", "compressed",
              "bytes_ingested", "lines_ingested", "ingested_at"),
    "sources": ("id", "file_id", "pid", "rank", "file_rank", "first_time", "last_time",
                "envelope_count", "bytes", "torch_version", "torch_commit"),
    "strings": ("source_id", "string_id", "value"),
    "payload_data": ("hash", "size", "text_size", "data"),  # read as text through the payloads view
    "envelopes": ("id", "source_id", "line", "offset", "time", "pid", "emitter_file", "emitter_line",
                  "kind", "name", "compile", "compile_id", "compiled_autograd_id", "frame_id",
                  "frame_compile_id", "attempt", "rank", "subgraph_name", "metadata", "payload",
                  "envelope_bytes", "payload_bytes", "payload_lines", "md5_ok"),
    "compiles": ("id", "source_id", "rank", "generation", "compile_id", "compiled_autograd_id",
                 "frame_id", "frame_compile_id", "attempts", "co_name", "co_filename", "co_firstlineno",
                 "status", "fail_type", "fail_reason", "fail_user_frame_filename",
                 "fail_user_frame_lineno", "recompile_reason", "restart_reasons", "graph_breaks",
                 "start_time", "end_time", "duration_s", "dynamo_start", "envelope_count",
                 "envelope_bytes", "payload_bytes"),
    "frames": ("id", "envelope_id", "stack", "depth", "filename_id", "filename", "line", "name", "loc"),
    "artifacts": ("id", "envelope_id", "compile", "kind", "name", "encoding", "payload", "size"),
    "guards": ("id", "envelope_id", "compile", "origin", "position", "depth", "guard_type", "text",
               "source", "user_code", "symbol", "value", "reason", "key", "identity"),
    "metrics": ("id", "envelope_id", "compile", "kind", "compile_id", "co_name", "co_filename",
                "co_firstlineno", "cache_size", "accumulated_cache_size", "guard_count",
                "shape_env_guard_count", "graph_op_count", "graph_node_count", "graph_input_count",
                "start_time", "entire_frame_compile_time_s", "backend_compile_time_s",
                "inductor_compile_time_s", "code_gen_time_s", "dynamo_time_before_restart_s",
                "fail_type", "fail_reason", "fail_user_frame_filename", "fail_user_frame_lineno",
                "restart_reasons", "recompile_reason", "num_graph_breaks", "has_guarded_code",
                "is_forward", "guard_latency_us", "structured_logging_overhead_s", "duration_us",
                "pytorch_version", "dynamo_config", "inductor_config", "functorch_config",
                "compiler_config", "other"),
    "volume": ("source_id", "kind", "name", "emitter_file", "emitter_line", "records", "bytes"),
    "chromium_events": ("id", "source_id", "compile", "name", "cat", "ph", "ts_us", "duration_us",
                        "begin_envelope", "end_envelope"),
    "failed_guards": ("id", "envelope_id", "compile", "position", "previous_compile_id", "reason"),
    "graph_break_events": ("id", "envelope_id", "compile", "reason", "user_file", "user_line"),
    "cache_events": ("id", "envelope_id", "compile", "cache", "result", "key", "reason"),
    "symbols": ("id", "envelope_id", "compile", "symbol", "unbacked", "value", "value_range", "source",
                "node_id"),
    "tensor_descriptions": ("id", "envelope_id", "compile", "kind", "describer_id", "described_id",
                            "dtype", "device", "size", "stride", "storage", "requires_grad",
                            "is_parameter", "source"),
    "collective_ops": ("id", "envelope_id", "compile", "origin", "position", "op", "collective"),
    "op_estimates": ("id", "envelope_id", "compile", "position", "op", "type", "estimated_runtime_ns", "outputs"),
    "graph_executions": ("id", "envelope_id", "position", "compile_id"),
    "ingest_errors": ("id", "file_id", "source_id", "line", "offset", "lines", "bytes", "kind",
                      "message", "excerpt"),
}

# Columns typed in metrics; every other key of a metrics record goes to `other`.
METRICS_TYPED = COLUMNS["metrics"][5:-5]
METRICS_CONFIGS = ("dynamo_config", "inductor_config", "functorch_config", "compiler_config")
