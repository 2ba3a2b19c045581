"""Text a log brings, cut to what a page shows: reasons, explanations, hints, names and labels can be a line of
64 MiB; a page shows the first PAGE_TEXT_CHARS characters, cut at a word and marked with "…", and links the whole
form (the record's own page, or its raw payload)."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

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


def bound_texts(data: object, limit: int = PAGE_VALUE_CHARS) -> object:
    """A page's data with every text longer than `limit` clipped, and every name (NAME_KEYS) longer than
    PAGE_TEXT_CHARS, at any depth of its dicts, lists, tuples and dataclasses (walked with a stack of its own:
    data can be as deep as a log made it)."""
    if isinstance(data, str):
        return clip(data, limit)
    root = [data]
    stack: list[tuple[object, object, int]] = [(root, 0, limit)]
    while stack:
        container, key, most = stack.pop()
        value = _get(container, key)
        if isinstance(value, str):
            if len(value) > most:
                _set(container, key, clip(value, most))
        elif isinstance(value, dict):
            stack.extend((value, k, PAGE_TEXT_CHARS if k in NAME_KEYS else limit) for k in value)
        elif isinstance(value, list):
            stack.extend((value, i, most) for i in range(len(value)))
        elif type(value) is tuple:  # (a named tuple's fields are what its type says)
            if any(isinstance(item, str) and len(item) > most for item in value):
                _set(container, key, tuple(clip(item, most) if isinstance(item, str) else item for item in value))
            stack.extend((value, i, most) for i, item in enumerate(value) if not isinstance(item, str))
        elif is_dataclass(value) and not isinstance(value, type):
            stack.extend((value, f.name, PAGE_TEXT_CHARS if f.name in NAME_KEYS else limit) for f in fields(value))
    return root[0]


def _get(container: object, key: object) -> object:
    if isinstance(key, str) and is_dataclass(container):
        return getattr(container, key)
    return container[key]  # type: ignore[index]


def _set(container: object, key: object, value: object) -> None:
    if isinstance(key, str) and is_dataclass(container):
        object.__setattr__(container, key, value)  # (a frozen dataclass's field too: the page's own copy)
    else:
        container[key] = value  # type: ignore[index]
