"""Render a payload as HTML: code highlighted (Pygments), JSON pretty-printed, lines anchored."""

from __future__ import annotations

import json

from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, JsonLexer, PythonLexer, TextLexer
from pygments.token import STANDARD_TYPES

# Above this size a payload is shown as plain text: highlighting it would make the page slow.
HIGHLIGHT_LIMIT = 400_000
FORMATTER = HtmlFormatter(linenos="inline", lineanchors="L", anchorlinenos=True, cssclass="highlight")

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


def _shown(text: str, lang: str) -> tuple[str, str]:
    """The text as the page shows it (JSON pretty-printed) and its language."""
    if lang == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False), lang
        except ValueError:
            return text, "text"
    return text, lang


def shown_lines(text: str, lang: str) -> int:
    """How many numbered lines render_payload shows (Pygments drops a last empty line)."""
    text, _ = _shown(text, lang)
    if not text:
        return 0
    if len(text) > HIGHLIGHT_LIMIT:
        return text.count("\n") + 1
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def render_payload(text: str, lang: str) -> Markup:
    """HTML for a payload, with line anchors L-1, L-2, ..."""
    text, lang = _shown(text, lang)
    if len(text) > HIGHLIGHT_LIMIT:
        lines = text.split("\n")
        body = Markup("\n").join(
            Markup('<span id="L-{0}"><a class="lineno" href="#L-{0}">{0}</a> {1}</span>').format(n, line)
            for n, line in enumerate(lines, 1))
        return Markup('<div class="highlight plain"><pre>{}</pre></div>').format(body)
    # stripnl=False: leading and trailing blank lines stay, so the line numbers are the payload's
    lexer = {"python": PythonLexer, "cpp": CppLexer, "json": JsonLexer}.get(lang, TextLexer)(stripnl=False)
    return Markup(highlight(text, lexer, FORMATTER))


def stylesheet() -> str:
    return FORMATTER.get_style_defs(".highlight")


def highlighted_lines(text: str, lang: str) -> list[Markup]:
    """The text's lines as highlighted HTML, one per line (tokens spanning lines are split)."""
    lines = text.split("\n")
    if len(text) > HIGHLIGHT_LIMIT or lang not in ("python", "cpp", "json"):
        return [escape(line) for line in lines]
    lexer = {"python": PythonLexer, "cpp": CppLexer, "json": JsonLexer}[lang](stripnl=False, ensurenl=False)
    out: list[list[str]] = [[]]  # strings joined once per line: Markup's own concatenation escapes each time
    for token, value in lexer.get_tokens(text):
        css = _CSS.get(token)
        if css is None:
            css = _CSS[token] = _css_class(token)
        for n, part in enumerate(value.split("\n")):
            if n:
                out.append([])
            if part:
                out[-1].append(f'<span class="{css}">{escape(part)}</span>' if css else str(escape(part)))
    return [Markup("".join(parts)) for parts in out]


_CSS: dict = {}  # token type: its class (Pygments' classes are [a-z0-9]: nothing to escape)


def _css_class(token) -> str:
    """Pygments' short class for a token type (as HtmlFormatter names it), or '' for plain text."""
    while token not in STANDARD_TYPES:
        token = token.parent
    return STANDARD_TYPES[token]
