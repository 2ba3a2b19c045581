"""Text a log brings, cut to what a page shows: reasons, explanations, hints, names and labels can be a line of
64 MiB; a page shows the first PAGE_TEXT_CHARS characters, cut at a word and marked with "…", and links the whole
form (the record's own page, or its raw payload)."""

from __future__ import annotations

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


def bound_texts(data: object, limit: int = PAGE_VALUE_CHARS) -> object:
    """A page's data with every text longer than `limit` clipped, at any depth of its dicts, lists and tuples
    (walked with a stack of its own: data can be as deep as a log made it)."""
    if isinstance(data, str):
        return clip(data, limit)
    root = [data]
    stack: list[tuple[object, object]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        value = container[key]  # type: ignore[index]
        if isinstance(value, str):
            if len(value) > limit:
                container[key] = clip(value, limit)  # type: ignore[index]
        elif isinstance(value, dict):
            stack.extend((value, k) for k in value)
        elif isinstance(value, list):
            stack.extend((value, i) for i in range(len(value)))
        elif type(value) is tuple:  # (a named tuple's fields are what its type says)
            if any(isinstance(item, str) and len(item) > limit for item in value):
                container[key] = tuple(clip(item, limit) if isinstance(item, str) else item  # type: ignore[index]
                                       for item in value)
            stack.extend((value, i) for i, item in enumerate(value) if isinstance(item, (dict, list)))
    return root[0]
