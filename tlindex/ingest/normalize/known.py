"""What tlindex knows of the records torch writes, in one place.

An envelope kind, or an artifact's name, is known when a handler reads it (handlers.HANDLERS, ARTIFACT_HANDLERS, the
cache names of CACHE_NAME_RE, the records context.py attributes by their payload) or when tlindex stores it plain on
purpose: a graph, code or report that its compile page lists as an artifact and its artifact page shows (PLAIN_KINDS,
PLAIN_ARTIFACTS, PLAIN_ARTIFACT_RE; from torch's own trace_structured calls, 2.13 to 2.15). Every record is stored
whole whatever its kind (envelopes, artifacts, payloads); one of a kind known nowhere here is one tlindex does not know
yet, and the ingest summary and the run page list those (`unknown_words`).
"""

from __future__ import annotations

import re

from tlindex.ingest.normalize.context import COMPILE_ID_IN_PAYLOAD
from tlindex.ingest.normalize.handlers import ARTIFACT_HANDLERS, CACHE_NAME_RE, HANDLERS

# Envelope kinds without a handler, stored plain: graphs and code (a compile's artifacts, diffed and walked through
# its passes), torch.export's and draft export's records (the export findings read them), AOTInductor's code.
PLAIN_KINDS = frozenset({
    "dynamo_output_graph", "optimize_ddp_split_graph", "optimize_ddp_split_child", "compiled_autograd_graph",
    "aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph",
    "inductor_pre_grad_graph", "inductor_post_grad_graph", "graph_dump", "dump_file", "link",
    "export", "exported_program", "propagate_real_tensors", "propagate_real_tensors_provenance",
    "guard_on_data_dependent_error", "expression_created", "missing_fake_kernel", "mismatched_fake_kernel",
})
# Artifact names without a handler, stored plain (their page shows the payload; the compile page lists them).
PLAIN_ARTIFACTS = frozenset({
    # Dynamo
    "dynamo_error", "dynamo_side_effects", "precompile_cache_bypass", "compiler_collective", "dynamo_cache_bypass",
    "dynamo_cache_entries", "dynamo_cache_exception", "get_local_code_state", "get_remote_code_state",
    "get_extra_remote_code_state", "put_local_code_state", "put_remote_code_state", "put_extra_remote_code_state",
    "compiled_autograd_compile_reasons", "compiled_autograd_graph_pre_reordering", "invoke_subgraph_backward_duplicate",
    # AOTAutograd, and its runtime wrappers: one artifact per wrapper up to 2.14, all in one from 2.15
    "aot_forward_graph_fw_metadata", "aot_forward_graph_fw_subclass_metadata", "torch._functorch.config",
    "aot_inference_graph_after_hop_passes", "aot_saved_tensors_hooks_graphs", "eager_compile_backwards_failure",
    "aot_autograd_runtime_wrappers", "runtime_wrapper_orchestration", "compiled_fn_wrapper",
    "compiled_function_forward", "compiled_function_backward", "backward_prologue", "backward_epilogue",
    "output_alias_wrapper", "mutation_epilogue", "functionalized_rng_wrapper", "effect_tokens_wrapper",
    "dedup_wrapper", "synthetic_base_wrapper", "debug_assert_wrapper", "subclass_wrapper", "backward_subclass_unwrap",
    "backward_subclass_wrapper", "min_cut_information", "before_activation_quantization_fwd_aten_pass",
    "after_activation_quantization_fwd_aten_pass", "before_activation_quantization_bwd_aten_pass",
    "after_activation_quantization_bwd_aten_pass", "min_cut_failed_fx_graph", "min_cut_failed_edge_list",
    "min_cut_failed_svg", "aot_joint_graph_sync_decision_cross_ranks",
    # Inductor
    "fx_graph_runnable", "before_pre_grad_graph", "after_pre_grad_graph", "before_joint_graph", "after_joint_graph",
    "before_post_grad_graph", "inductor_post_grad_graph", "inductor_provenance_tracking_node_mappings",
    "inductor_provenance_tracking_kernel_stack_traces", "inductor_autotune_at_compile_time_code", "triton_kernel_info",
    "reorder_communication_preserving_peak_memory", "sink_waits_iterative_info",
    "fx_bucketing_passes_reduce_scatter_buckets", "fx_bucketing_passes_all_gather_buckets", "pre_decomp_comms",
    "post_decomp_comms", "pre_bucketing_collective_sizes", "pre_bucketing_collective_sizes_after",
    "pre_bucketing_fsdp_collectives", "fx_compute_nodes_runtime_estimation", "fx_collectives_analytical_estimation",
    "inductor_fx_passes_overlap_bucketing", "overlap_scheduling_graph_before", "overlap_scheduling_graph_after",
    "pge_profile_vs_analytical", "inductor_spmd_graph_mismatch", "scheduler_nodes_before_comm_overlap",
    "inductor_overlap_cyclic_extra_deps", "compile_worker_sidecar_death", "native_dsl_compile",
    # torch.fx
    "fx_interpreter_error", "make_fx_fail_partial", "fx_net_acc_splitter_finder_events",
    # older torch (tlparse's test logs)
    "after_post_grad_graph", "inductor_post_to_pre_grad_nodes", "aotautograd_cache_hash", "fx_graph_cache_hash",
})
# Artifact names torch makes from another name: resume functions' bytecode, a pass's or rule's graph, FlexGEMM's
# lowering phases (`flex_gemm_<phase>`); and vLLM's records (its backend logs them: `vllm_compilation_config`, ...).
PLAIN_ARTIFACT_RE = re.compile(r"_(?:ORIGINAL|MODIFIED)_BYTECODE$|_ITERATIVE_RECOMPUTE_ERROR$|_post_grad$|_pre_grad$"
                               r"|_fused$|^optimus_|^cff_|^flex_gemm_|^vllm_")


