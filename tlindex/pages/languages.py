"""Which language a payload is written in (python, cpp, json or text): what the pages highlight it as."""

from __future__ import annotations

import json

PYTHON_KINDS = {"dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_joint_graph",
                "aot_inference_graph", "inductor_output_code", "inductor_post_grad_graph", "dump_file",
                "optimize_ddp_split_graph", "optimize_ddp_split_child", "compiled_autograd_graph"}


def language(kind: str | None, name: str | None, encoding: str | None, text: str) -> str:
    """python, cpp, json or text, from the artifact and, failing that, its content."""
    head = text.lstrip()[:2000]
    if encoding == "json" or head[:1] in "{[" and encoding != "string":
        try:
            json.loads(text)
            return "json"
        except ValueError:
            pass
    if kind == "graph_dump":
        return "cpp"
    # Inductor's CPU output code is Python that embeds C++ kernels as strings.
    if kind in PYTHON_KINDS or (name or "").endswith(("_graph", "graph_runnable", "_wrapper", "_orchestration",
                                                      "_forward", "_backward", "_prologue", "_epilogue")):
        return "python"
    if "#include" in head or "extern \"C\"" in head:
        return "cpp"
    if head.startswith(("import ", "from ", "class ", "def ", "# AOT ID")):
        return "python"
    return "text"
