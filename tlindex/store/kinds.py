"""Envelope kinds that several parts name: defined here once, read by the write path and the answers alike."""

from __future__ import annotations

# The FX graphs and generated code of a compile: what its content fingerprint hashes (tlindex.ingest.fingerprints)
# and what `tlindex diff` compares.
GRAPH_KINDS = ("dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph",
               "aot_joint_graph", "inductor_post_grad_graph", "inductor_output_code")

# The graph snapshots a compile logs on its way through the passes (tlindex.answers.passes), by envelope kind
# and by artifact name; graph_dump records are snapshots too, but for the patterns a pass matches.
SNAPSHOT_KINDS = ("dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
                  "aot_inference_graph", "inductor_pre_grad_graph", "inductor_post_grad_graph",
                  "compiled_autograd_graph", "graph_dump")
SNAPSHOT_ARTIFACTS = ("before_pre_grad_graph", "after_pre_grad_graph", "before_joint_graph", "after_joint_graph",
                      "before_post_grad_graph", "inductor_post_grad_graph", "compiled_autograd_graph_pre_reordering")
NOT_SNAPSHOT_PREFIX = "vllm_patterns."
# What ends one Inductor compile's way through the passes: the next snapshot starts another.
OUTPUT_CODE = "inductor_output_code"

# vLLM's records (logged by its backend through trace_structured).
VLLM_CONFIG = "vllm_compilation_config"
VLLM_SPLIT_GRAPH = "vllm_piecewise_split_graph"

# What makes a compile a recompile, as SQL over `compiles` (the view run_totals and the query
# recompile_reasons say the same in their own SQL): a frame compiled before, with another frame_compile_id.
RECOMPILE = "frame_compile_id > 0"
