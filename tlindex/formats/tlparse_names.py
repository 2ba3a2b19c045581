"""How tlparse 0.4.3 names compiles and their outputs, for users (and tools) that know its layout.

tlindex keeps compile ids as torch prints them (`0/1`, `!0/1/2`, `!3`, and
`-/-` for records without any compile id); tlparse shows them in brackets,
always with both frame parts (`[!3/-/-]`) and with the attempt when it is not
0 (`[0/0_1]`). Its per-compile outputs are named after the record's kind or
name (`dynamo_output_graph_3.txt`, `<artifact name>_7.json`, ...).
"""

from __future__ import annotations

# Kinds whose payload tlparse writes as `<kind>_N.txt` in the compile's folder.
IR_KINDS = frozenset({
    "dynamo_output_graph", "optimize_ddp_split_graph", "compiled_autograd_graph", "dynamo_cpp_guards_str",
    "aot_forward_graph", "aot_backward_graph", "aot_inference_graph", "aot_joint_graph",
    "inductor_pre_grad_graph", "inductor_post_grad_graph", "inductor_output_code",
})
# Kinds tlparse renders as a page of their own (`<kind>_N.html`).
PAGE_KINDS = frozenset({
    "compilation_metrics", "bwd_compilation_metrics", "aot_autograd_backward_compilation_metrics",
    "dynamo_guards",
})


def compile_key(ca: int | None, frame: int | None, frame_compile: int | None, attempt: int | None = None) -> str:
    """tlparse's display of a compile id: [0/1], [0/0_1], [!3/-/-], [-/-]."""
    dash = lambda value: "-" if value is None else str(value)  # noqa: E731
    text = (f"!{ca}/" if ca is not None else "") + f"{dash(frame)}/{dash(frame_compile)}"
    if attempt:
        text += f"_{attempt}"
    return f"[{text}]"


def output_name(kind: str, name: str | None) -> str | None:
    """The stem tlparse gives a record's entry in its compile's list (None: it lists none)."""
    if kind in IR_KINDS or kind in PAGE_KINDS:
        return kind
    if kind == "optimize_ddp_split_child":
        return f"optimize_ddp_split_child_{name}"
    if kind in ("artifact", "graph_dump", "link", "dump_file") and name is not None:
        # dump_file: dump_file/<name>.html, or dump_file/eval_with_key_<K>.html for FX's generated code
        return "eval_with_key" if kind == "dump_file" and "<eval_with_key>" in name else name
    return None
