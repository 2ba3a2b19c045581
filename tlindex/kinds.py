"""Envelope kinds that several parts name: defined here once, read by the write path and the answers alike."""

from __future__ import annotations

# The FX graphs and generated code of a compile: what its content fingerprint hashes (tlindex.fingerprints)
# and what `tlindex diff` compares.
GRAPH_KINDS = ("dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph",
               "aot_joint_graph", "inductor_post_grad_graph", "inductor_output_code")
