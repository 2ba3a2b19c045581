"""SQL string functions whose cost is the product of their arguments' lengths, made to cost at most one pass over
their arguments, or refused: registered on every connection by tlindex.store.limits.

SQLite runs one call of `instr`, `replace`, `like`/`glob` (the LIKE and GLOB operators) or the two-argument `trim`,
`ltrim` and `rtrim` as one step of its VM, and each compares its second argument at every position of its first:
`instr(4 MB of 'a', 100 kB of 'a' || 'b')` took 20.7 s, out of reach of a progress handler (Datasette's time limit),
which runs between steps. Here `instr` and `replace` are Python's `str.find` and `str.replace` (two-way search:
linear); LIKE and GLOB patterns whose wildcards are only `%` (`*`) match in Python, segment by segment with
`str.find`; any other call runs SQLite's own function (on a private connection, as bounded_printf does) when
its arguments' lengths multiplied stay under STEP_BUDGET, else it is refused: the statement fails with
"user-defined function raised exception" (`refusal()` says why, for `tlindex query`).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable
from functools import lru_cache

# Character comparisons one call may cost: SQLite's LIKE compares ~3e8 a second, GLOB ~2e8, trim ~1e9 (measured
# on this project's 2-core machine), so a call stays well under Datasette's 1 s time limit.
STEP_BUDGET = 50_000_000
_STATE = threading.local()  # the last refusal, per thread
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}  # SQLite's LIKE folds ASCII letters only


class TooCostly(Exception):
    """A call whose arguments are too long for one step of a statement."""


def refusal() -> str | None:
    """Why the last call refused in this thread, if one did (and forget it)."""
    why, _STATE.refused = getattr(_STATE, "refused", None), None
    return why


def _refuse(name: str, a: int, b: int) -> TooCostly:
    _STATE.refused = why = (f"{name}() of a text of {a:,} characters with one of {b:,} would compare up to "
                            f"{a * b:,} characters in one step, more than {STEP_BUDGET:,}; use shorter arguments")
    return TooCostly(why)


def _sqlite(sql: str, *args: object) -> object:
    """SQLite's own function, on this thread's plain connection (limited in length as every connection is)."""
    return _side[0]().execute(sql, args).fetchone()[0]


def _text(value: object) -> object:
    """A number as the text SQLite makes of it (a text as it is; a blob or NULL unchanged): the functions here then
    take the same path for `replace(1, 1, x)` as for texts, with no copy of a long argument to SQLite's own."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return str(value) if isinstance(value, int) else _sqlite("SELECT CAST(? AS TEXT)", value)


def _size(value: object) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 24  # a number's text is short


def instr(haystack: object, needle: object) -> object:
    """SQLite's instr: the 1-based position of needle in haystack (bytes for two blobs, else characters)."""
    haystack, needle = _text(haystack), _text(needle)
    if isinstance(haystack, str) and isinstance(needle, str) or isinstance(haystack, bytes) and isinstance(needle, bytes):
        return haystack.find(needle) + 1  # type: ignore[arg-type]
    if haystack is None or needle is None:
        return None
    return _sqlite("SELECT instr(?, ?)", haystack, needle)  # a number: short


def replace(text: object, old: object, new: object) -> object:
    """SQLite's replace: every `old` in `text` replaced by `new` (an empty `old` replaces nothing)."""
    given, text, old, new = text, _text(text), _text(old), _text(new)
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        if not old:
            return given  # as SQLite answers: the first argument itself, of its own type
        longest = _longest[0]
        if len(new) > len(old) and len(text) + text.count(old) * (len(new) - len(old)) > longest:
            _STATE.refused = why = f"replace() would build a text past {longest >> 20} MiB, the longest allowed"
            raise TooCostly(why)
        return text.replace(old, new)
    if text is None or old is None or new is None:
        return None
    if _size(text) * max(_size(old), 1) > STEP_BUDGET:
        raise _refuse("replace", _size(text), _size(old))
    return _sqlite("SELECT replace(?, ?, ?)", text, old, new)


def _trim(name: str):
    def trim(text: object, characters: object) -> object:
        text, characters = _text(text), _text(characters)
        if text is None or characters is None:
            return None
        if isinstance(text, str) and isinstance(characters, str):
            characters = _distinct(characters)  # each character once: the cost is per distinct one
        if _size(text) * max(_size(characters), 1) > STEP_BUDGET:
            if not (isinstance(text, str) and isinstance(characters, str)):
                raise _refuse(name, _size(text), _size(characters))
            return _python_trim(name, text, characters)
        return _sqlite(f"SELECT {name}(?, ?)", text, characters)
    trim.__name__ = name
    trim.__doc__ = f"SQLite's {name}(X, Y): the characters of Y removed from X's ends."
    return trim


def _distinct(characters: str, passes: int = 64) -> str:
    """Each character of the text once, in order of first appearance: a few passes of str.replace (at memchr speed)
    while few distinct ones remain, else a set (a 65 MiB text of one character: 0.05 s, where a set takes 0.8 s)."""
    found = []
    while characters and len(found) < passes:
        found.append(characters[0])
        characters = characters.replace(characters[0], "")
    return "".join(found) + "".join(dict.fromkeys(characters))