def known(kind: str, name: str | None) -> bool:
    """Whether tlindex reads or deliberately stores plain an envelope of this kind (an artifact: of this name)."""
    if kind != "artifact":
        return kind in HANDLERS or kind in PLAIN_KINDS
    return name is not None and (name in ARTIFACT_HANDLERS or name in PLAIN_ARTIFACTS or name in COMPILE_ID_IN_PAYLOAD
                                 or CACHE_NAME_RE.match(name) is not None or PLAIN_ARTIFACT_RE.search(name) is not None)


def kind_name(kind: str, name: str | None) -> str:
    """How the listing names a kind: the envelope kind, or `artifact NAME`."""
    return f"artifact {name}" if kind == "artifact" else kind


def unknown_counts(rows) -> dict[str, int]:
    """From (kind, name, records) rows, the records of each kind tlindex does not know, by kind_name."""
    counts: dict[str, int] = {}
    for kind, name, records in rows:
        if not known(kind, name):
            counts[kind_name(kind, name)] = counts.get(kind_name(kind, name), 0) + records
    return counts


def count_unknown(counts: dict[str, int], volume: dict[tuple, list[int]]) -> None:
    """Add to `counts` the records of a process's volume ((kind, name, file, line) -> [records, bytes]) that tlindex
    does not know."""
    for name, records in unknown_counts((kind, artifact, count) for (kind, artifact, *_), (count, _) in volume.items()
                                        ).items():
        counts[name] = counts.get(name, 0) + records


def unknown_words(counts: dict[str, int], shown: int = 5) -> str | None:
    """`3 records of 1 kind tlindex does not know yet: artifact x ×3 …`, the most frequent first; None for none."""
    if not counts:
        return None
    records = sum(counts.values())
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    listed = ", ".join(f"{name} ×{count:,}" for name, count in ordered[:shown])
    more = f", and {len(ordered) - shown} more" if len(ordered) > shown else ""
    return (f"{records:,} record{'s' * (records != 1)} of {len(counts)} kind{'s' * (len(counts) != 1)} tlindex does "
            f"not know yet: {listed}{more} (stored as they came: the envelopes and artifacts tables hold them)")
