"""Render a payload as HTML: code highlighted, JSON pretty-printed, lines anchored.

Highlighting is one regular expression per language, run by Python's `re` engine (in C): it finds
only what is coloured (comments, strings, numbers, keywords, builtins, names being defined) in the
text escaped once, whole, and copies the text between two finds as it is. Pygments, which this
replaces, walks a state machine in Python per token and was most of a report's time (1.5 s of 4.9 s
on a 3.8 MB vLLM log; this is 5x faster on that log's payloads). The classes are Pygments' short
ones, so its default style (in tlindex.css) colours them as before.
"""

from __future__ import annotations

import re

from markupsafe import Markup

from tlindex.pages.languages import language, pretty_json  # noqa: F401 (the pages' highlighting is chosen by it)

# Above this size a payload is shown as plain text: a browser lays out coloured spans slowly.
HIGHLIGHT_LIMIT = 2_000_000



def _words(words: str) -> str:
    return r"\b(?:" + "|".join(sorted(words.split(), key=len, reverse=True)) + r")\b"


PYTHON_KEYWORDS = ("as assert async await break class continue def del elif else except finally for global if "
                   "lambda nonlocal pass raise return try while with yield")
PYTHON_BUILTINS = ("abs all any bool bytes callable chr dict enumerate filter float getattr hasattr hash int "
                   "isinstance issubclass iter len list map max min next object open print range repr reversed "
                   "round set setattr slice sorted str sum super tuple type zip")
CPP_TYPES = ("auto bool char double float int long short signed unsigned void size_t int8_t int16_t int32_t "
             "int64_t uint8_t uint16_t uint32_t uint64_t half bfloat16")
CPP_KEYWORDS = ("break case catch class const constexpr continue default delete do else enum extern for goto if "
                "inline namespace new operator private protected public return sizeof static static_cast "
                "reinterpret_cast struct switch template this throw try typedef typename union using virtual "
                "volatile while nullptr true false")

DOUBLE = r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?'  # a one-line string, unterminated at the line's end
SINGLE = r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'?"
TRIPLE = r"\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)"

# A Python word's class; `def` and `class` also colour the name after them.
PYTHON_WORDS = {**dict.fromkeys(PYTHON_KEYWORDS.split(), "k"), **dict.fromkeys(PYTHON_BUILTINS.split(), "nb"),
                "import": "kn", "from": "kn", "and": "ow", "or": "ow", "not": "ow", "in": "ow", "is": "ow",
                "True": "kc", "False": "kc", "None": "kc", "self": "bp", "cls": "bp"}
PYTHON = re.compile("|".join([
    r"(?P<c1>\#[^\n]*)",
    rf"(?P<s>(?:\b[rRbBuUfF]{{1,2}})?(?:{TRIPLE}|{DOUBLE}|{SINGLE}))",
    "(?P<w>" + _words(" ".join(PYTHON_WORDS)) + ")",
    r"(?P<nd>@[A-Za-z_][\w.]*)",
    r"(?P<m>\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?\d+)?j?))",
]))
DEFINED = re.compile(r" +([A-Za-z_]\w*)")  # the name a def or class defines

CPP = re.compile("|".join([
    r"(?P<c1>//[^\n]*)",
    r"(?P<cm>/\*[\s\S]*?(?:\*/|\Z))",
    r"(?P<cp>(?m:^[ \t]*)\#[^\n]*)",
    rf"(?P<s>{DOUBLE}|{SINGLE})",
    "(?P<kt>" + _words(CPP_TYPES) + ")",
    "(?P<k>" + _words(CPP_KEYWORDS) + ")",
    r"(?P<m>\b(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)[uUlLfF]*)",
]))

JSON = re.compile("|".join([
    rf"(?P<s>{DOUBLE})",  # a key when a colon follows (see highlighted)
    r"(?P<kc>\b(?:true|false|null)\b)",
    r"(?P<m>-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)",
]))

SCANNERS = {"python": PYTHON, "cpp": CPP, "json": JSON}


def _shown(text: str, lang: str) -> tuple[str, str]:
    """The text as the page shows it (JSON pretty-printed) and its language."""
    if lang == "json":
        pretty = pretty_json(text)
        return (text, "text") if pretty is None else (pretty, lang)
    return text, lang


def _lines(text: str) -> list[str]:
    """The numbered lines of a text: a last newline ends the last line, it does not start another."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines if text else []


def shown_lines(text: str, lang: str) -> int:
    """How many numbered lines render_payload shows."""
    return len(_lines(_shown(text, lang)[0]))


def escape_text(text: str) -> str:
    """Text as HTML element content: `&`, `<` and `>` escaped (quotes need not be, outside attributes)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def highlighted(text: str, lang: str) -> str:
    """The text as escaped HTML with coloured spans, none of which crosses a line end (a span is closed
    before a newline and opened again after it), so the result can be split into lines.

    The text is escaped first, in one pass, and scanned escaped: no pattern can match inside `&amp;`,
    `&lt;` or `&gt;` (none of amp, lt, gt is a keyword, none holds a digit, a quote or a newline)."""
    scanner = SCANNERS.get(lang)
    if scanner is None or len(text) > HIGHLIGHT_LIMIT:
        return escape_text(text)
    text = escape_text(text)
    out, at = [], 0
    for found in scanner.finditer(text):
        start, end = found.span()
        if start < at or start == end:
            continue
        css, token = found.lastgroup, found.group()
        if css == "w":
            css = PYTHON_WORDS[token]
            if token in ("def", "class"):  # the keyword, then the name it defines
                defined = DEFINED.match(text, end)
                if defined:
                    out += [text[at:start], f'<span class="k">{token}</span>']
                    at, (start, end) = end, defined.span(1)
                    css, token = ("nf" if token == "def" else "nc"), defined.group(1)
        elif css == "s":
            quote = token.lstrip("rRbBuUfF")
            css = "sd" if quote[:3] in ('"""', "'''") else "s2" if quote[:1] == '"' else "s1"
            if lang == "json" and css == "s2" and text[end:end + 1] == ":":
                css = "nt"  # a key (json.dumps puts its colon right after it)
        elif css == "nd" and text[text.rfind("\n", 0, start) + 1:start].strip():
            continue  # @ as an operator (matrix multiply), not a decorator
        if "\n" in token:
            token = token.replace("\n", f'</span>\n<span class="{css}">')
        out += [text[at:start], f'<span class="{css}">{token}</span>']
        at = end
    out.append(text[at:])
    return "".join(out)


# Around a rendered payload, whose text is escaped: no '<' of it is markup, so the first CODE_END after a
# CODE_START ends it, and it holds no link but its line anchors (the report relinks around it)
CODE_START, CODE_END = '<div class="highlight"><pre>', "</pre></div>"


def render_payload(text: str, lang: str) -> Markup:
    """HTML for a payload, with line anchors L-1, L-2, ..."""
    text, lang = _shown(text, lang)
    body = "\n".join(f'<span id="L-{n}"><a class="lineno" href="#L-{n}">{n}</a> {line}</span>'
                     for n, line in enumerate(_lines(highlighted(text, lang)), 1))
    return Markup(f'{CODE_START}{body}{CODE_END}')


def highlighted_lines(text: str, lang: str) -> list[Markup]:
    """The text's lines as highlighted HTML, one per line (tokens spanning lines are split)."""
    return [Markup(line) for line in highlighted(text, lang).split("\n")]
