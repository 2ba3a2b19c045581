"""Which language a payload is written in (python, cpp, json or text): what the pages highlight it as; its JSON
read and pretty-printed only as deep and as long as Python's own parser can go (a log decides neither)."""

from __future__ import annotations

import json

PYTHON_KINDS = {"dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_joint_graph",
                "aot_inference_graph", "inductor_output_code", "inductor_post_grad_graph", "dump_file",
                "optimize_ddp_split_graph", "optimize_ddp_split_child", "compiled_autograd_graph"}
# Past this, a text that starts like JSON is taken for JSON without being parsed: parsing a payload of tens of MB
# to choose its colours costs several times its size; the pages show a head of it (tlindex.pages.artifact).
JSON_PARSED_CHARS = 4 << 20
NOT_JSON = object()  # what json_value answers for a text that is not JSON (or too deep to read)


def json_value(text: str) -> object:
    """The JSON value a text holds, else NOT_JSON: not JSON, or nested deeper than Python's recursive parser goes
    (`[` x 200,000 is valid JSON and a RecursionError, not a ValueError)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return NOT_JSON


def pretty_json(text: str) -> str | None:
    """A JSON text pretty-printed (two spaces), else None: not JSON, too long to parse, or too deep to print."""
    if len(text) > JSON_PARSED_CHARS:
        return None
    value = json_value(text)
    if value is NOT_JSON:
        return None
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


def _looks_like_json(text: str) -> bool:
    """Whether a text is JSON: parsed when short enough; a long one, or one too deep to parse, starts like it."""
    if len(text) > JSON_PARSED_CHARS:
        return True
    try:
        json.loads(text)
        return True
    except RecursionError:
        return True  # its brackets go deeper than the parser: highlighted as JSON, a line at a time
    except ValueError:
        return False


def language(kind: str | None, name: str | None, encoding: str | None, text: str) -> str:
    """python, cpp, json or text, from the artifact and, failing that, its content."""
    head = text.lstrip()[:2000]
    if (encoding == "json" or head[:1] in "{[" and encoding != "string") and head[:1] in "{[\"-0123456789tfn" \
            and _looks_like_json(text):
        return "json"
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