def _python_trim(name: str, text: str, characters: str) -> str:
    """trim of many distinct characters: a character class matched once over the text."""
    run = re.compile("[" + "".join(re.escape(c) for c in characters) + "]*")
    start = run.match(text).end() if name in ("trim", "ltrim") else 0  # type: ignore[union-attr]
    end = len(text)
    if name in ("trim", "rtrim"):
        end -= run.match(text[start:][::-1]).end()  # type: ignore[union-attr]
    return text[start:end]


@lru_cache(maxsize=256)
def _segments(pattern: str, many: str, one: str, escape: str | None) -> tuple[str, ...] | None:
    """A pattern cut at its `many` wildcards into literal segments; None when it has a `one` wildcard (or a GLOB
    class), which the segments cannot say. The first and last segments are anchored unless empty."""
    if escape is None or escape not in pattern:  # split at C speed
        if one in pattern or (many == "*" and "[" in pattern):
            return None
        return tuple(pattern.split(many))
    parts, current, i = [], [], 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 == len(pattern):
                return None  # a trailing escape (SQLite: no match)
            current.append(pattern[i + 1])
            i += 2
            continue
        if c == many:
            parts.append("".join(current))
            current = []
        elif c == one or (many == "*" and c == "["):
            return None
        else:
            current.append(c)
        i += 1
    parts.append("".join(current))
    return tuple(parts)


def _match(segments: tuple[str, ...], text: str) -> bool:
    """Whether the text matches segments joined by wildcards for any run: greedy, leftmost (linear with find)."""
    if len(segments) == 1:
        return text == segments[0]
    first, *middle, last = segments
    if not text.startswith(first) or len(text) - len(first) < len(last) or not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for segment in middle:
        found = text.find(segment, at, end)
        if found < 0:
            return False
        at = found + len(segment)
    return True


def _fold(text: str) -> str:
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _wild_cost(pattern: str, many: str) -> int:
    """The characters of a pattern a match may compare at every position of the text: from its first wildcard on."""
    at = pattern.find(many)
    return 0 if at < 0 else len(pattern) - at


def like(pattern: object, text: object, escape: object = None) -> object:
    """SQLite's like(PATTERN, TEXT[, ESCAPE]), the LIKE operator: `%` any run, `_` any character, ASCII case folded."""
    pattern, text = _text(pattern), _text(text)
    if (pattern is None or text is None) and not isinstance(pattern, bytes) and not isinstance(text, bytes):
        return None  # (NULL beside a blob: SQLite says 0)
    if isinstance(pattern, str) and isinstance(text, str) and (escape is None or isinstance(escape, str) and len(escape) == 1):
        if 2 * len(text) < len(pattern) - pattern.count("%"):  # too short for the pattern: read neither (a 68 MB one)
            return 0
        segments = _segments(_fold(pattern), "%", "_", escape and _fold(escape))
        if segments is not None:
            return int(_match(segments, _fold(text)))
    if _size(text) * _wild_cost(str(pattern), "%") > STEP_BUDGET:
        raise _refuse("like", _size(text), _size(pattern))
    if escape is None:
        return _sqlite("SELECT like(?, ?)", pattern, text)
    return _sqlite("SELECT like(?, ?, ?)", pattern, text, escape)


def glob(pattern: object, text: object) -> object:
    """SQLite's glob(PATTERN, TEXT), the GLOB operator: `*` any run, `?` any character, `[...]` a class."""
    pattern, text = _text(pattern), _text(text)
    if (pattern is None or text is None) and not isinstance(pattern, bytes) and not isinstance(text, bytes):
        return None  # (NULL beside a blob: SQLite says 0)
    if isinstance(pattern, str) and isinstance(text, str):
        if "[" not in pattern and len(text) < len(pattern) - pattern.count("*"):  # too short: read neither
            return 0
        segments = _segments(pattern, "*", "?", None)
        if segments is not None:
            return int(_match(segments, text))
    if _size(text) * _wild_cost(str(pattern), "*") > STEP_BUDGET:
        raise _refuse("glob", _size(text), _size(pattern))
    return _sqlite("SELECT glob(?, ?)", pattern, text)


FUNCTIONS = {("instr", 2): instr, ("replace", 3): replace, ("like", 2): like, ("like", 3): like, ("glob", 2): glob,
             **{(name, 2): _trim(name) for name in ("trim", "ltrim", "rtrim")}}


# What tlindex.store.limits gives register: its connection of SQLite's own functions, and the longest value.
_side: list = [None]
_longest: list = [0]


def register(conn: sqlite3.Connection, side: Callable[[], sqlite3.Connection], longest: int) -> sqlite3.Connection:
    """Put these in place of SQLite's own on a connection (a function of a built-in's name takes its place); `side`
    gives this thread's plain connection, where SQLite's own run, `longest` the longest value a statement builds."""
    _side[0], _longest[0] = side, longest
    for (name, arity), function in FUNCTIONS.items():
        conn.create_function(name, arity, function, deterministic=True)
    return conn
