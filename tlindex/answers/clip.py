"""Text a log brings, cut to what a page shows: reasons, explanations, hints, names and labels can be a line of
64 MiB; a page shows the first PAGE_TEXT_CHARS characters, cut at a word and marked with "…", and links the whole
form (the record's own page, or its raw payload)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields, is_dataclass
from itertools import chain

PAGE_TEXT_CHARS = 2000
ELLIPSIS = "…"


def clip(text: str | None, limit: int = PAGE_TEXT_CHARS) -> str | None:
    """The text, or its head cut at the last space within the limit (within its last quarter, else at the limit),
    followed by "…"."""
    if text is None or len(text) <= limit:
        return text
    cut = text.rfind(" ", limit - limit // 4, limit)
    return text[:cut if cut > 0 else limit].rstrip() + ELLIPSIS


def clipped(text: str | None, limit: int = PAGE_TEXT_CHARS) -> bool:
    """Whether clip cuts the text."""
    return text is not None and len(text) > limit


# The longest text any page's data holds (a payload's head: tlindex.pages.artifact.PAGE_PAYLOAD_CHARS). Each page
# cuts what it shows of a log's text to far less where it lists it (a reason, a hint); this bounds the rest.
PAGE_VALUE_CHARS = 1 << 20
# Names a log gives, which pages list (an artifact's, a function's, a piece's, a file's, torch's version): cut to
# PAGE_TEXT_CHARS wherever a page's data holds them under these keys.
NAME_KEYS = frozenset({"name", "co_name", "co_filename", "filename", "submod_name", "torch_commit", "torch_version",
                       "title", "user_file", "short"})


_PLAIN = frozenset({int, float, bool, type(None), bytes})  # values with no text to clip and nothing inside
_FLAT = _PLAIN | {str}  # a container holding only these (texts short enough) has nothing to clip or walk
FLAT_CHECK_FROM = 8  # members from which a container is first checked for that (a smaller one: walked at once)


def bound_texts(data: object, limit: int = PAGE_VALUE_CHARS) -> object:
    """A page's data with every text longer than `limit` clipped, and every name (NAME_KEYS) longer than
    PAGE_TEXT_CHARS, at any depth of its dicts, lists, tuples and dataclasses (walked with a stack of its own:
    data can be as deep as a log made it). A list's or a tuple's texts are bounded as the container is. Only
    containers go on the stack, and the plain values are passed over in the container's own loop: a page of a big
    log holds hundreds of thousands of numbers and short texts."""
    if isinstance(data, str):
        return clip(data, limit)
    shortest = min(limit, PAGE_TEXT_CHARS)  # a text no longer than this is never clipped
    root = [data]
    stack: list[tuple[object, int]] = [(root, limit)]
    while stack:
        container, most = stack.pop()
        if isinstance(container, dict):
            if len(container) >= FLAT_CHECK_FROM and _nothing_inside(container.values(), shortest):
                continue
            for key, value in container.items():
                if type(value) is str and len(value) <= shortest or type(value) in _PLAIN:
                    continue
                _member(stack, container, key, value, PAGE_TEXT_CHARS if key in NAME_KEYS else limit)
        elif isinstance(container, (list, tuple)):
            if len(container) >= FLAT_CHECK_FROM and _nothing_inside(container, shortest):
                continue
            for index, value in enumerate(container):
                if type(value) is str and len(value) <= shortest or type(value) in _PLAIN:
                    continue
                _member(stack, container, index, value, most)
        else:  # a dataclass
            for f in fields(container):
                _member(stack, container, f.name, getattr(container, f.name),
                        PAGE_TEXT_CHARS if f.name in NAME_KEYS else limit)
    return root[0]


def _nothing_inside(members: Iterable[object], shortest: int) -> bool:
    """Whether a container's members, or its rows' members when each is a tuple or each a dict, are all plain values
    and texts of `shortest` characters at most: then nothing in it is clipped or walked. Checked without Python code
    per member (types, lengths and rows are walked by the builtins): most of a page's data is rows of such values."""
    kinds = set(map(type, members))
    if kinds == {tuple}:
        members = list(chain.from_iterable(members))
        kinds = set(map(type, members))
    elif kinds == {dict}:
        members = list(chain.from_iterable(map(dict.values, members)))
        kinds = set(map(type, members))
    if not kinds <= _FLAT:
        return False
    return str not in kinds or max(map(len, filter(str.__instancecheck__, members))) <= shortest


def _member(stack: list[tuple[object, int]], container: object, key: object, value: object, bound: int) -> None:
    """One member of a container walked: its text clipped to `bound`, or it put on the stack to be walked."""
    if isinstance(value, str):
        if len(value) > bound and type(container) is not tuple:  # (a tuple's texts: bounded with it)
            _set(container, key, clip(value, bound))
    elif type(value) is tuple:  # (a named tuple's fields are what its type says)
        if type(container) is not tuple:  # (one inside a tuple was bounded with it)
            bounded = _bounded_tuple(value, bound)
            if bounded is not value:
                _set(container, key, bounded)
                value = bounded
        stack.append((value, bound))
    elif isinstance(value, (dict, list)) or (is_dataclass(value) and not isinstance(value, type)):
        stack.append((value, bound))


def _bounded_tuple(value: tuple, bound: int) -> tuple:
    """The tuple, or a copy with its texts clipped, the tuples in it too (a tuple cannot be changed in place)."""
    if not any(type(item) is tuple or isinstance(item, str) and len(item) > bound for item in value):
        return value  # (most are: a row's short cells)
    items = [clip(item, bound) if isinstance(item, str) else _bounded_tuple(item, bound) if type(item) is tuple
             else item for item in value]
    return value if all(new is old for new, old in zip(items, value)) else tuple(items)


def _set(container: object, key: object, value: object) -> None:
    if isinstance(key, str) and is_dataclass(container):
        object.__setattr__(container, key, value)  # (a frozen dataclass's field too: the page's own copy)
    else:
        container[key] = value  # type: ignore[index]
